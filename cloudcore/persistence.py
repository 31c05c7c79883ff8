"""Ground that stays: a brightening flagged as cloud that is there again, in place, on the
nearest acquisitions of other days, and alone there, is ground (a field laid bare, snow), not
cloud (:func:`persistent_ground`; ``MaskRule.persist``, :func:`cloudcore.masks.classify_scores`).

A field laid bare or a patch of snow departs from a year's low-rank ground on a few dates and
is white, so no threshold on the size or colour of a brightening tells it from a cloud; what
tells it is time and shape together. GF-4 stares: its acquisitions of one day, minutes apart,
see the same clouds, so each date is compared with the nearest acquisitions of other days
(:func:`other_day_neighbours`). Off by default (``MaskRule.persist`` 0): it cannot tell a
cloud that recurs in place from day to day (valley fog, a cloud held by a ridge) from ground
that stays (docs/REAL-CLOUDS.md, "Ground that stays").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from cloudcore._morphology import dilate

if TYPE_CHECKING:
    from cloudcore.masks import MaskRule

__all__ = ["Neighbours", "neighbour_scores", "other_day_neighbours", "persistent_ground"]


class Neighbours(NamedTuple):
    """The brightening of each date's nearest acquisitions of other days (:func:`neighbour_scores`).

    Attributes
    ----------
    bright
        ``(2, dates, rows, cols)`` float32: the mean brightening A/σ of the date's neighbour
        before (0) and after (1), NaN where that neighbour did not observe the pixel.
    exists
        ``(2, dates)`` booleans: the date has that neighbour.
    """

    bright: np.ndarray
    exists: np.ndarray

    def dates(self, pick: slice) -> Neighbours:
        """These neighbours of the dates ``pick`` selects."""
        return Neighbours(self.bright[:, pick], self.exists[:, pick])


def other_day_neighbours(days: np.ndarray, gap: float = 0.5) -> np.ndarray:
    """For each date, the nearest date at least ``gap`` days before it and after it.

    GF-4 stares: the same day's acquisitions are minutes apart and see the same clouds, so
    ground that stays (:func:`persistent_ground`) is judged against other days.

    Parameters
    ----------
    days
        ``(dates,)`` acquisition times: ``datetime64`` or days as numbers.
    gap
        The least time apart, in days.

    Returns
    -------
    numpy.ndarray
        ``(dates, 2)`` int64: the index of the neighbour before and after, -1 where none (of
        equally near ones, the later index).
    """
    t = np.asarray(days)
    if np.issubdtype(t.dtype, np.datetime64):
        t = (t - t.min()) / np.timedelta64(1, "s") / 86400.0
    t = t.astype(np.float64)
    out = np.full((t.size, 2), -1, np.int64)
    for i, ti in enumerate(t):
        before = np.flatnonzero(t <= ti - gap)
        after = np.flatnonzero(t >= ti + gap)
        if before.size:
            out[i, 0] = before[t[before] == t[before].max()][-1]
        if after.size:
            out[i, 1] = after[t[after] == t[after].min()][-1]
    return out


def neighbour_scores(
    bright: np.ndarray, observed: np.ndarray, neighbours: np.ndarray
) -> Neighbours:
    """Each date's neighbours' brightening (:class:`Neighbours`), for :func:`classify_scores`.

    Parameters
    ----------
    bright
        ``(dates, rows, cols)`` mean brightening A/σ (:class:`BandMean`).
    observed
        ``(dates, rows, cols)`` booleans.
    neighbours
        ``(dates, 2)`` indices (:func:`other_day_neighbours`).

    Returns
    -------
    Neighbours
    """
    out = np.full((2, *bright.shape), np.nan, np.float32)
    for side in range(2):
        for t, u in enumerate(neighbours[:, side]):
            if u >= 0:
                np.copyto(out[side, t], bright[u], where=observed[u])
    return Neighbours(out, np.asarray(neighbours).T >= 0)


def persistent_ground(
    bright: np.ndarray,
    flagged: np.ndarray,
    observed: np.ndarray,
    neighbours: Neighbours,
    rule: MaskRule,
) -> np.ndarray:
    """Where a brightening flagged as cloud or haze is ground that stays.

    A field laid bare, a patch of snow or a bright roof departs from a year's low-rank ground
    on a few dates, and the departure is white: no threshold on its size or colour tells it
    from a cloud. What tells it is time and shape: it is there, at the same place, on the
    nearest acquisitions of other days, and what is around it is not. A flagged pixel is ground
    where, on each neighbour the date has (before, after), within ``rule.persist_reach`` pixels:
    at least ``rule.persist_cover`` of the date's flagged pixels are brightened by at least
    ``rule.persist`` of their own brightening, and at most ``rule.persist_spill`` of its
    observed unflagged pixels by ``rule.haze`` σ (a neighbour cloudy all round: a cloud that
    stayed, or another, not the ground). A pixel with no unflagged pixel within reach (inside
    a large cloud) stays flagged, and so does every pixel of a date with no neighbour.

    Parameters
    ----------
    bright
        ``(dates, rows, cols)`` mean brightening A/σ as measured.
    flagged
        Booleans of the same shape: cloud or haze.
    observed
        Booleans of the same shape.
    neighbours
        The neighbours' brightening (:func:`neighbour_scores`), the same dates.
    rule
        ``persist``, ``persist_reach``, ``persist_cover``, ``persist_spill`` and ``haze``.

    Returns
    -------
    numpy.ndarray
        Booleans of ``flagged``'s shape.

    Notes
    -----
    The shares are exact window means (:func:`cloudcore._window.window_means`' integer sums,
    as :func:`cloudcore.masks.darkening_level`'s), so a tile classified with ``rule.context``
    pixels around it gives the whole scene's result bit for bit.
    """
    reach = rule.persist_reach
    ring = observed & ~flagged
    wanted = np.asarray(flagged.any(axis=(-2, -1)) & neighbours.exists.any(axis=0))
    ground = flagged & wanted[:, None, None]
    if not ground.any():
        return ground
    ground &= dilate(ring, reach)  # some unflagged pixel within reach
    with np.errstate(invalid="ignore"):  # NaN: the neighbour did not observe the pixel
        for side, there in enumerate(neighbours.bright):
            kept = (there >= np.float32(rule.persist) * bright).astype(np.float32)
            cover = _window_share(kept, flagged, reach, wanted) >= rule.persist_cover
            cloudy = (there >= np.float32(rule.haze)).astype(np.float32)
            spill = _window_share(cloudy, ring, reach, wanted) <= rule.persist_spill
            ground &= ~neighbours.exists[side][:, None, None] | (cover & spill)
    return ground


def _window_share(
    values: np.ndarray, counted: np.ndarray, reach: int, dates: np.ndarray
) -> np.ndarray:
    """The mean of ``values`` over the ``counted`` entries of the (2·``reach`` + 1)² square
    around each entry of the ``dates`` marked (0 where it counts none, and for the others),
    from exact integer sums (:func:`cloudcore._window.window_means`)."""
    from cloudcore._window import window_means

    out = np.zeros(values.shape, dtype=np.float32)
    window_means(values, np.ascontiguousarray(counted), reach, 0.0, dates, out)
    return out
