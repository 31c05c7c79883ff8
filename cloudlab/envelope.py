"""A written value held within what its pixel was seen to be on its kept dates.

Under a cloud the outputs write a model: the ground, raised by the pixel's departure on its
nearest kept dates and the date's offset (:mod:`cloudcore.compose`). Where the model goes wrong
(a shadow taken into aATM's ground, whose cloud layer is non-negative, writes that date's ground
too dark; docs/REAL-CLOUDS.md, "Where the default fails on the other years"), the value written
can lie outside anything the pixel was ever observed to be on a clear date. The *envelope* of a
pixel in a band is the range of its observations on the dates the mask keeps (or two quantiles
of them); a written value outside it is moved to its nearer edge. Kept observations are never
touched, so a clear pixel still comes out as observed.

Benchmark only (``PostStep.envelope``, ``benchmarks/solve_folds.py --envelope``): held out it
was not adopted (docs/REAL-CLOUDS.md, "A written value held within its pixel's kept dates"), so
the pipeline does not offer it.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["MIN_KEPT_DATES", "kept_envelope", "within_envelope"]

#: The fewest kept observations of a pixel in a band for it to have an envelope: with one or
#: two the range says little of what the pixel can be, and would pin the fill to them.
MIN_KEPT_DATES = 3


def kept_envelope(
    observation: np.ndarray,
    kept: np.ndarray,
    quantiles: tuple[float, float] = (0.0, 1.0),
    min_dates: int = MIN_KEPT_DATES,
) -> tuple[np.ndarray, np.ndarray]:
    """Per band and pixel, the low and high edge of its observations on its kept dates.

    Parameters
    ----------
    observation
        ``(bands, dates, ...)`` observed values, NaN where not observed.
    kept
        ``(dates, ...)`` booleans shared by the bands, or ``(bands, dates, ...)``: the entries
        the outputs keep as observed.
    quantiles
        The edges as quantiles of the kept observations; ``(0, 1)``: their least and largest.
    min_dates
        The fewest kept observations for an envelope (:data:`MIN_KEPT_DATES`).

    Returns
    -------
    tuple of numpy.ndarray
        ``low`` and ``high``, each ``(bands, ...)`` float64; NaN where the pixel has fewer than
        ``min_dates`` kept observations in the band (no envelope).
    """
    low_q, high_q = quantiles
    if not 0.0 <= low_q <= high_q <= 1.0:
        raise ValueError(f"kept_envelope: quantiles must be 0 <= low <= high <= 1, got {quantiles}")
    obs = np.asarray(observation, dtype=np.float64)
    evidence = np.broadcast_to(kept, obs.shape) & np.isfinite(obs)
    values = np.where(evidence, obs, np.nan)
    enough = evidence.sum(axis=1) >= min_dates
    with warnings.catch_warnings():  # "All-NaN slice": a pixel with no kept date
        warnings.simplefilter("ignore", RuntimeWarning)
        if (low_q, high_q) == (0.0, 1.0):  # nanquantile over NaNs is a per-pixel loop: 1600x
            low, high = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
        else:
            low, high = np.nanquantile(values, [low_q, high_q], axis=1)
    return np.where(enough, low, np.nan), np.where(enough, high, np.nan)


def within_envelope(
    values: np.ndarray, low: np.ndarray, high: np.ndarray, written: np.ndarray
) -> np.ndarray:
    """``values`` with each ``written`` entry moved into ``[low, high]`` where it has an
    envelope (:func:`kept_envelope`); every other entry unchanged.

    Parameters
    ----------
    values
        The outputs, any shape.
    low, high
        The envelope's edges, broadcast to ``values``; NaN: no envelope.
    written
        Booleans broadcast to ``values``: the entries the model wrote (not kept as observed).

    Returns
    -------
    numpy.ndarray
        A new array of ``values``' shape and dtype.
    """
    out = np.array(values, copy=True)
    lo = np.broadcast_to(low, out.shape)
    hi = np.broadcast_to(high, out.shape)
    move = np.broadcast_to(written, out.shape) & np.isfinite(lo) & np.isfinite(out)
    out[move] = np.clip(out[move], lo[move], hi[move])
    return out
