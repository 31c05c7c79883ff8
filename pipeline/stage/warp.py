"""Read one window of one acquisition onto the target grid (orthorectifying RPC products).

Design (docs/CONVENTIONS.md §7, §8):

* Every call opens the file itself: it runs inside Dask tasks in parallel, and shared handles
  or rioxarray's default locks would serialise them.
* RPC images with bilinear resampling at about the image's own scale, without a DEM (the
  default case) are orthorectified by :func:`_warp_rpc_lattice`: GDAL's RPC transformer on a
  lattice of grid pixels, positions interpolated in between (within
  :data:`LATTICE_TOLERANCE_PX`), and GDAL's 4-sample bilinear rule with its no-data handling
  (:mod:`pipeline.stage._resample`). It gives GDAL's exact warp to within 0.12 DN of 4095 and the
  same no-data pixels, 5x faster; GDAL's exact transformer per pixel was most of the staging
  time. Every other case goes through :func:`rasterio.warp.reproject` with ``rpcs=`` as below,
  never through ``WarpedVRT`` (it returned wrong pixels for RPC-only files).
* Only the source region the window needs is read. A full PMS band is 10240², so the source
  window is found by sending a grid of the destination window's points through the RPC
  (ground → image, the direction GDAL evaluates exactly), padding it by the resampling kernel
  and a safety margin. The sub-image is then warped with RPCs whose ``LINE_OFF``/``SAMP_OFF``
  are reduced by the window offset: RPC image coordinates are plain pixel coordinates, so that
  shift is exact and a sub-window read equals the same region of a full read.
* The lattice nodes sit on the grid, not the window. Each window refines its lattice only as far
  as the tolerance needs, so two windows agree to within :data:`LATTICE_TOLERANCE_PX` (in
  practice exactly: GF-4-sized frames pass at the largest step everywhere). For GDAL's warp,
  two settings make the result independent of how the grid is cut into windows:

  - the exact transformer. By default rasterio wraps GDAL's transformer in an approximation
    (straight lines along each destination row, up to 0.125 px off) whose error depends on the
    window's extent; its ``tolerance`` argument is not passed through by
    :func:`rasterio.warp.reproject`. rasterio switches to the exact transformer for RPC sources
    when ``COORDINATE_OPERATION`` (or ``RPC_DEM``) is given, so the lon/lat → grid CRS operation
    is passed explicitly, as PROJ pipeline text from pyproj in the CRSs' authority axis order
    (GDAL converts its lon/lat data order to authority order around the operation). Should
    pyproj not express the operation as a pipeline, the approximation is used (documented
    error: at most 0.125 source pixel).
  - a fixed resampling scale (``XSCALE``/``YSCALE``); GDAL otherwise derives the kernel
    footprint from each chunk's source/destination size ratio.

  Non-RPC (CRS) sources keep the approximation: exact when the file's CRS is the grid's (the
  mapping is affine), else within 0.125 source pixel of a full read.
* A GeoTIFF whose pixels *are* grid pixels (same CRS, same pixel size, origin on the grid's
  lattice: :func:`pipeline.grid.target.on_lattice`, what :func:`pipeline.grid.target.derive_grid` picks for
  a series on one grid) is not resampled at all: the window is read and scaled, pixel for
  pixel (:func:`_copy_window`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import rasterio.windows
from affine import Affine
from rasterio.enums import Resampling
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError
from rasterio.rpc import RPC
from rasterio.transform import RPCTransformer
from rasterio.warp import reproject
from rasterio.warp import transform as transform_points
from rasterio.windows import Window

from pipeline.errors import ConfigError, InputError
from pipeline.grid.target import TargetGrid, on_lattice
from pipeline.inputs import Acquisition

__all__ = ["read_window", "source_window"]

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
# Largest spacing (grid pixels, a power of 2) of the lattice of exact RPC positions of
# :func:`_warp_rpc_lattice`, and the position error (image pixels) the lattice must stay under.
# The error grows with the square of the spacing: 8 px gave 1.4e-4 px on a 2560² GF-4-like
# frame (16 px: 5e-4); small, strongly distorted test frames need a finer lattice.
LATTICE_STEP = 8
LATTICE_TOLERANCE_PX = 2.5e-4


def _resampling(name: str) -> Resampling:
    try:
        method = Resampling[name]
    except KeyError:
        valid = ", ".join(m.name for m in _KERNEL_RADIUS)
        raise ConfigError(f"resampling: {name!r} is not one of {valid}") from None
    return method


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


def _rpc_image_coords(
    rpcs: RPC, lon: np.ndarray, lat: np.ndarray, dem: Path | None
) -> tuple[np.ndarray, np.ndarray]:
    """Ground → image (row, col) through GDAL's RPC transformer, NaN where it fails."""
    options: dict[str, Any] = {"RPC_DEM": str(dem)} if dem is not None else {}
    with RPCTransformer(rpcs, **options) as tr:
        # A ufunc is applied to the whole array (np.positive: the fractional positions as
        # they are); any other callable is mapped over every point in Python.
        rows, cols = tr.rowcol(lon, lat, op=np.positive)
    return np.asarray(rows, float), np.asarray(cols, float)


def _scale(src_dx: np.ndarray, src_dy: np.ndarray) -> tuple[float, float]:
    """GDAL's XSCALE/YSCALE: destination pixels per source pixel along each grid axis."""
    return 1.0 / float(np.hypot(*src_dx)), 1.0 / float(np.hypot(*src_dy))


def _rpc_scale(rpcs: RPC, grid: TargetGrid) -> tuple[float, float]:
    """Resampling scale at the RPC centre: fixed per (image, grid), not per window."""
    x0, y0 = transform_points("EPSG:4326", grid.crs, [rpcs.long_off], [rpcs.lat_off])
    rx, ry = grid.resolution
    lon, lat = transform_points(
        grid.crs, "EPSG:4326", [x0[0], x0[0] + rx, x0[0]], [y0[0], y0[0], y0[0] - ry]
    )
    rows, cols = _rpc_image_coords(rpcs, np.asarray(lon), np.asarray(lat), None)
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


@lru_cache(maxsize=32)
def _lonlat_operation(crs: str) -> str | None:
    """PROJ pipeline WGS84 lon/lat → ``crs`` in authority axis order, or None if unavailable."""
    from pyproj import Transformer
    from pyproj.exceptions import ProjError

    try:
        text = Transformer.from_crs("EPSG:4326", crs, always_xy=False).to_proj4()
    except (ProjError, ValueError):
        return None
    return text or None


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
        rows, cols = _rpc_image_coords(src.rpcs, np.asarray(lon), np.asarray(lat), dem)
    else:
        sx, sy = transform_points(grid.crs, src.crs, xs, ys)
        inv = ~src.transform
        cols, rows = inv @ (np.asarray(sx), np.asarray(sy))
    return _pad_window(np.asarray(rows), np.asarray(cols), margin, src.height, src.width)


def _lattice_applies(method: Resampling, dem: Path | None, xscale: float, yscale: float) -> bool:
    """Whether :func:`_warp_rpc_lattice` gives GDAL's result: bilinear at a scale where GDAL
    uses its 4-sample rule (>= 0.95), heights 0 (with a DEM the heights vary per pixel)."""
    return method == Resampling.bilinear and dem is None and min(xscale, yscale) >= 0.95


def _lattice_nodes(start: int, length: int, step: int) -> tuple[int, np.ndarray]:
    """Grid indices of the lattice nodes bracketing ``[start, start + length)``, and the offset of
    ``start`` past the first node. Nodes sit on multiples of ``step`` of the *grid*, so windows
    interpolate between the same nodes."""
    first = start // step * step
    last = (start + length - 1) // step * step + step
    return start - first, np.arange(first, last + 1, step)


def _rpc_positions(
    rpcs: RPC, grid: TargetGrid, rows: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact image positions (GDAL convention: pixel centres at +0.5) of the grid pixel centres
    ``rows`` × ``cols``, through GDAL's RPC transformer at height 0; NaN where it fails."""
    cc, rr = np.meshgrid(cols + 0.5, rows + 0.5)
    t = grid.transform
    xs, ys = (t.c + cc * t.a).ravel(), (t.f + rr * t.e).ravel()
    lon, lat = transform_points(grid.crs, "EPSG:4326", xs, ys)
    img_rows, img_cols = _rpc_image_coords(rpcs, np.asarray(lon), np.asarray(lat), None)
    return img_rows.reshape(cc.shape), img_cols.reshape(cc.shape)


def _interpolation_error(
    rpcs: RPC,
    grid: TargetGrid,
    node_r: np.ndarray,
    node_c: np.ndarray,
    nodes: tuple[np.ndarray, np.ndarray],
    step: int,
) -> float:
    """Largest distance (image pixels) between the exact position and the one interpolated from
    the nodes, at the cell centres, where bilinear interpolation of a smooth mapping is worst."""
    exact = _rpc_positions(rpcs, grid, node_r[:-1] + step // 2, node_c[:-1] + step // 2)
    error = 0.0
    for at_nodes, at_centres in zip(nodes, exact, strict=True):
        interpolated = (
            at_nodes[:-1, :-1] + at_nodes[1:, :-1] + at_nodes[:-1, 1:] + at_nodes[1:, 1:]
        ) / 4
        error = max(error, float(np.nanmax(np.abs(interpolated - at_centres), initial=0.0)))
    return error


def _warp_rpc_lattice(
    scaled: np.ndarray,
    rpcs: RPC,
    src_win: Window,
    grid: TargetGrid,
    window: Window,
    out: np.ndarray,
) -> None:
    """Orthorectify ``scaled`` (the source window ``src_win``) into ``out`` like GDAL, faster.

    GDAL's exact transformer runs the grid CRS → lon/lat → RPC chain for every destination
    pixel, which made it most of the staging time (0.41 s of 0.46 s for a 1024² window of 5
    bands). Here the same GDAL RPC transformer is evaluated only on a lattice of grid pixels
    (every :data:`LATTICE_STEP`), and each pixel's source position is interpolated between the
    nodes. The lattice is refined (step halved, down to every pixel) until the interpolation
    error at the cells' centres is below :data:`LATTICE_TOLERANCE_PX`; on GF-4-sized frames
    8 px gives ~1e-4 px and resampled values within 0.12 DN of 4095 of GDAL's
    (``tests/pipeline/test_warp.py`` compares both, no-data pixels included).
    """
    from pipeline.stage._resample import warp_bilinear

    step = LATTICE_STEP
    while True:
        row_first, node_r = _lattice_nodes(window.row_off, window.height, step)
        col_first, node_c = _lattice_nodes(window.col_off, window.width, step)
        nodes = _rpc_positions(rpcs, grid, node_r, node_c)
        if step == 1:
            break
        if _interpolation_error(rpcs, grid, node_r, node_c, nodes, step) <= LATTICE_TOLERANCE_PX:
            break
        step //= 2
    node_rows = nodes[0] - src_win.row_off  # positions in the source window read
    node_cols = nodes[1] - src_win.col_off
    warp_bilinear(scaled, node_rows, node_cols, row_first, col_first, step, out)


def _shift_rpcs(rpcs: RPC, window: Window) -> RPC:
    """RPCs of a sub-image: image coordinates are pixels, so offsets simply shift."""
    fields = rpcs.to_dict()
    fields["line_off"] = rpcs.line_off - window.row_off
    fields["samp_off"] = rpcs.samp_off - window.col_off
    return RPC(**fields)


def read_window(
    acq: Acquisition,
    grid: TargetGrid,
    window: Window,
    *,
    bands: Sequence[int] | None = None,
    dem: Path | None = None,
    resampling: str = "bilinear",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Read one grid window of one acquisition, orthorectified and scaled.

    Parameters
    ----------
    acq
        The acquisition to read.
    grid
        The common target grid.
    window
        Region of ``grid`` to fill (integer offsets and sizes).
    bands
        1-based band indexes (rasterio convention); default all bands in file order.
    dem
        Optional DEM (any GDAL raster, heights in metres above the WGS84 ellipsoid, as GDAL's
        ``RPC_DEM`` expects) for RPC orthorectification; without it the terrain is taken at
        height 0.
    resampling
        A :class:`rasterio.enums.Resampling` name.
    out
        Optional float32 array of shape (nbands, window.height, window.width) to fill and
        return (a date's slice of a staged cube: no copy of the frame into it afterwards).

    Returns
    -------
    numpy.ndarray
        float32 of shape (nbands, window.height, window.width) holding DN / ``acq.max_dn``;
        NaN where the acquisition has no data (outside its footprint, or source no-data).

    Raises
    ------
    ConfigError
        Unknown resampling method or band index.
    InputError
        The file is unreadable, lacks RPCs, or holds DN above ``acq.max_dn`` in the region read.
    """
    method = _resampling(resampling)
    window = Window(
        *(int(v) for v in (window.col_off, window.row_off, window.width, window.height))
    )
    nb = len(acq.bands) if bands is None else len(bands)
    shape = (nb, window.height, window.width)
    if out is None:
        out = np.empty(shape, dtype=np.float32)
    elif out.shape != shape or out.dtype != np.float32:
        raise ValueError(f"out is {out.dtype} {out.shape}, expected float32 {shape}")
    out.fill(np.nan)
    with rasterio.Env(**READ_GDAL_CONFIG), _open(acq) as src:
        indexes = _band_indexes(src, acq, bands)
        if _same_lattice(src, acq, grid):
            _copy_window(src, acq, indexes, grid, window, out)
            return out
        if acq.georef == "rpc":
            xscale, yscale = _rpc_scale(src.rpcs, grid)
        else:
            xscale, yscale = _crs_scale(src, grid)
        margin = math.ceil(_KERNEL_RADIUS[method] / min(1.0, xscale, yscale)) + _SAFETY_PX
        src_win = source_window(src, acq, grid, window, margin=margin, dem=dem)
        if src_win is None:
            return out
        scaled = _scaled(src.read(indexes, window=src_win), acq, indexes)
        if scaled is None:
            return out
        if acq.georef == "rpc" and _lattice_applies(method, dem, xscale, yscale):
            _warp_rpc_lattice(scaled, src.rpcs, src_win, grid, window, out)
            return out
        common: dict[str, Any] = {
            "src_nodata": np.nan,
            "dst_transform": grid.window_transform(window),
            "dst_crs": grid.crs,
            "dst_nodata": np.nan,
            "resampling": method,
            "XSCALE": repr(xscale),
            "YSCALE": repr(yscale),
        }
        if acq.georef == "rpc":
            if dem is not None:
                common["RPC_DEM"] = str(dem)
            operation = _lonlat_operation(grid.crs)
            if operation is not None:
                common["COORDINATE_OPERATION"] = operation
            reproject(
                scaled,
                out,
                rpcs=_shift_rpcs(src.rpcs, src_win),
                src_crs="EPSG:4326",
                **common,
            )
        else:
            reproject(
                scaled,
                out,
                src_transform=src.transform @ Affine.translation(src_win.col_off, src_win.row_off),
                src_crs=src.crs,
                **common,
            )
    return out


#: GDAL configuration while a window is read. GDAL reads an uncompressed, striped GeoTIFF (the
#: layout it writes by default, one row of all bands per strip, as the GF-4 fixtures have) through
#: its block cache a whole strip at a time: a stage task's 1164-pixel-wide window of a 10240-wide
#: PMS frame copied 8.8 times the bytes it used, mostly in the kernel. Memory-mapped
#: (``GTIFF_VIRTUAL_MEM_IO``; where the file would not fit in RAM, ``GTIFF_DIRECT_IO`` reads just
#: the window's bytes of each row instead), 21 stage windows of the full-size series took 1.78
#: CPU s against 2.65-3.11 s, warp included (``benchmarks/stage_reads.py``), the same values
#: (tested). Compressed or tiled files read as before: GDAL applies both only to uncompressed ones.
READ_GDAL_CONFIG = {"GTIFF_VIRTUAL_MEM_IO": "IF_ENOUGH_RAM", "GTIFF_DIRECT_IO": "YES"}


def _same_lattice(src: rasterio.io.DatasetReader, acq: Acquisition, grid: TargetGrid) -> bool:
    """Whether the file's pixels are grid pixels: same CRS, pixel size and lattice."""
    if acq.georef != "crs" or src.crs is None:
        return False
    if not on_lattice(src.transform, grid.transform):
        return False
    return bool(rasterio.crs.CRS.from_user_input(grid.crs) == src.crs)


def _copy_window(
    src: rasterio.io.DatasetReader,
    acq: Acquisition,
    indexes: list[int],
    grid: TargetGrid,
    window: Window,
    out: np.ndarray,
) -> None:
    """Fill ``out`` (the grid ``window``) with the file's own pixels, scaled, no resampling."""
    col, row = ~grid.transform @ (src.transform.c, src.transform.f)
    col0, row0 = round(col), round(row)  # the file's first pixel on the grid
    r0 = max(window.row_off, row0)
    c0 = max(window.col_off, col0)
    r1 = min(window.row_off + window.height, row0 + src.height)
    c1 = min(window.col_off + window.width, col0 + src.width)
    if r1 <= r0 or c1 <= c0:
        return
    part = Window(c0 - col0, r0 - row0, c1 - c0, r1 - r0)
    scaled = _scaled(src.read(indexes, window=part), acq, indexes)
    if scaled is not None:
        rows = slice(r0 - window.row_off, r1 - window.row_off)
        cols = slice(c0 - window.col_off, c1 - window.col_off)
        out[:, rows, cols] = scaled


def _open(acq: Acquisition) -> rasterio.io.DatasetReader:
    """Open an acquisition's raster; an unreadable file is the user's to replace."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            return rasterio.open(acq.path)
    except RasterioIOError as exc:
        raise InputError(
            f"{acq.path.name}: not readable ({exc}); re-download the product or "
            "remove it from inputs.paths"
        ) from None


def _band_indexes(
    src: rasterio.io.DatasetReader, acq: Acquisition, bands: Sequence[int] | None
) -> list[int]:
    """The 1-based band indexes to read, checked, and the RPCs an RPC image needs."""
    indexes = list(range(1, src.count + 1)) if bands is None else [int(b) for b in bands]
    bad = [b for b in indexes if not 1 <= b <= src.count]
    if bad:
        raise ConfigError(
            f"bands: index {bad[0]} is outside 1..{src.count} of "
            f"{acq.path.name}; use 1-based band indexes"
        )
    if acq.georef == "rpc" and src.rpcs is None:
        raise InputError(f"{acq.path.name}: no RPCs (missing .rpb); re-download the product")
    return indexes


def _scaled(data: np.ndarray, acq: Acquisition, indexes: Sequence[int]) -> np.ndarray | None:
    """DN / ``max_dn`` (or the calibration's DN·scale + offset) as float32, NaN where any band
    lacks data; None when none has any.

    One validity mask for all bands: a pixel is used only where every band has data, so GDAL's
    per-band and unified no-data handling cannot disagree.
    """
    valid = np.ones(data.shape[1:], dtype=bool)
    if data.dtype.kind == "f":
        valid &= np.isfinite(data).all(axis=0)
    if acq.nodata is not None:
        valid &= (data != acq.nodata).all(axis=0)
    if not valid.any():
        return None
    # The largest DN where valid, reduced in place: selecting the valid pixels first
    # (``data[:, valid]``) copied them all, 18 of the 24 ms of a 5-band 1164² window.
    lowest = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
    vmax = float(data.max(where=valid, initial=lowest))
    if vmax > acq.max_dn:
        raise InputError(
            f"{acq.path.name}: DN {vmax:g} exceeds max_dn {acq.max_dn:g}; set inputs.max_dn "
            "to the sensor's real maximum or use inputs.dn_rule: auto"
        )
    if acq.scale is None or acq.offset is None:
        scaled = data.astype(np.float32) / np.float32(acq.max_dn)
    else:
        # Radiance or reflectance: one linear map per band (pipeline.inputs.radiometry).
        pick = [i - 1 for i in indexes]
        scale = np.asarray(acq.scale, dtype=np.float32)[pick, None, None]
        offset = np.asarray(acq.offset, dtype=np.float32)[pick, None, None]
        scaled = data.astype(np.float32) * scale + offset
    scaled[:, ~valid] = np.nan
    return scaled
