"""A pixel's own departure from the ground, interpolated in time from its clear dates.

The ground L of a decomposition is what the dates share over the whole series; a pixel also
departs from it in ways that last a while and that no spatial neighbour shares: a field laid
bare, snow that stays a week, a crop that greens early. On a date the mask keeps, that
departure is seen: the residual D − L. Under a cloud it is not, but the dates just before and
just after usually saw it. :func:`interpolated_departure` gives every entry the residual of the
pixel's nearest kept dates before and after it, interpolated linearly in time (the one on a
side when the other has none, 0 when the pixel was never kept): the classic temporal gap fill
of compositing, applied to the departure from the low-rank ground rather than to the
observation, so that what the dates share still comes from all of them. The entry's own date is
never read, so a kept entry's value does not enter its own estimate.

For a geostationary series (GF-4 stares: many acquisitions a day) the nearest clear
acquisitions are minutes or hours away; that this makes them better evidence there is expected,
not measured (no such series with a reference mask could be found). Held out on five real
series of days to weeks between dates it is scored in docs/REAL-CLOUDS.md ("A pixel's own
clear dates").
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["interpolated_departure", "raised_ground"]


def interpolated_departure(
    residual: np.ndarray, evidence: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """Each entry's departure from the ground, from its pixel's nearest evidence in time.

    Parameters
    ----------
    residual
        ``(dates, ...)`` the residual D − L of every entry (float32 or float64); read only where
        ``evidence`` is True and it is finite.
    evidence
        ``(dates, ...)`` booleans: the entries whose residual is the pixel's departure (the
        observations the mask keeps).
    times
        ``(dates,)`` the dates' times in any one unit (days, seconds), in any order. Dates at
        one time are taken in the order given: of two kept ones, the later is the nearer on
        either side; an entry between two at its own time takes their mean.

    Returns
    -------
    numpy.ndarray
        The shape and dtype of ``residual``: at each entry the residual of its pixel's last
        evidence strictly before it in the dates' order and of its first after, weighted by
        their distance in time (the nearer weighs more); the one side's where the other has
        none; 0 where the pixel has no evidence on any other date.

    Raises
    ------
    ValueError
        Shapes that do not match, or a time that is not finite.
    """
    values = np.asarray(residual)
    flags = np.asarray(evidence, dtype=bool)
    stamps = np.asarray(times, dtype=np.float64)
    if flags.shape != values.shape or stamps.shape != values.shape[:1]:
        raise ValueError(
            f"interpolated_departure: residual {values.shape}, evidence {flags.shape} and "
            f"times {stamps.shape} do not match (dates first)"
        )
    if not np.isfinite(stamps).all():
        raise ValueError("interpolated_departure: every date needs a finite time")
    n = values.shape[0]
    if n == 0 or values.size == 0:
        return np.zeros_like(values)
    rows, kept = values.reshape(n, -1), flags.reshape(n, -1)
    out = np.zeros(rows.shape, dtype=values.dtype)
    if (np.diff(stamps) >= 0).all():  # in time order already (a run's dates): no copies
        _interpolate(rows, kept, stamps, out)
        return out.reshape(values.shape)
    order = np.argsort(stamps, kind="stable")
    _interpolate(rows[order], kept[order], stamps[order], out)
    unsorted = np.empty_like(out)
    unsorted[order] = out
    return unsorted.reshape(values.shape)


def raised_ground(
    observation: np.ndarray, ground: np.ndarray, kept: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """A series' ground raised by each pixel's own departure from it on its nearest kept dates
    (:func:`interpolated_departure` of D − L where kept and observed), not clipped.

    Parameters
    ----------
    observation, ground
        ``(bands, dates, ...)``; the observation NaN where not observed.
    kept
        ``(dates, ...)`` booleans, shared by the bands: the entries the mask keeps as observed.
    times
        ``(dates,)`` the dates' times.

    Returns
    -------
    numpy.ndarray
        ``ground`` plus the departure, float64 (``(bands, dates, ...)``).
    """
    evidence = np.broadcast_to(kept, observation.shape) & np.isfinite(observation)
    with np.errstate(invalid="ignore"):
        residual = np.where(evidence, observation - ground, 0.0)
    departure = interpolated_departure(
        np.moveaxis(residual, 1, 0), np.moveaxis(evidence, 1, 0), times
    )
    return ground + np.moveaxis(departure, 0, 1)


@njit(cache=True, nogil=True)
def _interpolate(
    residual: np.ndarray, evidence: np.ndarray, times: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled; tested through interpolated_departure
    # Per pixel, two passes over its dates (in time order) find each date's nearest evidence
    # before and after it, then a third writes the interpolation: O(dates) per pixel, so a long
    # archive costs no more per date than a short one.
    n, pixels = residual.shape
    before = np.empty(n, np.int64)
    after = np.empty(n, np.int64)
    for p in range(pixels):
        last = -1
        for k in range(n):
            before[k] = last
            if evidence[k, p] and np.isfinite(residual[k, p]):
                last = k
        last = -1
        for k in range(n - 1, -1, -1):
            after[k] = last
            if evidence[k, p] and np.isfinite(residual[k, p]):
                last = k
        for k in range(n):
            b, a = before[k], after[k]
            if b >= 0 and a >= 0:
                gap_before, gap_after = times[k] - times[b], times[a] - times[k]
                total = gap_before + gap_after
                weight = 0.5 if total <= 0.0 else gap_after / total
                out[k, p] = weight * residual[b, p] + (1.0 - weight) * residual[a, p]
            elif b >= 0:
                out[k, p] = residual[b, p]
            elif a >= 0:
                out[k, p] = residual[a, p]
