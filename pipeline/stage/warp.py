"""Read one window of one acquisition onto the target grid (orthorectifying RPC products).

Design (docs/CONVENTIONS.md §7, §8):

* Every call opens the file itself: it runs inside Dask tasks in parallel, and shared handles
  or rioxarray's default locks would serialise them.
* RPC images with bilinear resampling at about the image's own scale, without a DEM (the
  default case) are orthorectified by :func:`~pipeline.stage.rpc_lattice.warp_rpc_lattice`:
  GDAL's RPC transformer on a lattice of grid pixels, positions interpolated in between (within
  :data:`~pipeline.stage.rpc_lattice.LATTICE_TOLERANCE_PX`), and GDAL's 4-sample bilinear rule
  with its no-data handling (:mod:`pipeline.stage._resample`). It gives GDAL's exact warp to
  within 0.12 DN of 4095 and the same no-data pixels, 5x faster; GDAL's exact transformer per
  pixel was most of the staging time. Every other case goes through
  :func:`rasterio.warp.reproject` with ``rpcs=`` as below, never through ``WarpedVRT`` (it
  returned wrong pixels for RPC-only files).
* Only the source region the window needs is read. A full PMS band is 10240², so the source
  window is found by sending a grid of the destination window's points through the RPC
  (ground → image, the direction GDAL evaluates exactly), padding it by the resampling kernel
  and a safety margin. The sub-image is then warped with RPCs whose ``LINE_OFF``/``SAMP_OFF``
  are reduced by the window offset: RPC image coordinates are plain pixel coordinates, so that
  shift is exact and a sub-window read equals the same region of a full read.
* The lattice nodes sit on the grid, not the window. Each window refines its lattice only as far
  as the tolerance needs, so two windows agree to within the tolerance (in
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
  lattice: :func:`pipeline.grid.target.on_lattice`, what
  :func:`pipeline.grid.target.derive_grid` picks for a series on one grid) is not resampled at
  all: the window is read and scaled, pixel for pixel (:func:`_copy_window`).

One module per part: :mod:`pipeline.stage.source` (the source window, the resampling scale and
margin), :mod:`pipeline.stage.rpc_lattice` (the lattice warp), :mod:`pipeline.stage.values`
(DN to values); this module reads the window and picks the way to warp it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import rasterio.windows
from affine import Affine
from rasterio.errors import RasterioIOError
from rasterio.rpc import RPC
from rasterio.warp import reproject
from rasterio.windows import Window

from pipeline.errors import ConfigError, InputError
from pipeline.grid.target import TargetGrid, on_lattice
from pipeline.inputs import Acquisition
from pipeline.stage.rpc_lattice import lattice_applies, warp_rpc_lattice
from pipeline.stage.source import (
    kernel_margin,
    resampling_method,
    resampling_scale,
    source_window,
)
from pipeline.stage.values import scaled_values

__all__ = ["READ_GDAL_CONFIG", "read_window"]


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
    method = resampling_method(resampling)
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
        xscale, yscale = resampling_scale(src, acq, grid)
        margin = kernel_margin(method, xscale, yscale)
        src_win = source_window(src, acq, grid, window, margin=margin, dem=dem)
        if src_win is None:
            return out
        scaled = scaled_values(src.read(indexes, window=src_win), acq, indexes)
        if scaled is None:
            return out
        if acq.georef == "rpc" and lattice_applies(method, dem, xscale, yscale):
            warp_rpc_lattice(scaled, src.rpcs, src_win, grid, window, out)
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
    scaled = scaled_values(src.read(indexes, window=part), acq, indexes)
    if scaled is not None:
        rows = slice(r0 - window.row_off, r1 - window.row_off)
        cols = slice(c0 - window.col_off, c1 - window.col_off)
        out[:, rows, cols] = scaled


def _open(acq: Acquisition) -> rasterio.io.DatasetReader:
    """Open an acquisition's raster; an unreadable file is the user's to replace.

    Nothing is silenced here: discovery admitted only rasters with a geotransform or RPCs, which
    rasterio (≥ 1.3) opens without a ``NotGeoreferencedWarning``, and this runs in a worker's
    threads, where ``warnings.catch_warnings`` is not safe (a thread's exit restores the filters
    it saw on entry, undoing another thread's)."""
    try:
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
