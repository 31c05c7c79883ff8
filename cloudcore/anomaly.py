"""The anomaly scale σ: how far clear ground departs from the low-rank fit.

The masks' thresholds (:mod:`cloudcore.masks`) and the refinement's
(:func:`cloudcore.refine`) are in units of σ, read off the observed entries *below* the
ground (D < L): clouds and haze only brighten, so those are clear ones (and the rare shadow),
and σ measures noise, registration and phenology even when most entries are cloudy. A tile
holds ~10⁷ entries, so σ is read off an evenly strided sample of whole rows.
"""

from __future__ import annotations

import numpy as np

from cloudcore.result import Decomposition

__all__ = [
    "HALF_NORMAL_QUARTILE",
    "SCALE_SAMPLE",
    "SCALE_STATISTICS",
    "anomaly_scale",
    "result_scale",
    "sample_entries",
]

#: The lower quartile of |x| for x ~ N(0, 1), Φ⁻¹(0.625): the ``"quartile"`` anomaly scale
#: divides the quartile of the entries below the ground by it (:func:`anomaly_scale`).
HALF_NORMAL_QUARTILE = 0.31863936396437514

#: The statistics an anomaly scale can be read with (:func:`anomaly_scale`).
SCALE_STATISTICS = ("median", "quartile")

#: Entries sampled (evenly strided) for the anomaly scale of a large matrix.
SCALE_SAMPLE = 1 << 20


def sample_entries(
    values: np.ndarray, keep: np.ndarray | None = None, limit: int = SCALE_SAMPLE
) -> np.ndarray:
    """The kept, finite entries of an evenly strided sample of at most about ``limit`` entries.

    A 2-D (pixels, dates) array is sampled by whole rows (every date of each sampled pixel):
    striding its flattened entries would, whenever the stride shares a factor with the number
    of dates, keep only some dates. ``keep`` (same shape, None: all) is applied after sampling,
    which costs one pass over the sample rather than over the whole tile.
    """
    x = np.asarray(values)
    rows = x if x.ndim == 2 else x.reshape(-1, 1)
    step = _row_step(rows.size, limit)
    sample = rows[::step]
    chosen = np.isfinite(sample)
    if keep is not None:
        mask = np.asarray(keep)
        chosen &= (mask if mask.ndim == 2 else mask.reshape(-1, 1))[::step]
    return sample[chosen]


def _row_step(size: int, limit: int = SCALE_SAMPLE) -> int:
    """The row stride of :func:`sample_entries` for an array of ``size`` entries."""
    return max(1, size // limit)


def anomaly_scale(
    residual: np.ndarray, observed: np.ndarray | None = None, statistic: str = "median"
) -> float:
    """σ, the scatter of the observed entries below the ground (D < L) about it: 1.4826 ×
    their median |D − L| (or their lower quartile, ``statistic``), of an evenly strided sample
    of at most about :data:`SCALE_SAMPLE` entries; 0 when there are none.

    Parameters
    ----------
    residual
        D − L (any shape), e.g. C + N − S of a decomposition; NaN entries are skipped.
    observed
        Boolean of the same shape, True where observed (None: every finite entry).
    statistic
        ``"median"`` (the default, the pipeline's) or ``"quartile"``: the lower quartile of
        |D − L| over :data:`HALF_NORMAL_QUARTILE`. Both are σ when every entry below the ground
        is clear. Where shadows are more than half of them the median is read off the shadows'
        depth; the quartile is, up to three quarters, still read off the clear entries, too
        large by a bounded factor (2.8 at 60 %). Measured, not the default (docs/REAL-CLOUDS.md,
        "aATM with a shadow layer").
    """
    # Sampled before it is filtered: a tile's halo is ~10M entries, and this runs once per tile.
    return _spread_below(sample_entries(residual, observed), statistic)


def result_scale(result: Decomposition, observed: np.ndarray | None = None) -> float:
    """:func:`anomaly_scale` of a decomposition's C + N − S, from the same sampled rows, without
    summing the layers over the whole matrix (two full temporaries per tile otherwise).

    Parameters
    ----------
    result
        A decomposition of a (pixels, dates) matrix.
    observed
        Its (pixels, dates) observed entries (None: every finite entry).
    """
    rows = slice(None, None, _row_step(result.C.size))
    residual = result.C[rows] + result.N[rows]
    if result.S is not None:
        residual -= result.S[rows]
    keep = None if observed is None else np.asarray(observed)[rows]
    # The rows are the sample already: take every entry of them.
    return _spread_below(sample_entries(residual, keep, limit=residual.size))


def _spread_below(values: np.ndarray, statistic: str = "median") -> float:
    """σ from the negative ``values`` (entries below the ground), by ``statistic``
    (:func:`anomaly_scale`); 0 when there are none."""
    if statistic not in SCALE_STATISTICS:
        raise ValueError(f"statistic {statistic!r}: expected one of {SCALE_STATISTICS}")
    depth = np.negative(values[values < 0])
    if depth.size == 0:
        return 0.0
    if statistic == "quartile":
        return float(np.quantile(depth, 0.25) / HALF_NORMAL_QUARTILE)
    return float(1.4826 * np.median(depth))
