"""Where a grid window lies in a source image: the region to read, the resampling scale, and
the margin the resampling kernel needs around it.

A full PMS band is 10240², so only the source region a window needs is read: a grid of the
destination window's points is sent through the RPC (ground → image, the direction GDAL
evaluates exactly) or the file's CRS, and padded by the resampling kernel and a safety margin
(:func:`kernel_margin`). The resampling scale is fixed per (image, grid), not per window, so
that GDAL's kernel footprint does not depend on how the grid is cut into windows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.rpc import RPC
from rasterio.transform import RPCTransformer
from rasterio.warp import transform as transform_points
from rasterio.windows import Window

from pipeline.errors import ConfigError
from pipeline.grid.target import TargetGrid
from pipeline.inputs import Acquisition

__all__ = [
    "kernel_margin",
    "resampling_method",
    "resampling_scale",
    "rpc_image_coords",
    "source_window",
]

# Kernel radius in source pixels at scale 1, per resampling method.
_KERNEL_RADIUS = {
    Resampling.nearest: 1,
    Resampling.bilinear: 1,
    Resampling.cubic: 2,
    Resampling.cubic_spline: 2,
    Resampling.lanczos: 3,
    Resampling.average: 1,
    Resampling.mode: 1,
    Resampling.min: 1,
    Resampling.max: 1,
    Resampling.med: 1,
    Resampling.q1: 1,
    Resampling.q3: 1,
    Resampling.sum: 1,
    Resampling.rms: 1,
}
# Extra source pixels beyond the kernel: covers curvature between the sampled points.
_SAFETY_PX = 3
# Spacing (destination pixels) of the points sent through the RPC to find the source window.
_SAMPLE_STEP = 32


def resampling_method(name: str) -> Resampling:
    """The resampling method of a name.

    Parameters
    ----------
    name
        A :class:`rasterio.enums.Resampling` name (``"bilinear"``, ``"cubic"``, ...).

    Returns
    -------
    rasterio.enums.Resampling
        The method.

    Raises
    ------
    ConfigError
        ``name`` is not a method whose kernel radius is known.
    """
    try:
        method = Resampling[name]
    except KeyError:
        valid = ", ".join(m.name for m in _KERNEL_RADIUS)
        raise ConfigError(f"resampling: {name!r} is not one of {valid}") from None
    return method


def kernel_margin(method: Resampling, xscale: float, yscale: float) -> int:
    """Source pixels to add on every side of a source window for ``method``'s kernel.

    Parameters
    ----------
    method
        The resampling method.
    xscale, yscale
        Destination pixels per source pixel along each grid axis (:func:`resampling_scale`):
        below 1 the kernel widens in source pixels.

    Returns
    -------
    int
        The kernel's radius at that scale plus a safety margin for the curvature between the
        points sent through the georeferencing.
    """
    return math.ceil(_KERNEL_RADIUS[method] / min(1.0, xscale, yscale)) + _SAFETY_PX


def _window_points(grid: TargetGrid, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Grid-CRS coordinates of a lattice covering the window, edges included."""
    nx = max(2, math.ceil(window.width / _SAMPLE_STEP) + 1)
    ny = max(2, math.ceil(window.height / _SAMPLE_STEP) + 1)
    cols = np.linspace(0.0, window.width, nx)
    rows = np.linspace(0.0, window.height, ny)
    cc, rr = np.meshgrid(cols, rows)
    t = grid.window_transform(window)
    xs = t.c + cc.ravel() * t.a
    ys = t.f + rr.ravel() * t.e
    return xs, ys


def rpc_image_coords(
    rpcs: RPC, lon: np.ndarray, lat: np.ndarray, dem: Path | None
) -> tuple[np.ndarray, np.ndarray]:
    """Ground → image (row, col) through GDAL's RPC transformer, NaN where it fails.

    Parameters
    ----------
    rpcs
        The image's RPCs.
    lon, lat
        Ground points in degrees (WGS84).
    dem
        DEM whose heights the ground points take (GDAL's ``RPC_DEM``); height 0 without one.

    Returns
    -------
    tuple of numpy.ndarray
        Fractional image rows and columns (GDAL convention: pixel centres at +0.5).
    """
    options: dict[str, Any] = {"RPC_DEM": str(dem)} if dem is not None else {}
    with RPCTransformer(rpcs, **options) as tr:
        # A ufunc is applied to the whole array (np.positive: the fractional positions as
        # they are); any other callable is mapped over every point in Python.
        rows, cols = tr.rowcol(lon, lat, op=np.positive)
    return np.asarray(rows, float), np.asarray(cols, float)


def _scale(src_dx: np.ndarray, src_dy: np.ndarray) -> tuple[float, float]:
    """GDAL's XSCALE/YSCALE: destination pixels per source pixel along each grid axis."""
    return 1.0 / float(np.hypot(*src_dx)), 1.0 / float(np.hypot(*src_dy))


def resampling_scale(
    src: rasterio.io.DatasetReader, acq: Acquisition, grid: TargetGrid
) -> tuple[float, float]:
    """GDAL's XSCALE/YSCALE of an image warped onto ``grid``, taken at the image's centre.

    Parameters
    ----------
    src
        The open acquisition file.
    acq
        Its acquisition (for the georeferencing kind).
    grid
        The target grid.

    Returns
    -------
    tuple of float
        Destination pixels per source pixel along the grid's x and y axes: fixed per (image,
        grid), not per window.
    """
    if acq.georef == "rpc":
        return _rpc_scale(src.rpcs, grid)
    return _crs_scale(src, grid)


def _rpc_scale(rpcs: RPC, grid: TargetGrid) -> tuple[float, float]:
    """Resampling scale at the RPC centre: fixed per (image, grid), not per window."""
    x0, y0 = transform_points("EPSG:4326", grid.crs, [rpcs.long_off], [rpcs.lat_off])
    rx, ry = grid.resolution
    lon, lat = transform_points(
        grid.crs, "EPSG:4326", [x0[0], x0[0] + rx, x0[0]], [y0[0], y0[0], y0[0] - ry]
    )
    rows, cols = rpc_image_coords(rpcs, np.asarray(lon), np.asarray(lat), None)
    return _scale(
        np.array([cols[1] - cols[0], rows[1] - rows[0]]),
        np.array([cols[2] - cols[0], rows[2] - rows[0]]),
    )


def _crs_scale(src: rasterio.io.DatasetReader, grid: TargetGrid) -> tuple[float, float]:
    cx, cy = src.xy(src.height / 2, src.width / 2)
    gx, gy = transform_points(src.crs, grid.crs, [cx], [cy])
    rx, ry = grid.resolution
    xs, ys = transform_points(
        grid.crs, src.crs, [gx[0], gx[0] + rx, gx[0]], [gy[0], gy[0], gy[0] - ry]
    )
    inv = ~src.transform
    cols, rows = zip(*(inv @ (x, y) for x, y in zip(xs, ys, strict=True)), strict=True)
    return _scale(
        np.array([cols[1] - cols[0], rows[1] - rows[0]]),
        np.array([cols[2] - cols[0], rows[2] - rows[0]]),
    )


def _pad_window(
    rows: np.ndarray, cols: np.ndarray, margin: int, height: int, width: int
) -> Window | None:
    ok = np.isfinite(rows) & np.isfinite(cols)
    if not ok.any():
        return None
    r0 = max(0, math.floor(rows[ok].min()) - margin)
    c0 = max(0, math.floor(cols[ok].min()) - margin)
    r1 = min(height, math.ceil(rows[ok].max()) + margin)
    c1 = min(width, math.ceil(cols[ok].max()) + margin)
    if r1 <= r0 or c1 <= c0:
        return None
    return Window(c0, r0, c1 - c0, r1 - r0)


def source_window(
    src: rasterio.io.DatasetReader,
    acq: Acquisition,
    grid: TargetGrid,
    window: Window,
    *,
    margin: int,
    dem: Path | None = None,
) -> Window | None:
    """The region of ``src`` that the grid ``window`` needs, padded by ``margin`` pixels.

    Parameters
    ----------
    src
        The open acquisition file.
    acq
        Its acquisition (for the georeferencing kind).
    grid, window
        The destination region.
    margin
        Source pixels added on every side (resampling kernel plus safety).
    dem
        DEM for RPC inputs; the heights shift the image position of every ground point.

    Returns
    -------
    Window or None
        Clipped to the image; None when the destination window misses the image entirely.
    """
    xs, ys = _window_points(grid, window)
    if acq.georef == "rpc":
        lon, lat = transform_points(grid.crs, "EPSG:4326", xs, ys)
        rows, cols = rpc_image_coords(src.rpcs, np.asarray(lon), np.asarray(lat), dem)
    else:
        sx, sy = transform_points(grid.crs, src.crs, xs, ys)
        inv = ~src.transform
        cols, rows = inv @ (np.asarray(sx), np.asarray(sy))
    return _pad_window(np.asarray(rows), np.asarray(cols), margin, src.height, src.width)
