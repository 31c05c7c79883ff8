"""The feather blend of two overlapping tiles' values in one pass (numba kernel).

:func:`mix_pair` is Σ w·x / Σ w over two pieces, counting a piece only where its value is
finite, NaN where neither is: the arithmetic of :mod:`pipeline.solve.rowblend`, in float32 and in
the same order as the NumPy expression it replaced (``num = 0 + x₁·w₁ (+ x₂·w₂)``, ``den =
0 + w₁ (+ w₂)``, ``num / den``), so the results are the same bit for bit (tested against it).

Why a kernel: that NumPy expression made ten passes over the values (``isfinite``, the
products, the masked adds, the NaN fill, the division) and allocated a temporary for most of
them; one overlap of a full-size tile (4 layers × 7 dates × 1280 rows × 256 columns, twice per
tile, and again in every seam) took about a tenth of the time spent outside the solver in the
row and seam tasks (profiled at 2560²).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["mix_pair"]


# Compiled (or loaded from numba's cache) on import, for the two layouts the pipeline passes:
# strided views of a tile's columns (row tasks) and contiguous strips (seams); {0} is the
# values' type, {1} the weights'.
_STRIDED = "void({0}[:, :, :], {1}, {0}[:, :, :], {1}, {0}[:, :, ::1])"
_CONTIGUOUS = "void({0}[:, :, ::1], {1}, {0}[:, :, ::1], {1}, {0}[:, :, ::1])"
_SIGNATURES = [s.format("float32", "float32[:, ::1]") for s in (_CONTIGUOUS, _STRIDED)]


@njit(_SIGNATURES, cache=True, nogil=True)
def mix_pair(
    first: np.ndarray,
    first_weights: np.ndarray,
    second: np.ndarray,
    second_weights: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through pipeline.solve.rowblend
    """Fill ``out`` with the weighted mean of ``first`` and ``second`` where finite.

    ``first``, ``second`` and ``out`` are float32 (lead, rows, cols) arrays of one shape (any
    strides); the weights are float32 (rows, cols), shared by every leading index. ``out`` may
    not overlap the inputs.
    """
    zero = np.float32(0.0)
    nan = np.float32(math.nan)
    lead, rows, cols = out.shape
    for k in range(lead):
        for i in range(rows):
            for j in range(cols):
                x = first[k, i, j]
                y = second[k, i, j]
                num = zero
                den = zero
                if math.isfinite(x):
                    w = first_weights[i, j]
                    num = num + x * w
                    den = den + w
                if math.isfinite(y):
                    w = second_weights[i, j]
                    num = num + y * w
                    den = den + w
                out[k, i, j] = num / den if den > zero else nan
