"""The Zarr stores of a run: (time, band, y, x) float32 templates, their chunks and identity.

Open the cube with ``xarray.open_zarr(path, consolidated=False)``: Zarr v3 has no consolidated
metadata.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import xarray as xr

__all__ = [
    "absent_chunks",
    "advise_files",
    "arrays_for_writing",
    "chunk_files",
    "chunk_range",
    "compressors",
    "create_store",
    "prefetch_files",
    "read_ahead",
    "store_token",
    "written_whole",
]


def compressors() -> tuple[Any, ...]:
    """The compression of every Zarr array a run writes: Blosc LZ4 with byte shuffle.

    Lossless. Reflectance in float32 barely compresses (the low mantissa bits are noise), so
    the codec's speed matters more than its strength: on a 1024² × 7-date float32 tile it
    wrote 3-4x faster than Zarr's default Zstd and still stored less (ratio 1.35 against
    1.16). Every stage reads and writes the scene several times, so this is run time.
    Byte shuffle rather than bit shuffle: on the chunks of one band of a solved 2560² scene
    (``python benchmarks/cube_codecs.py RUN_DIR``: the input and the four layers, one thread) it
    encoded 1.6x and decoded 1.6x faster and stored less overall (ratio 2.13 against 2.05; the
    clear layer and the input a little more, 1.37 against 1.43, the cloud and shadow layers
    less).
    """
    from zarr.codecs import BloscCodec, BloscShuffle

    return (BloscCodec(cname="lz4", clevel=5, shuffle=BloscShuffle.shuffle),)


def written_whole(array: Any) -> Any:
    """``array`` (a Zarr array open for writing) that encodes and writes every chunk it is
    given, without first checking whether the chunk holds only the fill value.

    Zarr's default (``write_empty_chunks=False``) compares each chunk with the fill value before
    writing it, to leave out chunks that hold nothing: a full pass over a chunk the pipeline has
    just computed whole, which cost as much as compressing it (2.1 and 2.3 thread-seconds of a
    2560² run, docs/PERFORMANCE.md). The only chunks that hold nothing here lie beyond every
    date's footprint: written, they are a few compressed bytes each and read back the same.
    """
    return array.with_config({"write_empty_chunks": True})


def arrays_for_writing(store: Path, names: Sequence[str]) -> list[Any]:
    """The arrays ``names`` of the Zarr group at ``store`` (a cube's data variables, the staged
    input's layers), in their order, open for writing every chunk whole
    (:func:`written_whole`)."""
    import zarr

    group = zarr.open_group(store=str(store), mode="r+")
    return [written_whole(group[name]) for name in names]


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
    codes: Sequence[str] = (),
    date_codes: Sequence[str] = (),
) -> None:
    """Create an empty (time, band, y, x) float32 Zarr store from a template; no data is written.

    ``codes`` are uint8 (time, band, y, x) variables and ``date_codes`` uint8 (time, y, x) ones,
    with 255 as fill value (no data), chunked alike.

    Chunks are (all dates, 1 band, chunk_rows, tile_size), by default ``chunk_rows =
    tile_size``: the core of one tile in one band. Every chunk has exactly one writer as long
    as writes start on multiples of the chunk edges (staging writes whole cores; the cube takes
    ``chunk_rows = TileGrid.cube_chunk_rows`` for its row and seam writes). With
    ``inner_chunk`` the tile-sized chunks of the float32 ``variables`` become shards of
    (inner_chunk × inner_chunk) chunks — still one writer per shard — so that a halo read
    decodes only the pixels it needs; codes stay whole chunks: they compress to almost nothing
    and decode whole in less time than the shards' index work takes (a 1024² core's 0/1
    ``seen``, 7 dates × 5 bands: 0.14 s of CPU to write in 128² shards).
    Coordinates are the pixel centres of ``grid`` and the CRS and transform are stored the
    rioxarray way, so ``.rio.crs``/``.rio.transform()`` work.

    Parameters
    ----------
    path
        Store to (re)create; anything there is replaced.
    grid
        The target grid (``pipeline.grid.target.TargetGrid``).
    times, bands
        Coordinate labels.
    variables
        Names of the data variables.
    tile_size
        Spatial chunk size (columns; rows too unless ``chunk_rows``).
    attrs
        Dataset attributes (JSON-serialisable).
    inner_chunk
        Edge of the inner chunks of the ``variables``' tile-sized shards (None: no sharding).
    chunk_rows
        Rows per chunk (None: ``tile_size``).
    """
    import dask.array as da
    import rioxarray  # noqa: F401  (registers the .rio accessor)

    shape = (len(times), len(bands), grid.height, grid.width)
    chunks = (len(times), 1, chunk_rows or tile_size, tile_size)
    y, x = grid.coords()
    dims4: tuple[str, ...] = ("time", "band", "y", "x")
    dims3: tuple[str, ...] = ("time", "y", "x")
    chunks3 = (chunks[0], *chunks[2:])
    data_vars: dict[str, tuple[tuple[str, ...], Any]] = {
        name: (dims4, da.empty(shape, dtype=np.float32, chunks=chunks)) for name in variables
    }
    data_vars |= {name: (dims4, da.empty(shape, dtype=np.uint8, chunks=chunks)) for name in codes}
    data_vars |= {
        name: (dims3, da.empty((shape[0], *shape[2:]), dtype=np.uint8, chunks=chunks3))
        for name in date_codes
    }
    coords = {
        "time": _naive_utc(times),
        "band": np.array(list(bands), dtype=object),  # vlen strings: specified in Zarr v3
        "y": np.asarray(y, dtype=np.float64),
        "x": np.asarray(x, dtype=np.float64),
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=dict(attrs))
    ds = ds.rio.write_crs(grid.crs).rio.write_transform(grid.transform)
    for name in (*variables, *codes, *date_codes):
        # Update, not replace: write_crs put grid_mapping into the encoding. Listing spatial_ref
        # as a coordinate makes a plain ``xarray.open_zarr`` give ``.rio.crs`` back.
        own = chunks3 if name in date_codes else chunks
        layout: dict[str, Any] = {"chunks": own}
        if inner_chunk and name in variables:
            layout = {"chunks": (*own[:-2], inner_chunk, inner_chunk), "shards": own}
        fill = np.nan if name in variables else 255
        ds[name].encoding.update(
            **layout, fill_value=fill, coordinates="spatial_ref", compressors=compressors()
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


def chunk_range(start: int, stop: int, size: int) -> range:
    """Indices of the chunks of edge ``size`` that pixels ``[start, stop)`` fall in."""
    return range(start // size, -(-stop // size))


def chunk_files(
    store: Path,
    variables: Sequence[str],
    chunk_rows: Iterable[int],
    chunk_cols: Iterable[int],
    band: int | None = None,
    *,
    per_band: bool = True,
) -> list[Path]:
    """The chunk files (or shards) of a store made by :func:`create_store` that exist.

    Chunks cover all dates and one band, so their keys are
    ``<variable>/c/0/<band>/<chunk row>/<chunk col>``: every band when ``band`` is None; with
    ``per_band=False`` the variables are (time, y, x) ones (``date_codes``), keyed
    ``<variable>/c/0/<chunk row>/<chunk col>``. Chunks never written (all fill value) have no
    file and are left out. A task fsyncs the files it wrote
    (``pipeline.store.durable.fsync_paths``) and reads ahead the ones it will read
    (:func:`prefetch_files`).
    """
    bands = "" if not per_band else ("*/" if band is None else f"{band}/")
    cols = list(chunk_cols)
    rows = list(chunk_rows)
    return [
        p
        for name in variables
        for r in rows
        for c in cols
        for p in store.glob(f"{name}/c/*/{bands}{r}/{c}")
    ]


def absent_chunks(
    store: Path,
    variables: Sequence[str],
    chunk_rows: Iterable[int],
    chunk_cols: Iterable[int],
    bands: Iterable[int],
) -> list[Path]:
    """The chunk files (or shards) of ``variables`` in a store made by :func:`create_store`,
    over those chunk rows and columns and every band of ``bands``, that do not exist.

    Every chunk of a run's solved layers is written whole (:func:`written_whole`), empty tiles
    and dates left out included, so before the mask pass none of them may be absent: Zarr reads
    an absent chunk as its fill value, NaN, which would come out as no data without a word.
    """
    rows, cols = list(chunk_rows), list(chunk_cols)
    expected = (
        store / name / "c" / "0" / str(b) / str(r) / str(c)
        for name in variables
        for b in bands
        for r in rows
        for c in cols
    )
    return [p for p in expected if not p.is_file()]


def prefetch_files(paths: Iterable[Path]) -> None:
    """Ask the kernel to start reading ``paths`` into the page cache, without waiting for them.

    ``posix_fadvise(WILLNEED)`` queues the reads of every file at once, while the caller works on
    what it already has; its later reads of them then find them in memory
    (:func:`advise_files`).
    """
    if hasattr(os, "POSIX_FADV_WILLNEED"):
        advise_files(paths, os.POSIX_FADV_WILLNEED)


def advise_files(paths: Iterable[Path], advice: int) -> None:
    """``posix_fadvise(advice)`` over the whole of each file of ``paths``.

    Where the call does not exist (not a POSIX system) this does nothing; so does a file that
    is gone (its read will say so).
    """
    if not hasattr(os, "posix_fadvise"):
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, advice)
        finally:
            os.close(fd)


T = TypeVar("T")


def read_ahead(items: Sequence[T], fetch: Callable[[T], None]) -> Iterator[T]:
    """``items`` in order, each one's ``fetch`` called before it comes: the first one's at once,
    each next one's in a background thread while the caller works on the one before.

    With ``fetch`` asking for an item's chunk files (:func:`prefetch_files`), the disk reads the
    next item's data while the caller computes on this one's. The asking is done off the
    caller's thread because it is not free: ``posix_fadvise(WILLNEED)`` queues the reads
    synchronously and waits when the device's queue is full, which on the development machine's
    disk held a full-size mask task for 7.0 of its 36.2 s (docs/PERFORMANCE.md). An item comes
    only once its fetch has returned (an error of the fetch is raised here), so its files are
    always asked for before the caller reads them.
    """
    if not items:
        return
    fetch(items[0])
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead") as pool:
        for i, item in enumerate(items):
            following = pool.submit(fetch, items[i + 1]) if i + 1 < len(items) else None
            yield item
            if following is not None:
                following.result()
