"""The final products of a run: the diagnostics table, COGs and quicklooks.

Each is written under a temporary name and renamed into place; the caller publishes the
folders (:func:`pipeline.store.durable.publish_dir`) once every product task succeeded.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from cloudcore.masks import CLOUD, HAZE, SHADOW
from pipeline.grid.tiling import Tile, TileGrid
from pipeline.outputs.kept import provenance_codes
from pipeline.store.cube import (
    arrays_for_writing,
    chunk_files,
    chunk_range,
    prefetch_files,
    read_ahead,
)
from pipeline.store.durable import atomic_write, fsync_paths, gdal_storage_error, output_errors
from pipeline.store.layout import MASK, PROVENANCE
from pipeline.store.previews import PreviewSpec, assemble, keep_band

__all__ = [
    "encode_clear",
    "scratch_profile",
    "write_cog_files",
    "write_cogs",
    "write_cogs_safely",
    "write_diagnostics",
    "write_mask_cogs",
    "write_quicklooks",
]


def write_diagnostics(records: Sequence[Mapping[str, Any]], csv_path: Path, cube: Path) -> None:
    """Write the per-tile diagnostics as CSV (atomically) and as the ``diagnostics`` group of the
    cube (pass both temporary names: they are published later). ``dates_left_out`` holds the
    dates (time labels, ``;``-separated) left out of a tile's matrix because they observe too
    little of it (:data:`pipeline.solve.tile.MIN_DATE_FRACTION`): their output there is NaN;
    ``fill_iterations``, with ``solver.shadow_free_fill``, the second solve's iterations."""
    columns = ["tile_id", "band", "row", "col", "iterations", "converged", "residual", "lam"]
    columns += ["fill_iterations"] if any("fill_iterations" in r for r in records) else []
    columns += ["seconds", "d", "n", "method", "dates_left_out"]
    table = pd.DataFrame(list(records), columns=columns).fillna({"dates_left_out": ""})
    table = table.sort_values(["band", "row", "col"]).reset_index(drop=True)
    atomic_write(csv_path, table.to_csv(index=False).encode())
    ds = xr.Dataset({c: ("tile", table[c].to_numpy()) for c in columns if c != "tile_id"})
    ds = ds.assign_coords(tile_id=("tile", table["tile_id"].to_numpy(dtype=object)))
    for name in ("band", "method", "dates_left_out"):
        ds[name] = ds[name].astype(object)
    ds.to_zarr(cube, group="diagnostics", mode="w", consolidated=False, zarr_format=3)


def write_cogs(
    cube: Path,
    dsts: Sequence[Path],
    *,
    band_index: int,
    grid: Any,
    dtype: str,
    max_dn: float,
    block: int,
    calibration: str = "dn",
    units: str = "",
    physical_scale: float = 1.0,
    tiles: TileGrid | None = None,
    provenance: bool = False,
    preview: PreviewSpec | None = None,
) -> list[str]:
    """Write the clear ground of one band as one Cloud-Optimised GeoTIFF per date; and from
    the same reads, core by core, the band's provenance and its quicklook samples.

    ``uint16`` stores ``round(clear · max_dn)`` with 0 reserved as nodata (a clear value that
    would round to 0 is stored as 1); ``float32`` stores the [0, 1] value with NaN as nodata.
    The band is read once, in ``block`` × ``block`` tiles (all dates at a time, as the cube is
    chunked), into temporary tiled GeoTIFFs that GDAL's COG driver converts; each COG is then
    renamed into place.

    Parameters
    ----------
    cube
        The cube store holding ``clear``.
    dsts
        One destination per date, in the cube's time order.
    band_index
        Band to write.
    grid
        The target grid (CRS, transform, size).
    dtype
        ``"uint16"`` or ``"float32"``.
    max_dn
        DN of 1.0 for ``uint16``.
    block
        Edge of the tiles read at a time (``tile_size``: whole cube chunks across, all dates).
    calibration, units, physical_scale
        What the values mean (:func:`pipeline.inputs.radiometry.value_meaning`). Unless
        ``calibration`` is ``"dn"``, the band's GDAL scale and unit are set so that readers get
        the physical quantity: stored × scale (radiance in ``units``, or reflectance).
    tiles
        The run's tiling (its cores are the blocks read; ``block`` is its tile size): needed
        for ``provenance`` and ``preview``.
    provenance
        Write the band's ``provenance`` layer of the cube from the clear values
        (:func:`pipeline.outputs.kept.provenance_codes`; without ``mask.keep_clear``,
        where the mask pass leaves ``clear`` as it is), durably before returning.
    preview
        Keep the clear values' quicklook samples of each core
        (:func:`pipeline.store.previews.keep_band`).

    Returns
    -------
    list of str
        The paths written.
    """
    import zarr

    src = zarr.open_array(store=str(cube), path="clear", mode="r")
    profile = scratch_profile(grid, dtype, 0 if dtype == "uint16" else float("nan"))
    meaning = None
    if calibration != "dn":
        stored = physical_scale / (max_dn if dtype == "uint16" else 1.0)
        meaning = (calibration, units, stored)

    chunks = src.shards or src.chunks  # a file each
    if (provenance or preview is not None) and (tiles is None or tiles.tile_size != block):
        raise ValueError("provenance and preview samples need the run's tiles, block = tile size")
    target = arrays_for_writing(cube, [PROVENANCE])[0] if provenance else None

    def read(rows: slice, cols: slice) -> np.ndarray:
        values = np.asarray(src[:, band_index, rows, cols])  # (time, rows, cols)
        if tiles is not None:
            tile = tiles.tile(rows.start // block, cols.start // block)
            if preview is not None:
                keep_band(preview, tile, "clear", band_index, values, tile.core)
            if target is not None:
                target[:, band_index, rows, cols] = provenance_codes(values)
        return values

    def ahead(rows: slice, cols: slice) -> None:
        # A band's clear layer may have left the page cache since the band was solved.
        files = chunk_files(
            cube,
            ["clear"],
            chunk_range(rows.start, rows.stop, chunks[-2]),
            chunk_range(cols.start, cols.stop, chunks[-1]),
            band_index,
        )
        prefetch_files(files)

    encode = partial(encode_clear, dtype=dtype, max_dn=max_dn)
    write_cogs_safely(dsts, profile, read, encode, block, "AVERAGE", meaning, ahead=ahead)
    if target is not None:
        files = chunk_files(
            cube,
            [PROVENANCE],
            chunk_range(0, grid.height, target.chunks[-2]),
            chunk_range(0, grid.width, target.chunks[-1]),
            band_index,
        )
        with output_errors(cube):
            fsync_paths(files)
    return [str(d) for d in dsts]


def write_mask_cogs(cube: Path, dsts: Sequence[Path], *, grid: Any, block: int) -> list[str]:
    """Write the cube's ``mask`` as one uint8 COG per acquisition (0 clear, 1 haze, 2 cloud,
    3 shadow, 255 no data; the codes of :mod:`cloudcore.masks`), overviews by the most common
    class (GDAL ``MODE``), so zooming out never averages codes into another class; returns the
    paths written."""
    import zarr

    src = zarr.open_array(store=str(cube), path=MASK, mode="r")
    profile = scratch_profile(grid, "uint8", 255)

    def read(rows: slice, cols: slice) -> np.ndarray:
        return np.asarray(src[:, rows, cols])

    write_cogs_safely(dsts, profile, read, lambda frame: frame, block, "MODE", None)
    return [str(d) for d in dsts]


def scratch_profile(grid: Any, dtype: str, nodata: float) -> dict[str, Any]:
    """The scratch GeoTIFF profile of a single-band product on ``grid``.

    Parameters
    ----------
    grid
        The target grid (CRS, transform, size).
    dtype
        The stored data type (``"uint16"``, ``"float32"``, ``"uint8"``).
    nodata
        The no-data value.

    Returns
    -------
    dict
        Creation options of a tiled (256²) GeoTIFF for :func:`rasterio.open`.
    """
    return {
        "driver": "GTiff",
        "width": grid.width,
        "height": grid.height,
        "count": 1,
        "dtype": dtype,
        "crs": grid.crs,
        "transform": grid.transform,
        "nodata": nodata,
        "tiled": True,
        "blockxsize": 256,
        "blockysize": 256,
    }


Reader = Callable[[slice, slice], np.ndarray]


def write_cogs_safely(
    dsts: Sequence[Path],
    profile: Mapping[str, Any],
    read: Reader,
    encode: Callable[[np.ndarray], np.ndarray],
    block: int,
    overviews: str,
    meaning: tuple[str, str, float] | None,
    *,
    ahead: Callable[[slice, slice], None] | None = None,
) -> None:
    """:func:`write_cog_files` under temporary names that are removed whatever happens; a
    full or read-only disk becomes the user's one-line error.

    Parameters
    ----------
    dsts
        One COG per date; the temporary files are hidden names beside each.
    profile, read, encode, block, overviews, meaning, ahead
        As in :func:`write_cog_files`.

    Raises
    ------
    pipeline.store.durable.OutputError
        The disk is full or not writable (no file is left behind).
    """
    tag = uuid.uuid4().hex[:8]
    scratch = [d.with_name(f".{d.stem}.{tag}.scratch.tif") for d in dsts]
    partial = [d.with_name(f".{d.stem}.{tag}.partial.tif") for d in dsts]
    for d in dsts:
        d.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_cog_files(
            read, encode, scratch, partial, dsts, profile, block, overviews, meaning, ahead=ahead
        )
        return
    except Exception as exc:
        # A full or read-only disk is the user's to fix: one line naming the place, exit 2.
        error = gdal_storage_error(exc, dsts[0], [*scratch, *partial])
        if error is None:
            raise
    finally:
        for leftover in (*scratch, *partial):
            leftover.unlink(missing_ok=True)
    # Outside the handler, with no context: a worker sends its causes back too, and the GDAL
    # error (a rasterio CPLE class) does not unpickle, which made this a plain Exception.
    raise error


def write_cog_files(
    read: Reader,
    encode: Callable[[np.ndarray], np.ndarray],
    scratch: Sequence[Path],
    partial: Sequence[Path],
    dsts: Sequence[Path],
    profile: Mapping[str, Any],
    block: int,
    overviews: str,
    meaning: tuple[str, str, float] | None = None,
    *,
    ahead: Callable[[slice, slice], None] | None = None,
) -> None:
    """The GDAL part of :func:`write_cogs`: tiled GeoTIFFs, then COGs renamed into place.

    Parameters
    ----------
    read
        ``read(rows, cols)``: the (time, rows, cols) values of a block, one frame per COG.
    encode
        Turns one frame's block into the stored values (:func:`encode_clear`).
    scratch, partial, dsts
        Per date: the tiled GeoTIFF written first, the COG written from it, and the name the
        COG is renamed to.
    profile
        The scratch GeoTIFFs' profile (:func:`scratch_profile`).
    block
        Edge of the blocks read at a time.
    overviews
        GDAL resampling of the COG's overviews (``"AVERAGE"``, or ``"MODE"`` for codes).
    meaning
        (calibration, units, scale) set as the band's tag, unit and scale, or None for DN.
    ahead
        If given, told each block (rows, cols) before it is read, the next one while this one
        is encoded (:func:`pipeline.store.cube.read_ahead`): it can start that block's reads
        from disk.
    """
    import rasterio
    import rasterio.shutil

    height, width = profile["height"], profile["width"]
    outs = [rasterio.open(p, "w", **profile) for p in scratch]
    if meaning is not None:
        calibration, units, stored_scale = meaning
        for out in outs:
            out.scales, out.units = (stored_scale,), (units,)
            out.update_tags(CALIBRATION=calibration)
    try:
        # One cube chunk (all dates of a block × block tile) at a time: memory stays at a
        # tile's size whatever the scene's width.
        blocks = [
            (slice(r0, min(r0 + block, height)), slice(c0, min(c0 + block, width)))
            for r0 in range(0, height, block)
            for c0 in range(0, width, block)
        ]
        order = blocks if ahead is None else read_ahead(blocks, lambda b: ahead(*b))
        for rows, cols in order:
            frames = read(rows, cols)  # (time, rows, cols)
            for out, frame in zip(outs, frames, strict=True):
                window = ((rows.start, rows.stop), (cols.start, cols.stop))
                out.write(encode(frame), 1, window=window)
    finally:
        for out in outs:
            out.close()
    with rasterio.Env(**COG_GDAL_CONFIG):
        for s_path, p_path, dst in zip(scratch, partial, dsts, strict=True):
            rasterio.shutil.copy(
                s_path,
                p_path,
                driver="COG",
                # DEFLATE, which every GeoTIFF reader has, at level 1: a GF-4-like band took
                # 16 % less time than at the default level 6 and came out no larger.
                compress="DEFLATE",
                level=1,
                predictor=2,
                blocksize=512,
                # The driver adds internal overviews by default (OVERVIEWS=AUTO), halving until
                # one block holds the image (an 11k grid gets 5 levels, the demo's 1160 px grid
                # 2), so viewers can zoom out without reading full resolution: 34 % more bytes
                # on the demo (deploy/README.md). They are the AVERAGE of the valid pixels,
                # rather than the driver's default CUBIC, which rings at edges (masks: MODE).
                overview_resampling=overviews,
                # While this is the last product task running, an idle core compresses for it;
                # blocks are compressed independently, so the bytes are the same as with one.
                num_threads=COG_THREADS,
            )
            os.replace(p_path, dst)


#: GDAL configuration while a COG is made. The COG driver computes the overviews into a
#: temporary GeoTIFF compressed with ZSTD at GTiff's default level 9, then reads them back and
#: compresses them again into the COG. At level 1 a GF-4-like 2892 × 2877 band's COG took
#: 0.17-0.19 s instead of 0.22 s, the same file byte for byte (the temporary is lossless;
#: tested). Not ``COG_TMP_COMPRESSION=NONE``: GDAL 3.10 then takes another overview path, whose
#: AVERAGE differs from the exact area-weighted mean on 0.1 % of the first level's pixels (by up
#: to 43 DN) where the compressed path matches it.
COG_GDAL_CONFIG = {"ZSTD_LEVEL_OVERVIEW": "1"}

#: GDAL compression threads per COG (``NUM_THREADS`` of the COG driver).
COG_THREADS = 2


def encode_clear(clear: np.ndarray, dtype: str, max_dn: float) -> np.ndarray:
    """The stored values of clear ground in a COG of ``dtype``.

    Parameters
    ----------
    clear
        float32 clear values in [0, 1], NaN where there is no data.
    dtype
        ``"uint16"``: ``round(clip(clear, 0, 1) · max_dn)`` with 0 reserved as no data (a value
        that would round to 0 is stored as 1); ``"float32"``: the values as they are.
    max_dn
        The DN of 1.0 for ``uint16``.

    Returns
    -------
    numpy.ndarray
        uint16 or float32 of ``clear``'s shape.
    """
    if dtype == "float32":
        return clear.astype(np.float32)
    # In place on one float32 copy: the same values as round(clip(clear, 0, 1) · max_dn),
    # 3.5x faster than with a temporary per step (a 1024² × 7 block: 6 against 21 ms).
    dn = np.clip(clear, 0.0, 1.0)
    np.multiply(dn, max_dn, out=dn)
    np.rint(dn, out=dn)
    np.clip(dn, 1, 65535, out=dn)  # 0 is nodata
    dn[~np.isfinite(clear)] = 0
    return dn.astype(np.uint16)


def write_quicklooks(
    spec: PreviewSpec,
    tiles: Sequence[Tile],
    dsts: Sequence[Path],
    *,
    height: int,
    width: int,
    dates: Sequence[int] | None = None,
) -> list[str]:
    """Write one PNG per date: the observed image, its mask over it, and the clear image.

    The images are every ``spec.step``-th pixel of the scene, taken by the mask pass
    (:mod:`pipeline.store.previews`) from ``spec.bands``: one (grey) or three (RGB) band indices.
    ``dsts`` are the destinations of the ``dates`` (indices in the cube's time order; every
    date, in order, if not given): the run writes each date's quicklook as a task of its own,
    so that the last tasks of a run are short. The panels of a date share one 2–98 % stretch
    taken from its clear image, so haze and cloud show as brightening. The middle
    panel tints the observed image where the mask says haze (yellow), cloud (red) or shadow
    (blue): see :data:`MASK_COLOURS`.

    Returns
    -------
    list of str
        The paths written.
    """
    picked = range(len(dsts)) if dates is None else dates
    lefts, rights, masks = assemble(spec, tiles, picked, height, width)
    return [
        _save_quicklook(left, right, mask, dst)
        for left, right, mask, dst in zip(lefts, rights, masks, dsts, strict=True)
    ]


#: zlib level of the quicklook PNGs (lossless at every level). 1 rather than Pillow's 6: a
#: GF-4 quicklook (2930 × 1002) in 0.15 s instead of 0.23 s, 2.9 % larger, the same pixels. A
#: quicklook's cost does not grow with the scene: at 2560² the 7 were 1.6 % of the run's CPU.
QUICKLOOK_PNG_LEVEL = 1

#: Quicklook tints of the mask codes (RGB in [0, 1]), blended half and half with the image.
MASK_COLOURS = {HAZE: (1.0, 1.0, 0.0), CLOUD: (1.0, 0.0, 0.0), SHADOW: (0.0, 0.3, 1.0)}


def _save_quicklook(left: np.ndarray, right: np.ndarray, mask: np.ndarray, dst: Path) -> str:
    """Observed | mask over observed | clear, stretched together and labelled, written
    atomically as PNG."""
    finite = right[np.isfinite(right)]
    lo, hi = np.percentile(finite, [2, 98]) if finite.size else (0.0, 1.0)
    scale = max(hi - lo, 1e-6)

    def stretched(x: np.ndarray) -> np.ndarray:
        rgb = np.nan_to_num(np.clip((x - lo) / scale, 0, 1), nan=0.0)
        return np.repeat(rgb, 3, axis=-1) if rgb.shape[-1] == 1 else rgb

    observed = stretched(left)
    tinted = observed.copy()
    for code, colour in MASK_COLOURS.items():
        where = mask == code
        tinted[where] = 0.5 * tinted[where] + 0.5 * np.asarray(colour)
    gap = np.ones((left.shape[0], max(left.shape[1] // 50, 2), 3))
    image = np.concatenate([observed, gap, tinted, gap, stretched(right)], axis=1)
    step = left.shape[1] + gap.shape[1]
    labelled = _labelled(image, [f"observed {dst.stem}", "mask", "cloud-free"], [0, step, 2 * step])
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(f".{dst.stem}.{uuid.uuid4().hex[:8]}.png")
    with output_errors(dst):
        try:
            labelled.save(partial, format="PNG", compress_level=QUICKLOOK_PNG_LEVEL)
            os.replace(partial, dst)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
    return str(dst)


def _labelled(image: np.ndarray, labels: Sequence[str], starts: Sequence[int]) -> Any:
    """The RGB image in [0, 1] under a black title bar naming its panels (which start at the
    columns ``starts``)."""
    from PIL import Image, ImageDraw, ImageFont

    height, width = image.shape[:2]
    size = max(12, min(height, width) // 32)
    bar = size + size // 2
    canvas = Image.new("RGB", (width, height + bar))
    canvas.paste(Image.fromarray(np.rint(image * 255).astype(np.uint8)), (0, bar))
    draw = ImageDraw.Draw(canvas)
    try:
        font: Any = ImageFont.load_default(size=size)
    except (ImportError, OSError):  # a Pillow built without FreeType has only the bitmap font
        font = ImageFont.load_default()
    for x, text in zip(starts, labels, strict=True):
        draw.text((x + size // 2, size // 4), text, fill=(255, 255, 255), font=font)
    return canvas
