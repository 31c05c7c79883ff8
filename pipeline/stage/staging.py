"""Stage 1: warp every acquisition onto the target grid into ``work/input.zarr``.

The store is created from a template first; then one task per spatial tile reads its core window
of every date (all bands) and writes exactly the chunks of that core, which no other task
touches. Later stages read halos across chunk borders, which is safe once staging is done.

A tile's chunk files are fsynced before its marker is written, so a marker survives a crash
only together with the data it vouches for.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.cluster import Task
from pipeline.errors import ConfigError, InputError, TileError
from pipeline.grid.tiling import Tile, TileGrid
from pipeline.ids import ALL_BANDS
from pipeline.plan import RunPlan
from pipeline.store.cube import arrays_for_writing, chunk_files, create_store, store_token
from pipeline.store.durable import fsync_paths, storage_error, write_marker
from pipeline.store.layout import INPUT_OBSERVED, INPUT_SEEN, STAGED, Layout
from pipeline.store.previews import PreviewSpec, keep_band

__all__ = ["StageJob", "prepare_input_store", "stage_tasks", "stage_tile"]

log = logging.getLogger(__name__)

#: Dates a stage task reads and warps at once. A single-threaded task left its core idle while
#: a date's pages came from the disk; two hold two dates' source windows (about 27 MiB each at
#: full size). At full size, inputs read from the disk, the stage tasks waited 9.8 s off the CPU
#: against 11.9-12.8 s with one (stage phase 65.8 against 68.5-69.7 s, one run each;
#: docs/PERFORMANCE.md); at 2560² the difference is within the spread between runs.
STAGE_THREADS = 2

#: Attribute of input.zarr holding the identity of what it was staged from.
TOKEN_ATTR = "cloudremoval_stage_token"


def prepare_input_store(
    layout: Layout,
    grid: Any,
    tiles: TileGrid,
    acquisitions: Sequence[Any],
    *,
    token: str,
) -> bool:
    """Create ``work/input.zarr`` unless one staged from the same inputs and grid exists.

    Parameters
    ----------
    layout
        Output layout.
    grid
        The target grid.
    tiles
        The tiling (its tile size is the chunk size).
    acquisitions
        The series, in time order.
    token
        Identity of inputs, grid, tiling and code version; a store with another token is
        replaced, and with it every staging marker (they describe the old store's chunks).

    Returns
    -------
    bool
        True when a fresh store was created.
    """
    store = layout.input_store
    if store_token(store, TOKEN_ATTR) == token:
        return False
    for marker in layout.markers(f"{ALL_BANDS}-"):
        marker.unlink()
    create_store(
        store,
        grid,
        times=[a.time for a in acquisitions],
        bands=acquisitions[0].bands,
        variables=[INPUT_OBSERVED],
        codes=[INPUT_SEEN],
        tile_size=tiles.tile_size,
        inner_chunk=tiles.inner_chunk,
        attrs={
            TOKEN_ATTR: token,
            "acquisitions": [a.id for a in acquisitions],
            "max_dn": [float(a.max_dn) for a in acquisitions],
        },
    )
    return True


@dataclass(frozen=True)
class StageJob:
    """Staging of one spatial tile: all dates and bands of its core window."""

    tile: Tile
    tile_id: str
    acquisitions: tuple[Any, ...]
    grid: Any
    layout: Layout
    dem: Path | None = None  # heights for RPC orthorectification (inputs.dem)
    # Where the core's observations are sampled for the quicklooks (pipeline.store.previews); kept
    # whether or not this run writes quicklooks, so that a later run with them finds them.
    samples: PreviewSpec | None = None


def stage_tile(job: StageJob) -> dict[str, Any]:
    """Read the core window of every acquisition and write it into ``input.zarr``: the
    observations and where they are finite (:data:`pipeline.store.layout.STAGED`), and their
    quicklook samples (``job.samples``).

    Runs on a worker. Writes the completion marker after the data.

    Raises
    ------
    InputError, ConfigError
        An input the user must fix (e.g. DN above ``max_dn``); the message names the tile and
        the file.
    OutputError
        ``input.zarr`` cannot be written (full disk, read-only).
    TileError
        Reading or writing failed otherwise; the message names the acquisition.
    """

    from pipeline.stage.stac_read import read_stac_window
    from pipeline.stage.warp import read_window

    core = job.tile.core
    rows, cols = core.slices
    # Each date is read straight into its slice of the tile's cube: stacking separate frames
    # copied the whole cube once more (a quarter of a 1024² tile's staging time).
    n_bands = len(job.acquisitions[0].bands)
    shape = (len(job.acquisitions), n_bands, core.height, core.width)
    cube = np.empty(shape, dtype=np.float32)  # (time, band, h, w)
    # 1 where finite, 0 where not; a provider's cloud or shadow 2 or 3 (inputs.quality).
    seen = np.empty(shape, dtype=np.uint8)

    def read_date(date: int) -> int:
        """Fill date ``date``'s slice of the cube and of ``seen``; its count of finite values."""
        frame, acq = cube[date], job.acquisitions[date]
        try:
            if acq.stac is not None:
                # The provider's cloud and shadow (inputs.quality) are seen, not observed:
                # NaN in the cube, so the solve leaves them out, and coded in ``seen``.
                seen[date] = read_stac_window(acq, job.grid, core.to_rasterio(), out=frame)
                return int(np.count_nonzero(np.isfinite(frame)))
            read_window(acq, job.grid, core.to_rasterio(), dem=job.dem, out=frame)
        except (InputError, ConfigError) as exc:
            raise type(exc)(f"tile {job.tile.name}: {exc}") from None
        except Exception as exc:
            raise TileError(job.tile_id, f"reading {acq.id}: {type(exc).__name__}: {exc}") from exc
        finite = np.isfinite(frame, out=seen[date].view(bool))
        return int(np.count_nonzero(finite))

    # Dates in STAGE_THREADS threads (the reads, GDAL and the warp kernel release the GIL): one
    # date's pages come from the disk while another's are warped; the first error is raised.
    # rasterio's GDAL settings are per thread; the warnings filter that read_window's open sets
    # is per process, and two threads may interleave it: at worst the warning it hides
    # (NotGeoreferencedWarning) stays hidden in this worker.
    with ThreadPoolExecutor(STAGE_THREADS, thread_name_prefix="stage") as pool:
        finite = sum(pool.map(read_date, range(len(job.acquisitions))))
    store = job.layout.input_store
    try:
        layers: tuple[np.ndarray, ...] = (cube, seen)
        for target, values in zip(arrays_for_writing(store, STAGED), layers, strict=True):
            target[:, :, rows, cols] = values
        if job.samples is not None:
            for band in job.samples.bands:
                keep_band(job.samples, job.tile, "observed", band, cube[:, band], core)
        # Cores are aligned with chunks (chunk = tile_size): all dates and bands of this core.
        fsync_paths(chunk_files(store, list(STAGED), [job.tile.row], [job.tile.col]))
    except Exception as exc:
        raise storage_error(exc, store) or TileError(
            job.tile_id, f"writing input.zarr: {type(exc).__name__}: {exc}"
        ) from exc
    record = {"tile_id": job.tile_id, "row": job.tile.row, "col": job.tile.col}
    record["valid_fraction"] = finite / cube.size
    write_marker(job.layout.marker(job.tile_id), record)
    return record


def clear_work(layout: Layout) -> None:
    """Remove everything a previous run left under ``work/`` except simulated/extracted inputs."""
    for path in (layout.input_store, layout.strips, layout.done):
        if path.exists():
            shutil.rmtree(path)


def stage_tasks(plan: RunPlan) -> tuple[list[Task], int]:
    """The stage phase's tasks: ``work/input.zarr`` prepared, one task per tile not staged yet.

    Parameters
    ----------
    plan
        The run's plan.

    Returns
    -------
    tasks : list of Task
        One :func:`stage_tile` task per tile whose marker does not exist.
    skipped : int
        The tiles staged already (their marker exists).
    """
    layout, tiles, acqs = plan.layout, plan.tiles, tuple(plan.acquisitions)
    prepare_input_store(layout, plan.grid, tiles, list(acqs), token=plan.input_token)
    ids = plan.stage_ids
    todo = [t for t in tiles if not layout.marker(ids[t.row, t.col]).exists()]
    dem, samples = plan.config.inputs.dem, plan.samples
    tasks = [
        Task(
            ids[t.row, t.col],
            stage_tile,
            (StageJob(t, ids[t.row, t.col], acqs, plan.grid, layout, dem, samples=samples),),
        )
        for t in todo
    ]
    return tasks, len(tiles) - len(todo)
