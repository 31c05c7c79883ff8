"""The date's own departure from the ground, spread from its clear pixels to its hidden ones.

A decomposition's ground L is what the series has in common; a date also departs from it in
ways no other date shares (the season, the sun's angle, the atmosphere's transmission that
day). Where a date saw the ground, the residual D − L measures that departure; it varies slowly
in space. Writing L alone under a cloud drops it, and the filled pixels then differ from their
clear neighbours of the same date (on real cloudy series r 0.21–0.35 of the truth, the
departure being most of it: docs/REAL-CLOUDS.md). :func:`clear_offset` estimates it at every
pixel from the clear pixels around, per band and date, by normalised convolution: the residual
and the clear pixels' count are summed over square blocks of ``block`` pixels, each smoothed by
a Gaussian of ``scale`` pixels on the blocks' grid, and their quotient interpolated bilinearly
between block centres. Far from any clear pixel the estimate shrinks to 0 (the ground alone).

The blocks are anchored at the image's first row and column, and a block's value depends only
on the blocks within :func:`offset_margin` pixels, so a window of a larger image whose origin is
a multiple of ``block`` and which reaches that far beyond the pixels wanted gives them the
values the whole image gives (the pipeline computes it per tile; tested). Only clear entries
are read (the caller's ``weight``): a cloud's own brightness never enters the estimate.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from cloudcore.catalog import MASK_OFFSET

__all__ = ["OFFSET_BLOCK", "OFFSET_SCALE", "clear_offset", "offset_margin"]

#: Side in pixels of the blocks the residual is summed over (a power of two, so that it divides
#: the pipeline's tile sizes).
OFFSET_BLOCK = 8
#: The Gaussian's standard deviation in pixels: how far a clear pixel's residual reaches.
OFFSET_SCALE = MASK_OFFSET
#: The Gaussian is cut at this many standard deviations.
TRUNCATE = 3.0
#: Pseudo-count, as a share of the Gaussian's weight: with less clear weight than this around a
#: pixel the offset shrinks towards 0 in proportion.
PRIOR = 0.01


def offset_margin(block: int = OFFSET_BLOCK, scale: float = OFFSET_SCALE) -> int:
    """Pixels beyond a window's edge that :func:`clear_offset` reads: the Gaussian's reach on the
    blocks' grid and one block more for the interpolation, in whole blocks."""
    return block * (math.ceil(TRUNCATE * scale / block) + 1)


def clear_offset(
    residual: np.ndarray,
    weight: np.ndarray,
    block: int = OFFSET_BLOCK,
    scale: float = OFFSET_SCALE,
) -> np.ndarray:
    """The smoothed residual of the clear entries, per image.

    Parameters
    ----------
    residual
        ``(..., rows, cols)`` D − L; read only where ``weight``.
    weight
        Booleans broadcastable to ``residual``: the entries whose residual is evidence (the
        clear entries the output keeps as observed). A ``(dates, rows, cols)`` weight is shared
        by the bands of a ``(bands, dates, rows, cols)`` residual.
    block, scale
        The blocks' side and the Gaussian's standard deviation, in pixels.

    Returns
    -------
    numpy.ndarray
        float32 of ``residual``'s shape: the offset to add to the ground at every entry.
    """
    from scipy.ndimage import gaussian_filter

    res = np.asarray(residual)
    w = np.broadcast_to(np.asarray(weight, dtype=bool), res.shape)
    rows, cols = res.shape[-2:]
    total, count = _block_sums(res, w, block)
    sigma = (0.0,) * (res.ndim - 2) + (scale / block, scale / block)
    # Outside the image there is no evidence: zeros (mode "constant"), for sums and counts alike.
    total = gaussian_filter(total, sigma, mode="constant", truncate=TRUNCATE)
    count = gaussian_filter(count, sigma, mode="constant", truncate=TRUNCATE)
    # The prior is a pseudo-count of PRIOR of a block's pixels (0.64 px for 8 × 8 blocks).
    coarse = total / (count + np.float32(PRIOR * block * block))
    # Bilinear between block centres, one axis at a time (the blocks' grid is regular): the
    # rows of the coarse grid first, then its columns at full size.
    r0, r1, fr = _linear(rows, block, coarse.shape[-2])
    c0, c1, fc = _linear(cols, block, coarse.shape[-1])
    by_rows = coarse[..., r0, :] * (1 - fr)[:, None] + coarse[..., r1, :] * fr[:, None]
    out = np.empty(res.shape, np.float32)
    lines = by_rows.reshape(-1, by_rows.shape[-1])
    _interpolate_columns(lines, c0, c1, fc, 1 - fc, out.reshape(lines.shape[0], cols))
    return out


def _linear(size: int, block: int, blocks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Neighbouring block centres and the weight of the second, for pixels ``0 … size − 1``:
    block k's centre is at pixel (k + 0.5)·block − 0.5; beyond the first and last centres the
    nearest block's value (both neighbours clamped to it)."""
    at = (np.arange(size, dtype=np.float64) + 0.5) / block - 0.5
    low = np.floor(at).astype(np.intp)
    frac = (at - low).astype(np.float32)
    return np.clip(low, 0, blocks - 1), np.clip(low + 1, 0, blocks - 1), frac


@njit(cache=True, nogil=True)
def _interpolate_columns(
    lines: np.ndarray,
    c0: np.ndarray,
    c1: np.ndarray,
    fc: np.ndarray,
    gc: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through clear_offset
    # out[k, c] = lines[k, c0[c]] · gc[c] + lines[k, c1[c]] · fc[c] (gc = 1 − fc), in float32
    # as NumPy's expression computes it, in one pass: NumPy's two gathers and three
    # temporaries at full size were a third of the mask pass's time with the offset.
    for k in range(lines.shape[0]):
        line = lines[k]
        for c in range(out.shape[1]):
            out[k, c] = line[c0[c]] * gc[c] + line[c1[c]] * fc[c]


def _block_sums(x: np.ndarray, weight: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 sums of ``x`` where ``weight`` and ``x`` is finite, and their count, over ``block``
    × ``block`` squares of the last two axes (a partial square at the end sums what there is)."""
    rows, cols = x.shape[-2:]
    lead = x.shape[:-2]
    shape = (int(np.prod(lead, dtype=np.int64)), -(-rows // block), -(-cols // block))
    total = np.zeros(shape, np.float32)
    count = np.zeros(shape, np.float32)
    _sum_blocks(x.reshape(-1, rows, cols), weight.reshape(-1, rows, cols), block, total, count)
    return total.reshape(*lead, *shape[1:]), count.reshape(*lead, *shape[1:])


@njit(cache=True, nogil=True)
def _sum_blocks(
    x: np.ndarray, weight: np.ndarray, block: int, total: np.ndarray, count: np.ndarray
) -> None:  # pragma: no cover - compiled; tested through clear_offset
    # One pass over the entries, each block's in row-major order: the same sums for a block
    # wherever the window holding it starts (a multiple of ``block`` away).
    for k in range(x.shape[0]):
        for r in range(x.shape[1]):
            br = r // block
            for c in range(x.shape[2]):
                # A NaN residual (a date a tile left out) is no evidence, whatever ``weight``.
                if weight[k, r, c] and np.isfinite(x[k, r, c]):
                    total[k, br, c // block] += np.float32(x[k, r, c])
                    count[k, br, c // block] += np.float32(1.0)
