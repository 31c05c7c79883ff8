"""Everything a run writes: the output layout, Zarr templates, completion markers, final products.

Layout of ``output.path``::

    cube.zarr/            clear, cloud, haze (time, band, y, x) float32 + CRS; group diagnostics/
    diagnostics.csv       one row per (band, tile): iterations, converged, residual, λ, seconds
    cog/YYYYMMDD_<band>.tif   Cloud-Optimised GeoTIFF of the clear ground per date and band
    quicklooks/YYYYMMDD.png   before | after per date
    COMPLETE.json         written last: the run that produced everything above, and when
    work/                 input.zarr, strips/ (solved rows shared by two tile rows, until
                          blended), done/ (markers), run.json (the ids of the current run, for
                          ``status``); resumable

Crash safety, in the order things become durable:

* a task's data (its chunks of ``input.zarr`` or of the cube, and its strip stores) is fsynced
  *before* its completion marker is written, and markers are written atomically, so a marker
  always means "this work is complete on disk" even after a power cut or a ``kill -9``;
* strip stores are written under a temporary name and renamed into place
  (:func:`durable_store`), so a strip without a marker is at worst a complete orphan, never a
  half-written store under the final name;
* final products are built under temporary names (``cube.zarr.partial``, ``cog.partial/``,
  ``quicklooks.partial/``, a hidden CSV) and published by :func:`publish_dir` /
  ``os.replace`` only once all of them are complete; ``COMPLETE.json`` is removed before and
  rewritten after publication, so a reader that finds it knows the set is whole.

Open the cube with ``xarray.open_zarr(path, consolidated=False)``: Zarr v3 has no consolidated
metadata.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from pipeline.errors import PipelineError

__all__ = [
    "COMPONENTS",
    "Layout",
    "OutputError",
    "create_store",
    "durable_store",
    "fsync_chunks",
    "fsync_paths",
    "fsync_tree",
    "publish_dir",
    "read_markers",
    "remove_published",
    "remove_store",
    "storage_error",
    "store_token",
    "write_cogs",
    "write_diagnostics",
    "write_json",
    "write_marker",
    "write_quicklooks",
]

#: errno values that mean "the output location cannot take this write": the user must free
#: space or choose another ``output.path``; retrying the tile elsewhere would not help.
_STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file size limit exceeded",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a parent is not a directory",
}


class OutputError(PipelineError):
    """The output location is not writable or full: the message names the path and the fix."""


#: Solver outputs in the order they are stacked in solved blocks and strips: clipped ground,
#: cloud, haze.
COMPONENTS = ("clear", "cloud", "haze")


def compressors() -> tuple[Any, ...]:
    """The compression of every Zarr array a run writes: Blosc LZ4 with bit shuffle.

    Lossless. Reflectance in float32 barely compresses (the low mantissa bits are noise), so
    the codec's speed matters more than its strength: on a 1024² × 7-date float32 tile it
    wrote 3-4x faster than Zarr's default Zstd and still stored less (ratio 1.35 against
    1.16). Every stage reads and writes the scene several times, so this is run time.
    """
    from zarr.codecs import BloscCodec, BloscShuffle

    return (BloscCodec(cname="lz4", clevel=5, shuffle=BloscShuffle.bitshuffle),)


@dataclass(frozen=True)
class Layout:
    """Paths of everything under one output directory."""

    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def input_store(self) -> Path:
        return self.work / "input.zarr"

    @property
    def strips(self) -> Path:
        return self.work / "strips"

    @property
    def done(self) -> Path:
        return self.work / "done"

    @property
    def products(self) -> Path:
        return self.work / "products"

    @property
    def extract(self) -> Path:
        return self.work / "extract"

    @property
    def cube(self) -> Path:
        return self.root / "cube.zarr"

    @property
    def cube_partial(self) -> Path:
        return self.partial(self.cube)

    @property
    def cog_dir(self) -> Path:
        return self.root / "cog"

    @property
    def quicklook_dir(self) -> Path:
        return self.root / "quicklooks"

    @property
    def diagnostics_csv(self) -> Path:
        return self.root / "diagnostics.csv"

    @property
    def complete(self) -> Path:
        """Written last, after every product is published; removed before any is replaced."""
        return self.root / "COMPLETE.json"

    @property
    def run_record(self) -> Path:
        """The tile ids of the current run (read by ``python -m pipeline status``)."""
        return self.work / "run.json"

    def partial(self, final: Path) -> Path:
        """The temporary name a final product is built under before it is published."""
        return final.with_name(f"{final.name}.partial")

    def strip(self, strip_id: str) -> Path:
        """Rows of one solved tile row that the next or previous tile row also covers."""
        return self.strips / f"{strip_id}.zarr"

    def marker(self, work_id: str) -> Path:
        """Completion marker of one task's work (a staged tile, a row, a seam, a blended band),
        written only after its data."""
        return self.done / f"{work_id}.json"

    def markers(self, prefix: str = "") -> list[Path]:
        """The completion markers whose id starts with ``prefix`` (none before a run made any)."""
        return list(self.done.glob(f"{prefix}*.json"))

    def marker_ids(self) -> set[str]:
        """Ids of every completion marker."""
        return {p.stem for p in self.markers()}


def storage_error(exc: BaseException, what: str | Path) -> OutputError | None:
    """An :class:`OutputError` for an ``OSError`` that a retry cannot fix (full disk, read-only
    or not permitted), or None for any other exception.

    Parameters
    ----------
    exc
        The exception raised while writing.
    what
        The path (or a description of it) that was being written.
    """
    if not isinstance(exc, OSError) or exc.errno not in _STORAGE_ERRNOS:
        return None
    where = getattr(exc, "filename", None) or what
    full = exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    fix = (
        "free space or choose another `output.path`" if full else "choose a writable `output.path`"
    )
    return OutputError(
        f"output.path: cannot write {where}: {_STORAGE_ERRNOS[exc.errno]} "
        f"([Errno {exc.errno}]); {fix}"
    )


#: Free bytes below which a failed GDAL write is taken for a full disk, and how close to the
#: process's file size limit a file must have grown for it to be taken for the cause (GDAL
#: writes a block of at most 1 MiB at a time).
_NEARLY_FULL = 16 * 2**20
_NEAR_LIMIT = 2 * 2**20


def _gdal_storage_error(
    exc: BaseException, path: Path, written: Sequence[Path]
) -> OutputError | None:
    """:func:`storage_error` for a failed GDAL write, whose exception has no errno.

    GDAL logs the C library's reason ("File too large") but raises only "Write failed", so the
    cause is read off the file system instead: almost no free space, one of the files
    ``written`` grown to the process's file size limit (``ulimit -f``), or a directory this
    process may not write. None when none holds.
    """
    import resource

    error = storage_error(exc, path)
    if error is not None or not isinstance(exc, OSError | RuntimeError):
        return error
    directory = path.parent
    soft_limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    sizes = [p.stat().st_size for p in written if p.exists()]
    if shutil.disk_usage(directory).free < _NEARLY_FULL:
        code = errno.ENOSPC
    elif soft_limit != resource.RLIM_INFINITY and max(sizes, default=0) + _NEAR_LIMIT > soft_limit:
        code = errno.EFBIG
    elif not os.access(directory, os.W_OK):
        code = errno.EACCES
    else:
        return None
    return storage_error(OSError(code, os.strerror(code), str(path)), path)


def _fsync_dir(path: Path) -> None:
    """Make the entries of a directory (files created or renamed in it) durable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # not a directory on this platform / file system: nothing to sync
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems (e.g. some FUSE mounts) refuse fsync on directories
    finally:
        os.close(fd)


def _fsync_dirs(dirs: Iterable[Path]) -> None:
    """fsync directories, deepest first (each once)."""
    for d in sorted(set(dirs), key=lambda p: len(p.parts), reverse=True):
        _fsync_dir(d)


def fsync_paths(paths: Iterable[Path]) -> None:
    """fsync regular files and then the directories holding them."""
    parents: set[Path] = set()
    for path in paths:
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
            parents.add(path.parent)
    _fsync_dirs(parents)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (and ``root`` itself)."""
    dirs = [root]
    for base, dirnames, filenames in os.walk(root):
        dirs.extend(Path(base) / d for d in dirnames)
        for name in filenames:
            with open(Path(base) / name, "rb") as fh:
                os.fsync(fh.fileno())
    # Every directory once: the files' parents are among them.
    _fsync_dirs(dirs)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file, or all of the new one."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename itself must survive a crash too, or the marker could vanish after a power cut.
    _fsync_dir(path.parent)


def write_marker(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON completion marker atomically (call only once the tile's data is durable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(dict(record), sort_keys=True, default=str).encode())


def write_json(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON document atomically, indented for people to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(dict(record), indent=1, sort_keys=True, default=str).encode())


@contextmanager
def durable_store(path: Path) -> Iterator[Path]:
    """Build a directory store under a temporary name; on success make it durable and rename it
    to ``path``.

    Yields the temporary path to write. When the block ends without an exception everything
    under it is fsynced and it is renamed over ``path`` (an older complete store there, left by
    a crash between data and marker, is replaced: its values were the same). When it raises the
    temporary store is deleted. An interrupted process leaves at worst an orphan temporary
    store, removed by the next write of the same ``path`` or by :func:`remove_store`, never a
    truncated store under the final name.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        fsync_tree(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_orphans(path: Path) -> None:
    """Temporary stores that interrupted writes of the store at ``path`` left behind."""
    for orphan in path.parent.glob(f".{path.name}.*.tmp"):
        shutil.rmtree(orphan, ignore_errors=True)


def remove_store(path: Path) -> None:
    """Delete a store written by :func:`durable_store`, and any orphans of interrupted writes."""
    shutil.rmtree(path, ignore_errors=True)
    _remove_orphans(path)


def read_markers(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The records of the markers that exist among ``paths``."""
    records = []
    for path in paths:
        if path.exists():
            records.append(json.loads(path.read_text()))
    return records


def remove_published(layout: Layout) -> None:
    """Remove the completion record first, then leftovers of an interrupted publication.

    Published products stay until :func:`publish_dir` replaces them; only ``COMPLETE.json``
    goes now, because from here on the set may be a mix of old and new.
    """
    layout.complete.unlink(missing_ok=True)
    _fsync_dir(layout.root)


def _naive_utc(times: Sequence[datetime]) -> np.ndarray:
    stamps = [pd.Timestamp(t) for t in times]
    stamps = [s.tz_convert("UTC").tz_localize(None) if s.tzinfo else s for s in stamps]
    return np.array(stamps, dtype="datetime64[ns]")


def create_store(
    path: Path,
    grid: Any,
    *,
    times: Sequence[datetime],
    bands: Sequence[str],
    variables: Sequence[str],
    tile_size: int,
    attrs: Mapping[str, Any],
    inner_chunk: int | None = None,
    chunk_rows: int | None = None,
) -> None:
    """Create an empty (time, band, y, x) float32 Zarr store from a template; no data is written.

    Chunks are (all dates, 1 band, chunk_rows, tile_size), by default ``chunk_rows =
    tile_size``: the core of one tile in one band. Every chunk has exactly one writer as long
    as writes start on multiples of the chunk edges (staging writes whole cores; the cube takes
    ``chunk_rows = TileGrid.cube_chunk_rows`` for its row and seam writes). With
    ``inner_chunk`` the tile-sized chunks become shards of (inner_chunk × inner_chunk) chunks —
    still one writer per shard — so that a halo read decodes only the pixels it needs.
    Coordinates are the pixel centres of ``grid`` and the CRS and transform are stored the
    rioxarray way, so ``.rio.crs``/``.rio.transform()`` work.

    Parameters
    ----------
    path
        Store to (re)create; anything there is replaced.
    grid
        The target grid (``pipeline.grid.TargetGrid``).
    times, bands
        Coordinate labels.
    variables
        Names of the data variables.
    tile_size
        Spatial chunk size (columns; rows too unless ``chunk_rows``).
    attrs
        Dataset attributes (JSON-serialisable).
    inner_chunk
        Edge of the inner chunks of tile-sized shards (None: no sharding).
    chunk_rows
        Rows per chunk (None: ``tile_size``).
    """
    import dask.array as da
    import rioxarray  # noqa: F401  (registers the .rio accessor)

    shape = (len(times), len(bands), grid.height, grid.width)
    chunks = (len(times), 1, chunk_rows or tile_size, tile_size)
    y, x = grid.coords()
    data_vars = {
        name: (("time", "band", "y", "x"), da.empty(shape, dtype=np.float32, chunks=chunks))
        for name in variables
    }
    coords = {
        "time": _naive_utc(times),
        "band": np.array(list(bands), dtype=object),  # vlen strings: specified in Zarr v3
        "y": np.asarray(y, dtype=np.float64),
        "x": np.asarray(x, dtype=np.float64),
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=dict(attrs))
    ds = ds.rio.write_crs(grid.crs).rio.write_transform(grid.transform)
    for name in variables:
        # Update, not replace: write_crs put grid_mapping into the encoding. Listing spatial_ref
        # as a coordinate makes a plain ``xarray.open_zarr`` give ``.rio.crs`` back.
        layout: dict[str, Any] = {"chunks": chunks}
        if inner_chunk:
            layout = {"chunks": (*chunks[:2], inner_chunk, inner_chunk), "shards": chunks}
        ds[name].encoding.update(
            **layout, fill_value=np.nan, coordinates="spatial_ref", compressors=compressors()
        )
    if path.exists():
        shutil.rmtree(path)
    ds.to_zarr(path, mode="w", compute=False, consolidated=False, zarr_format=3)


def store_token(path: Path, attr: str) -> str | None:
    """The identity a run recorded in the ``attr`` attribute of the Zarr store at ``path``.

    None when there is no store, no such attribute, or leftovers that are not a readable store:
    callers then rebuild the store.
    """
    import zarr

    if not path.exists():
        return None
    try:
        token = zarr.open_group(store=str(path), mode="r").attrs.get(attr)
    except (OSError, ValueError, KeyError, zarr.errors.BaseZarrError):
        return None
    return token if isinstance(token, str) else None


def fsync_chunks(
    store: Path,
    variables: Sequence[str],
    chunk_rows: Iterable[int],
    chunk_cols: Iterable[int],
    band: int | None = None,
) -> None:
    """fsync chunk files (or shards) of a store made by :func:`create_store`.

    Chunks cover all dates and one band, so their keys are
    ``<variable>/c/0/<band>/<chunk row>/<chunk col>``: every band when ``band`` is None.
    Chunks never written (all fill value) have no file and are skipped.
    """
    bands = "*" if band is None else str(band)
    cols = list(chunk_cols)
    fsync_paths(
        p
        for name in variables
        for r in chunk_rows
        for c in cols
        for p in store.glob(f"{name}/c/*/{bands}/{r}/{c}")
    )


def publish_dir(partial: Path, final: Path) -> None:
    """Move a finished directory (or file) into place, replacing the previous one.

    The new one is complete and fsynced before anything moves. The previous one is renamed
    aside, the new one renamed in, and only then is the old one deleted: a reader sees the old
    product or the new one under ``final`` (or, for the instant between the two renames, none),
    never a mixture or a half-written one. Leftover ``.old-*`` copies of an interrupted
    publication are removed too.
    """
    if partial.is_dir():
        fsync_tree(partial)
    else:
        fsync_paths([partial])
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        os.replace(final, old)
    os.replace(partial, final)
    _fsync_dir(final.parent)
    for leftover in final.parent.glob(f".{final.name}.old-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def write_diagnostics(records: Sequence[Mapping[str, Any]], csv_path: Path, cube: Path) -> None:
    """Write the per-tile diagnostics as CSV (atomically) and as the ``diagnostics`` group of the
    cube; pass the cube's and the CSV's temporary names, both are published later."""
    columns = ["tile_id", "band", "row", "col", "iterations", "converged", "residual", "lam"]
    columns += ["seconds", "d", "n", "method"]
    table = pd.DataFrame(list(records), columns=columns).sort_values(["band", "row", "col"])
    table = table.reset_index(drop=True)
    _atomic_write(csv_path, table.to_csv(index=False).encode())
    ds = xr.Dataset({c: ("tile", table[c].to_numpy()) for c in columns if c != "tile_id"})
    ds = ds.assign_coords(tile_id=("tile", table["tile_id"].to_numpy(dtype=object)))
    for name in ("band", "method"):
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
) -> list[str]:
    """Write the clear ground of one band as one Cloud-Optimised GeoTIFF per date.

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

    Returns
    -------
    list of str
        The paths written.
    """
    import zarr

    src = zarr.open_array(store=str(cube), path="clear", mode="r")
    nodata: float = 0 if dtype == "uint16" else float("nan")
    profile = {
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
    tag = uuid.uuid4().hex[:8]
    scratch = [d.with_name(f".{d.stem}.{tag}.scratch.tif") for d in dsts]
    partial = [d.with_name(f".{d.stem}.{tag}.partial.tif") for d in dsts]
    for d in dsts:
        d.parent.mkdir(parents=True, exist_ok=True)
    try:
        _write_cog_files(src, scratch, partial, dsts, profile, band_index, dtype, max_dn, block)
    except Exception as exc:
        # A full or read-only disk is the user's to fix: one line naming the place, exit 2.
        error = _gdal_storage_error(exc, dsts[0], [*scratch, *partial])
        if error is None:
            raise
        raise error from exc
    finally:
        for leftover in (*scratch, *partial):
            leftover.unlink(missing_ok=True)
    return [str(d) for d in dsts]


def _write_cog_files(
    src: Any,
    scratch: Sequence[Path],
    partial: Sequence[Path],
    dsts: Sequence[Path],
    profile: Mapping[str, Any],
    band_index: int,
    dtype: str,
    max_dn: float,
    block: int,
) -> None:
    """The GDAL part of :func:`write_cogs`: tiled GeoTIFFs, then COGs renamed into place."""
    import rasterio
    import rasterio.shutil

    height, width = profile["height"], profile["width"]
    outs = [rasterio.open(p, "w", **profile) for p in scratch]
    try:
        # One cube chunk (all dates of a block × block tile) at a time: memory stays at a
        # tile's size whatever the scene's width.
        for r0 in range(0, height, block):
            r1 = min(r0 + block, height)
            for c0 in range(0, width, block):
                c1 = min(c0 + block, width)
                clear = np.asarray(src[:, band_index, r0:r1, c0:c1])  # (time, rows, cols)
                for out, frame in zip(outs, clear, strict=True):
                    window = ((r0, r1), (c0, c1))
                    out.write(_encode(frame, dtype, max_dn), 1, window=window)
    finally:
        for out in outs:
            out.close()
    for s_path, p_path, dst in zip(scratch, partial, dsts, strict=True):
        # DEFLATE, which every GeoTIFF reader has, at level 1: a GF-4-like band took 16 %
        # less time than at the default level 6 and came out no larger (0.68 vs 0.69).
        rasterio.shutil.copy(
            s_path,
            p_path,
            driver="COG",
            compress="DEFLATE",
            level=1,
            predictor=2,
            blocksize=512,
            # While this is the last product task running, an idle core compresses for it;
            # blocks are compressed independently, so the bytes are the same as with one.
            num_threads=COG_THREADS,
        )
        os.replace(p_path, dst)


#: GDAL compression threads per COG (``NUM_THREADS`` of the COG driver).
COG_THREADS = 2


def _encode(clear: np.ndarray, dtype: str, max_dn: float) -> np.ndarray:
    if dtype == "float32":
        return clear.astype(np.float32)
    dn = np.rint(np.clip(clear, 0.0, 1.0) * max_dn)
    dn = np.clip(dn, 1, 65535)  # 0 is nodata
    return np.where(np.isfinite(clear), dn, 0).astype(np.uint16)


def write_quicklooks(
    input_store: Path,
    cube: Path,
    dsts: Sequence[Path],
    *,
    bands: Sequence[int],
    size: int = 1024,
) -> list[str]:
    """Write one PNG per date with the observed (left) and the clear (right) image.

    ``dsts`` are the destinations in the cube's time order; ``bands`` are one (grey) or three
    (RGB) band indices. Both halves of a date share one 2–98 % stretch taken from its clear
    image, so haze and cloud show as brightening.

    Each store is read once for all dates, every ``step``-th pixel (step = longest side /
    ``size``): their chunks hold all dates, so reading date by date would decompress the scene's
    bands once per date.

    Returns
    -------
    list of str
        The paths written.
    """
    import zarr

    before = zarr.open_array(store=str(input_store), path="observed", mode="r")
    after = zarr.open_array(store=str(cube), path="clear", mode="r")
    height, width = after.shape[-2:]
    step = max(1, -(-max(height, width) // size))
    every = slice(None, None, step)
    # Strided reads keep memory at the quicklooks' size even for 10k-pixel scenes.
    lefts = np.stack([np.asarray(before[:, b, every, every]) for b in bands], axis=-1)
    rights = np.stack([np.asarray(after[:, b, every, every]) for b in bands], axis=-1)
    return [
        _save_quicklook(left, right, dst)
        for left, right, dst in zip(lefts, rights, dsts, strict=True)
    ]


def _save_quicklook(left: np.ndarray, right: np.ndarray, dst: Path) -> str:
    """Observed | clear side by side, stretched together, written atomically as PNG."""
    import matplotlib.image

    finite = right[np.isfinite(right)]
    lo, hi = np.percentile(finite, [2, 98]) if finite.size else (0.0, 1.0)
    scale = max(hi - lo, 1e-6)
    gap = np.ones((left.shape[0], max(left.shape[1] // 50, 2), left.shape[2]))
    image = np.concatenate([left, gap * hi, right], axis=1)
    image = np.nan_to_num(np.clip((image - lo) / scale, 0, 1), nan=0.0)
    if image.shape[-1] == 1:
        image = np.repeat(image, 3, axis=-1)
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(f".{dst.stem}.{uuid.uuid4().hex[:8]}.png")
    try:
        matplotlib.image.imsave(partial, image)
        os.replace(partial, dst)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        error = storage_error(exc, dst)
        if error is None:
            raise
        raise error from exc
    return str(dst)
