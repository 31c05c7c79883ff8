"""Bilinear resampling through a lattice of exact source coordinates (numba kernel).

:func:`warp_bilinear` is the 4-sample bilinear rule of GDAL's warp kernel
(``GWKBilinearResample4Sample``, used when the resampling scale is at least 0.95), with GDAL's
coordinate convention (source pixel centres at +0.5) and its no-data rules:

* a destination pixel stays NaN when its point falls outside the source or on a no-data pixel;
* otherwise the valid ones of the 4 neighbours are averaged with bilinear weights renormalised
  to their sum (within half a pixel of the image edge this is the edge pixel).

The source coordinate of each destination pixel is interpolated bilinearly between lattice nodes
where the exact transformation was evaluated (:mod:`pipeline.stage.rpc_lattice` places them on the
grid, so the result does not depend on how the grid is cut into windows). All bands share one
validity (NaN in the first band means no data), so the weights are computed once per pixel.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["warp_bilinear"]


@njit(cache=True, nogil=True)
def warp_bilinear(
    src: np.ndarray,
    node_rows: np.ndarray,
    node_cols: np.ndarray,
    row_first: int,
    col_first: int,
    step: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through pipeline.stage.warp
    """Fill ``out`` (bands, H, W) from ``src`` (bands, h, w) float32, NaN = no data.

    ``node_rows``/``node_cols`` hold the source coordinates (GDAL convention) of lattice nodes
    every ``step`` destination pixels; destination pixel (0, 0) lies ``row_first``/``col_first``
    pixels past node (0, 0). ``out`` must start as NaN; pixels without data are left alone.
    """
    nb, h, w = src.shape
    inv = 1.0 / step
    for i in range(out.shape[1]):
        k = (i + row_first) // step
        fy = (i + row_first - k * step) * inv
        for j in range(out.shape[2]):
            m = (j + col_first) // step
            fx = (j + col_first - m * step) * inv
            top = (1 - fx) * node_rows[k, m] + fx * node_rows[k, m + 1]
            bottom = (1 - fx) * node_rows[k + 1, m] + fx * node_rows[k + 1, m + 1]
            sy = (1 - fy) * top + fy * bottom
            top = (1 - fx) * node_cols[k, m] + fx * node_cols[k, m + 1]
            bottom = (1 - fx) * node_cols[k + 1, m] + fx * node_cols[k + 1, m + 1]
            sx = (1 - fy) * top + fy * bottom
            if not (sx >= 0.0 and sy >= 0.0):  # also NaN: the transformation failed
                continue
            ix, iy = int(sx + 1e-10), int(sy + 1e-10)
            if ix >= w or iy >= h or math.isnan(src[0, iy, ix]):
                continue
            x0 = math.floor(sx - 0.5)  # an int in numba
            y0 = math.floor(sy - 0.5)
            rx = 1.5 - (sx - x0)  # weight of column x0
            ry = 1.5 - (sy - y0)
            if x0 == -1:
                x0, rx = 0, 1.0
            if y0 == -1:
                y0, ry = 0, 1.0
            w00 = rx * ry if y0 < h and x0 < w and not math.isnan(src[0, y0, x0]) else 0.0
            w01 = (
                (1 - rx) * ry
                if y0 < h and x0 + 1 < w and not math.isnan(src[0, y0, x0 + 1])
                else 0.0
            )
            w10 = (
                rx * (1 - ry)
                if y0 + 1 < h and x0 < w and not math.isnan(src[0, y0 + 1, x0])
                else 0.0
            )
            w11 = (
                (1 - rx) * (1 - ry)
                if y0 + 1 < h and x0 + 1 < w and not math.isnan(src[0, y0 + 1, x0 + 1])
                else 0.0
            )
            div = w00 + w01 + w10 + w11
            if div < 1e-5:
                continue
            # Zero-weight samples may lie outside the source: index only those with weight.
            y1 = min(y0 + 1, h - 1)
            x1 = min(x0 + 1, w - 1)
            for b in range(nb):
                acc = 0.0
                if w00 > 0.0:
                    acc += w00 * src[b, y0, x0]
                if w01 > 0.0:
                    acc += w01 * src[b, y0, x1]
                if w10 > 0.0:
                    acc += w10 * src[b, y1, x0]
                if w11 > 0.0:
                    acc += w11 * src[b, y1, x1]
                out[b, i, j] = acc / div
