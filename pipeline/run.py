"""One pipeline run: inputs → target grid → stage → solve + blend → products, on a Dask cluster.

Each phase is one function below. Staging is one Dask task per tile; solving and blending are
one task per (band, tile row) and one per (band, border between tile rows)
(:mod:`pipeline.solve.rows`); products one per band. Tasks are keyed by deterministic ids
(:mod:`pipeline.plan`). Work whose completion marker exists is skipped, so a rerun resumes
where a previous one stopped, even after a ``kill -9``: markers are written only once the data
is durable (:mod:`pipeline.store.durable`). A task that raises is
retried (:data:`pipeline.cluster.RETRIES`), and one that keeps failing is reported at the end
while the others still finish. Problems the user must fix (bad input, a full or read-only
output disk) stop the run with a :class:`~pipeline.errors.PipelineError` instead, once the
stage's other tiles are done. Nothing is published unless every tile and product succeeded.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.cluster import Task, TaskClock, connect, holds_tasks, run_tasks, solver_threads
from pipeline.config import Config
from pipeline.control.status import RunSummary, TileFailure, finish_run_record, write_run_record
from pipeline.errors import ConfigError, InputError, PipelineError
from pipeline.ids import ALL_BANDS
from pipeline.inputs.radiometry import value_meaning
from pipeline.outputs.mask_layer import tile_records
from pipeline.outputs.products import (
    write_cogs,
    write_diagnostics,
    write_mask_cogs,
    write_quicklooks,
)
from pipeline.plan import RunPlan, make_plan
from pipeline.solve.rows import RowJob, SeamJob, blend_seam, solve_row, strip_ids
from pipeline.solve.warmup import KernelWarmup
from pipeline.stage.staging import StageJob, clear_work, prepare_input_store, stage_tile
from pipeline.store.cube import create_store, store_token
from pipeline.store.durable import (
    OutputError,
    output_errors,
    publish_dir,
    remove_published,
    storage_error,
    write_json,
    write_marker,
)
from pipeline.store.layout import MASK, PROVENANCE, Layout, components, haze_observed
from pipeline.store.previews import PreviewSpec, preview_step

#: Attribute of cube.zarr holding the plan it was built for (:attr:`RunPlan.cube_token`).
CUBE_TOKEN_ATTR = "cloudremoval_cube_token"

#: Which ready task a worker takes first (Dask task priorities, higher first). A seam frees
#: its rows' strips. The mask tasks and the products behind them are the run's last chain:
#: once ready they go first. The bands' COGs go last: a worker with no row left writes them
#: while the other solves its last one (at the end of the solve batch one worker would
#: otherwise wait for the other's last row, up to a row task's length).
SEAM_PRIORITY, MASK_PRIORITY, ROW_PRIORITY, BAND_COG_PRIORITY = 3, 2, 1, 0

__all__ = ["RunSummary", "TileFailure", "run"]

log = logging.getLogger(__name__)


def _failures(stage: str, failed: dict[str, BaseException]) -> list[TileFailure]:
    return [
        TileFailure(stage, key, str(exc).splitlines()[0]) for key, exc in sorted(failed.items())
    ]


def _user_error(stage: str, failed: dict[str, BaseException]) -> PipelineError | None:
    """The first failure the user must fix (bad input, unwritable output), as one error.

    Such a failure would fail again on every rerun, so it ends the run with exit code 2 and
    one line instead of being listed as a tile to retry.
    """
    fixable = [
        exc
        for _, exc in sorted(failed.items())
        if isinstance(exc, InputError | ConfigError | OutputError)
    ]
    if not fixable:
        return None
    first = fixable[0]
    more = f" (and {len(fixable) - 1} more {stage} task(s))" if len(fixable) > 1 else ""
    return type(first)(f"{str(first).splitlines()[0]}{more}")


def _quicklook_bands(bands: tuple[str, ...]) -> list[int]:
    """Red, green, blue band indices of GF-4 PMS (B4, B3, B2) when present, else the first band."""
    rgb = ["B4", "B3", "B2"]
    return [bands.index(b) for b in rgb] if all(b in bands for b in rgb) else [0]


def _check_writable(layout: Layout) -> list[Path]:
    """Create ``work/`` and prove a file can be written there, before hours of computing.

    Returns the directories it created, deepest first (see :func:`_remove_if_empty`).
    """
    probe = layout.work / ".write-probe"
    created = [p for p in (layout.work, *layout.work.parents) if not p.exists()]
    try:
        layout.work.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        _remove_if_empty(created)  # what ``mkdir`` made before it failed
        raise storage_error(exc, layout.root) or OutputError(
            f"output.path: cannot write {layout.root} ({exc.strerror or exc}); choose a "
            "writable `output.path`"
        ) from None
    return created


def _remove_if_empty(directories: Sequence[Path]) -> None:
    """Remove those of ``directories`` (deepest first) that are still empty: a run that stops on
    bad input before writing anything leaves no empty output directory behind. A directory
    holding anything stays."""
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or gone): its parents are not empty either


def run(config: Config, *, overwrite: bool = False) -> RunSummary:
    """Run the whole pipeline described by ``config``.

    Parameters
    ----------
    config
        The validated configuration.
    overwrite
        Redo every tile, ignoring completion markers of earlier runs.

    Returns
    -------
    RunSummary
        Counts of tiles done and skipped per stage and the failures, if any.

    Raises
    ------
    PipelineError
        Invalid inputs or configuration, an unreachable cluster, or an output location that
        cannot be written (full, read-only). Failures of single tiles do not raise; they are
        listed in the summary.
    """
    started = time.perf_counter()
    log.info("configuration:\n%s", config.to_yaml().rstrip())
    layout = Layout(Path(config.output.path))
    created = _check_writable(layout)
    if overwrite:
        clear_work(layout)
    try:
        # A disk that fills up while the client itself writes (templates, markers, products).
        with output_errors(layout.root):
            return _run(config, layout, started)
    except BaseException:
        _remove_if_empty(created)  # stopped (bad input, no cluster): no empty directory left
        raise


class _Progress:
    """What a run has done so far: counts, failures, wall seconds per phase, the run record."""

    def __init__(self, plan: RunPlan, started: float) -> None:
        self.plan, self.started = plan, started
        self.record = write_run_record(plan)
        self.failures: list[TileFailure] = []
        self.counts = dict.fromkeys(
            ("staged", "stage_skipped", "solved", "solve_skipped", "blended"), 0
        )
        self.phases: dict[str, float] = {}  # wall seconds per phase, in run order
        self.clock = TaskClock()  # the tasks' seconds by stage and by worker
        self._mark = time.perf_counter()

    def lap(self, name: str) -> None:
        """Close the phase ``name``: the seconds since the last lap are its."""
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._mark
        self._mark = now

    def check(self, stage: str, failed: dict[str, BaseException]) -> None:
        """Stop on a failure the user must fix; list the others as failed tiles."""
        error = _user_error(stage, failed)
        if error is not None:
            finish_run_record(self.plan.layout, self.record, "failed")
            raise error
        self.failures.extend(_failures(stage, failed))

    def finish(self, outcome: str, products: tuple[str, ...] = ()) -> RunSummary:
        """Record the outcome and sum the run up."""
        plan = self.plan
        finish_run_record(plan.layout, self.record, outcome)
        summary = RunSummary(
            output=plan.layout.root,
            tiles=len(plan.tiles),
            bands=len(plan.bands),
            **self.counts,
            seconds=time.perf_counter() - self.started,
            failures=tuple(self.failures),
            products=products,
            phase_seconds=tuple(self.phases.items()),
            task_seconds=tuple((k, s, c, sys_) for k, (s, c, sys_) in self.clock.by_stage.items()),
            worker_busy=tuple(sorted(self.clock.busy.values(), reverse=True)),
            task_span=self.clock.span,
        )
        log.debug("%s", summary.describe())  # the CLI prints it; library callers get it
        return summary


def _run(config: Config, layout: Layout, started: float) -> RunSummary:
    plan = make_plan(config, layout)
    tiles, grid = plan.tiles, plan.grid
    log.info(
        "%d acquisitions, bands %s; grid %s %dx%d px; %d tiles of %d px (+%d overlap)",
        len(plan.acquisitions),
        ",".join(plan.bands),
        grid.crs,
        grid.width,
        grid.height,
        len(tiles),
        tiles.tile_size,
        tiles.overlap,
    )
    progress = _Progress(plan, started)
    products = _ProductPlan(plan)
    with connect(config.cluster) as client:
        # Workers load the solver's kernels while they stage (pipeline.solve.warmup).
        client.register_plugin(KernelWarmup(config.solver))
        progress.lap("setup")
        unstaged = _stage(client, plan, progress)
        progress.lap("stage")
        # In tile scope this batch runs the mask and the products too (_solve_and_blend).
        cube_tmp = _solve_and_blend(client, plan, progress, unstaged, products)
        progress.lap("solve")
        if progress.failures:
            # A cube with holes must never look like a result: keep it under its temporary name,
            # publish nothing, and let a rerun (which retries only the failed tiles) finish it.
            return progress.finish("failed")
        products.diagnostics(tile_records(_record_markers(plan)), cube_tmp)
        if plan.config.solver.scope == "scene":
            _mask_and_products(client, plan, progress, cube_tmp, products)
        progress.lap("mask+products")
        if progress.failures:
            return progress.finish("failed")
    published = _publish(plan, cube_tmp, products.finals)
    progress.lap("publish")
    return progress.finish("complete", published)


def _stage(client: Any, plan: RunPlan, progress: _Progress) -> set[str]:
    """Phase 1: warp every date of each tile not yet staged into ``work/input.zarr``.

    Returns the keys of the tiles that could not be staged.
    """
    layout, tiles, acqs = plan.layout, plan.tiles, plan.acquisitions
    prepare_input_store(layout, plan.grid, tiles, list(acqs), token=plan.input_token)
    stage_ids = plan.stage_ids
    todo = [t for t in tiles if not layout.marker(stage_ids[t.row, t.col]).exists()]
    dem, samples = plan.config.inputs.dem, _samples_spec(plan)
    stage_jobs = [
        Task(
            stage_ids[t.row, t.col],
            stage_tile,
            (
                StageJob(
                    t,
                    stage_ids[t.row, t.col],
                    tuple(acqs),
                    plan.grid,
                    layout,
                    dem,
                    samples=samples,
                ),
            ),
        )
        for t in todo
    ]
    staged, failed = run_tasks(client, stage_jobs, stage="stage", clock=progress.clock)
    progress.check("stage", failed)
    progress.counts.update(staged=len(staged), stage_skipped=len(tiles) - len(todo))
    return set(failed)


def _solve_and_blend(
    client: Any, plan: RunPlan, progress: _Progress, unstaged: set[str], products: _ProductPlan
) -> Path:
    """Phases 2-3: solve and blend every band into the cube under construction; returns it.

    All bands go in one batch: a band's row tasks in row order, each seam as soon as its two
    rows are done (seams first among ready tasks, which frees their strips), so no worker idles
    at a band's end and the scratch disk holds only the strips of rows whose neighbour is not
    done yet. Unless the mask pass changes ``clear`` (``output.keep_clear``), a band's COGs
    come after its rows and seams in the same batch, after every row that is ready
    (:data:`BAND_COG_PRIORITY`): a worker with no row left to solve writes them while the
    other still solves (they are taken from ``products``). The mask tasks and the products
    behind them are in the batch too, behind every row and seam (not the COGs), and before
    any COG still waiting. When a band cannot be completed (tiles not staged), the batch has
    no mask: the run fails.
    """
    layout, tiles = plan.layout, plan.tiles
    cube_tmp = _open_cube(plan)
    if plan.config.solver.scope == "scene":
        _solve_scene(client, plan, progress, unstaged, cube_tmp)
        return cube_tmp
    threads = solver_threads(plan.config.cluster)
    counts = progress.counts
    jobs: list[Task] = []
    band_work: dict[str, list[str]] = {}  # band → keys of its tasks in this batch
    cogs_after: dict[str, tuple[str, ...]] = {}  # band → the tasks its COGs wait for
    names = layout.marker_ids()  # one listing of work/done/ for every band
    every_band_complete = True  # each band done already, or completed by this batch
    for b, band in enumerate(plan.bands):
        if plan.blended_id(band) in names:
            counts["solve_skipped"] += len(tiles)
            cogs_after[band] = ()
            continue
        band_jobs, skipped, complete = _band_tasks(
            plan, b, band, cube_tmp, unstaged, threads, names
        )
        counts["solve_skipped"] += skipped
        jobs += band_jobs
        if complete:  # every row and seam of the band is (or will be) run
            band_work[band] = [t.key for t in band_jobs]
            cogs_after[band] = tuple(band_work[band])
        every_band_complete &= complete
    if products.cogs_with_solve:
        jobs += products.band_cogs(cube_tmp, cogs_after)
    if every_band_complete and not progress.failures:
        solving = tuple(key for keys in band_work.values() for key in keys)
        jobs += _mask_tasks(plan, cube_tmp, products, after=solving)
    stages = {t.key: t.stage or "solve" for t in jobs}
    done = _run_batch(client, plan, progress, jobs, "solve")
    counts["solved"] = sum(len(r["tiles"]) for k, r in done.items() if stages[k] == "solve")
    counts["blended"] = sum(stages[k] == "blend" for k in done)
    for band, keys in band_work.items():
        if all(key in done for key in keys):
            # Each task made its chunks durable; the marker vouches for the whole band.
            write_marker(layout.marker(plan.blended_id(band)), {"band": band})
    return cube_tmp


def _solve_scene(
    client: Any, plan: RunPlan, progress: _Progress, unstaged: set[str], cube_tmp: Path
) -> None:
    """Phases 2-3 in scene scope: each band solved as one matrix (:mod:`pipeline.solve.scene_scope`), one
    band after the other; a band whose marker exists is skipped (resume is per band)."""
    from pipeline.solve.scene_scope import BandJob, solve_band

    layout, tiles, counts = plan.layout, plan.tiles, progress.counts
    names = layout.marker_ids()
    failed: dict[str, BaseException] = {}
    for b, band in enumerate(plan.bands):
        band_id = plan.blended_id(band)
        if band_id in names:
            counts["solve_skipped"] += len(tiles)
            continue
        if unstaged:
            continue  # a band needs every tile; the stage listed those it could not stage
        job = BandJob(
            grid=tiles,
            band_index=b,
            band=band,
            band_id=band_id,
            tile_ids=plan.solve_ids[band],
            n_dates=len(plan.acquisitions),
            layout=layout,
            cube=str(cube_tmp),
            solver=plan.config.solver,
        )
        try:
            solve_band(client, job)
        except Exception as exc:
            log.error("solve %s failed: %s", band_id, exc)
            failed[band_id] = exc
            if isinstance(exc, InputError | ConfigError | OutputError):
                break  # the user's to fix: the other bands would fail the same way
            continue
        counts["solved"] += len(tiles)
    progress.check("solve", failed)


def _mask_and_products(
    client: Any, plan: RunPlan, progress: _Progress, cube_tmp: Path, products: _ProductPlan
) -> None:
    """Phases 3b-4 in scene scope, after every band is solved: the mask tasks and the products
    behind them (:func:`_mask_tasks`) in one batch."""
    _run_batch(client, plan, progress, _mask_tasks(plan, cube_tmp, products, after=()), "mask")


def _run_batch(
    client: Any, plan: RunPlan, progress: _Progress, jobs: list[Task], stage: str
) -> dict[str, Any]:
    """Run a batch of long tasks (seconds or more each), held by the client until a worker is
    free for them where that is safe (:func:`pipeline.cluster.holds_tasks`); stop on a
    failure the user must fix and list the others by each task's stage. Returns the results
    of the tasks that succeeded."""
    stages = {t.key: t.stage or stage for t in jobs}
    done, failed = run_tasks(
        client,
        jobs,
        stage=stage,
        clock=progress.clock,
        hold=holds_tasks(plan.config.cluster),
    )
    for name in dict.fromkeys(stages.values()):
        progress.check(name, {k: exc for k, exc in failed.items() if stages[k] == name})
    return done


def _mask_tasks(
    plan: RunPlan, cube_tmp: Path, products: _ProductPlan, *, after: tuple[str, ...]
) -> list[Task]:
    """The mask layer of the cube, and with ``output.keep_clear`` the observations kept where
    the mask says clear and the provenance (:mod:`pipeline.outputs.mask_layer`; otherwise the bands' COG
    tasks write the provenance; one task per tile row, all bands, each band's σ from
    its tiles' records in the markers), each after the tasks ``after``; then the products not
    written yet: the mask COGs and the quicklooks (and with ``output.keep_clear`` the bands'
    COGs) as soon as every mask task is done."""
    from pipeline.outputs.mask_layer import MaskJob, mask_row

    config, tiles = plan.config, plan.tiles
    layers = components(config.solver.method, config.solver.refines)
    records = tuple(str(p) for p in _record_markers(plan))
    jobs = [
        Task(
            job.task_id,
            mask_row,
            (job,),
            after=after,
            stage="mask",
            weight=tiles.n_cols,
            priority=MASK_PRIORITY,
        )
        for job in (
            MaskJob(
                tiles=tuple(tiles.tile(r, c) for c in range(tiles.n_cols)),
                task_id=f"mask-r{r:02d}",
                height=plan.grid.height,
                width=plan.grid.width,
                input_store=str(plan.layout.input_store),
                cube=str(cube_tmp),
                layers=layers,
                bands=tuple(plan.bands),
                records=records,
                rule=config.mask.rule(),
                keep_clear=config.output.keep_clear,
                preview=products.preview,
                haze=haze_observed(config.solver.method, config.solver.refines),
            )
            for r in range(tiles.n_rows)
        )
    ]
    return jobs + products.after_masks(cube_tmp, tuple(t.key for t in jobs))


def _record_markers(plan: RunPlan) -> list[Path]:
    """The markers holding the diagnostics of every (band, tile): the row markers, or in scene
    scope the band markers."""
    layout, bands = plan.layout, plan.bands
    if plan.config.solver.scope == "scene":
        return [layout.marker(plan.blended_id(b)) for b in bands]
    return [layout.marker(rid) for b in bands for rid in plan.row_ids[b].values()]


def _publish(plan: RunPlan, cube_tmp: Path, finals: list[Path]) -> tuple[str, ...]:
    """Phase 5: move every product into place; returns the published COGs and quicklooks.

    All products exist in full under temporary names. COMPLETE.json goes first and comes back
    last, so while it exists the published set is one run's, whole.
    """
    layout = plan.layout
    remove_published(layout)
    publish_dir(cube_tmp, layout.cube)
    publish_dir(layout.partial(layout.cog_dir), layout.cog_dir)
    if plan.config.output.quicklooks:
        publish_dir(layout.partial(layout.quicklook_dir), layout.quicklook_dir)
    elif layout.quicklook_dir.exists():
        # Quicklooks of an earlier run would show images this run did not produce.
        shutil.rmtree(layout.quicklook_dir)
    publish_dir(layout.partial(layout.diagnostics_csv), layout.diagnostics_csv)
    products = sorted(str(p) for p in finals)
    write_json(
        layout.complete,
        {
            "completed": datetime.now().astimezone().isoformat(timespec="seconds"),
            "code_version": plan.version,
            "acquisitions": [a.id for a in plan.acquisitions],
            "tiles": len(plan.tiles),
            "bands": list(plan.bands),
            "products": [str(Path(p).relative_to(layout.root)) for p in products],
        },
    )
    return tuple(products)


def _open_cube(plan: RunPlan) -> Path:
    """The cube under construction (``cube.zarr.partial``), with its blended bands kept.

    A partial cube of the same plan (:attr:`RunPlan.cube_token`) is resumed. So is the published
    cube of an earlier complete run of the same plan: it is moved back under the temporary name
    (``COMPLETE.json`` goes first), its bands stay blended and only the products are rebuilt.
    Anything else is replaced by an empty cube. The markers of row, seam and blended-band
    tasks vouch for data in the cube, so they are dropped with it, and the strips with them.
    """
    layout = plan.layout
    cube_tmp = layout.cube_partial
    token = plan.cube_token
    if store_token(cube_tmp, CUBE_TOKEN_ATTR) == token:
        return cube_tmp
    if store_token(layout.cube, CUBE_TOKEN_ATTR) == token:
        remove_published(layout)
        shutil.rmtree(cube_tmp, ignore_errors=True)
        os.replace(layout.cube, cube_tmp)
        return cube_tmp
    for marker in layout.markers():
        if _writes_cube(marker.stem):
            marker.unlink()
    shutil.rmtree(layout.strips, ignore_errors=True)
    acqs, tiles = plan.acquisitions, plan.tiles
    create_store(
        cube_tmp,
        plan.grid,
        times=[a.time for a in acqs],
        bands=plan.bands,
        variables=components(plan.config.solver.method, plan.config.solver.refines),
        codes=(PROVENANCE,),
        date_codes=(MASK,),
        tile_size=tiles.tile_size,
        chunk_rows=tiles.cube_chunk_rows,
        attrs={
            CUBE_TOKEN_ATTR: token,
            "acquisitions": [a.id for a in acqs],
            "code_version": plan.version,
            "solver": plan.config.solver.model_dump(mode="json"),
            "mask": plan.config.mask.model_dump(mode="json"),
            "keep_clear": plan.config.output.keep_clear,
            "tiling": {"tile_size": tiles.tile_size, "overlap": tiles.overlap},
            **_value_attrs(acqs),
        },
    )
    return cube_tmp


def _value_attrs(acqs: Sequence[Any]) -> dict[str, Any]:
    """What the cube's values mean: physical quantity = value × physical_scale[band]."""
    calibration, units, physical = value_meaning(acqs)
    return {"calibration": calibration, "units": units, "physical_scale": list(physical)}


def _writes_cube(marker_id: str) -> bool:
    """Whether the marker is a row's, a seam's or a blended band's (not a staging marker)."""
    return not marker_id.startswith(f"{ALL_BANDS}-")


def _band_tasks(
    plan: RunPlan,
    b: int,
    band: str,
    cube: Path,
    unstaged: set[str],
    threads: int,
    names: set[str],
) -> tuple[list[Task], int, bool]:
    """The row and seam tasks of one band still to do, given the ids of the existing markers.

    Returns the tasks, how many tiles are skipped as done (their row's marker exists) and
    whether the band can be completed by them (False when a row waits for tiles that could not
    be staged: that row and its seams wait for a rerun).

    A row is done when its marker exists and the strips its undone seams need are there; a
    seam when its marker exists.
    """
    layout, tiles = plan.layout, plan.tiles
    rows, seams = plan.row_ids[band], plan.seam_ids[band]
    undone_seams = {r for r, sid in seams.items() if sid not in names}

    def needed_strips(r: int) -> list[Path]:
        top, bottom = (layout.strip(s) for s in strip_ids(rows[r]))
        return [top] * (r in undone_seams) + [bottom] * (r + 1 in undone_seams)

    jobs: list[Task] = []
    skipped, complete = 0, True
    runnable: set[int] = set()  # rows done or run by this batch
    for r, row_id in rows.items():
        if row_id in names and all(p.exists() for p in needed_strips(r)):
            skipped += tiles.n_cols
            runnable.add(r)
            continue
        if any(plan.stage_ids[r, c] in unstaged for c in range(tiles.n_cols)):
            complete = False
            continue
        tile_ids = tuple(plan.solve_ids[band][r, c] for c in range(tiles.n_cols))
        job = RowJob(
            tiles, r, b, band, row_id, tile_ids, layout, str(cube), plan.config.solver, threads
        )
        jobs.append(Task(row_id, solve_row, (job,), weight=tiles.n_cols, priority=ROW_PRIORITY))
        runnable.add(r)
    for r in sorted(undone_seams):
        if not {r - 1, r} <= runnable:
            continue
        upper, lower = strip_ids(rows[r - 1])[1], strip_ids(rows[r])[0]
        seam = SeamJob(
            tiles, r, b, seams[r], layout.strip(upper), layout.strip(lower), layout, str(cube)
        )
        after = (rows[r - 1], rows[r])
        jobs.append(
            Task(
                seams[r],
                blend_seam,
                (seam,),
                after=after,
                stage="blend",
                weight=0,
                priority=SEAM_PRIORITY,
            )
        )
    return jobs, skipped, complete


class _ProductPlan:
    """The product tasks of a run and where they write: COGs, quicklooks and the diagnostics,
    under temporary names next to their final ones (:attr:`finals`), published at the end.

    Leftovers of an interrupted earlier run are removed when the plan is made, before any
    product task of this run can write.
    """

    def __init__(self, plan: RunPlan) -> None:
        layout = plan.layout
        self.plan = plan
        self.preview = _preview_spec(plan)  # what the mask and COG tasks keep for quicklooks
        self.cog_tmp = layout.partial(layout.cog_dir)
        self.looks_tmp = layout.partial(layout.quicklook_dir)
        for leftover in (self.cog_tmp, self.looks_tmp):
            shutil.rmtree(leftover, ignore_errors=True)

    @property
    def cogs_with_solve(self) -> bool:
        """Whether the bands' COGs are tasks of the solve batch: in tile scope, unless the mask
        pass changes ``clear`` (``output.keep_clear``)."""
        config = self.plan.config
        return config.solver.scope == "tile" and not config.output.keep_clear

    @property
    def finals(self) -> list[Path]:
        """The final paths of the COGs and quicklooks."""
        layout = self.plan.layout
        cogs = [n for band in (*self.plan.bands, "mask") for n in self._cog_names(band)]
        looks = self._quicklook_names() if self.preview else []
        return [layout.cog_dir / n for n in cogs] + [layout.quicklook_dir / n for n in looks]

    def _cog_names(self, layer: str) -> list[str]:
        """The COG file names of a band (or of ``"mask"``), one per date in time order."""
        return [f"{label}_{layer}.tif" for label in self.plan.time_labels]

    def _quicklook_names(self) -> list[str]:
        return [f"{label}.png" for label in self.plan.time_labels]

    def band_cogs(self, cube: Path, after: dict[str, tuple[str, ...]]) -> list[Task]:
        """The COG tasks of the bands in ``after`` (band → keys of the tasks to wait for)."""
        plan = self.plan
        calibration, units, physical = value_meaning(plan.acquisitions)
        # Reflectance is stored as ρ·10000 in uint16 COGs (the Landsat/Sentinel-2 convention);
        # DN and radiance fractions as value·max_dn, the input's own resolution.
        if calibration == "reflectance":
            max_dn = 10000.0
        else:
            max_dn = max(float(a.max_dn) for a in plan.acquisitions)
        tasks: list[Task] = []
        for b, band in enumerate(plan.bands):
            if band not in after:
                continue
            kwargs = {
                "band_index": b,
                "grid": plan.grid,
                "dtype": plan.config.output.cog_dtype,
                "max_dn": max_dn,
                "block": plan.tiles.tile_size,
                "calibration": calibration,
                "units": units,
                "physical_scale": physical[b],
                # From the clear values the task reads anyway: the band's provenance unless
                # the mask pass writes it (keep_clear), and the quicklooks' clear samples.
                "tiles": plan.tiles,
                "provenance": not plan.config.output.keep_clear,
                "preview": self.preview,
            }
            args = (cube, [self.cog_tmp / n for n in self._cog_names(band)])
            tasks.append(
                Task(
                    _band_cog_key(band),
                    write_cogs,
                    args,
                    kwargs,
                    after=after[band],
                    stage="products",
                    weight=0,  # the progress bar counts tiles
                    priority=BAND_COG_PRIORITY,
                )
            )
        return tasks

    def after_masks(self, cube: Path, masks: tuple[str, ...]) -> list[Task]:
        """The product tasks of the mask batch, each waiting for the ``masks`` tasks if it
        reads what they write: the bands' COGs unless the solve batch wrote them (with
        ``output.keep_clear`` they wait), the mask COGs and the quicklooks (from the samples the
        stage, mask and COG tasks keep, :mod:`pipeline.store.previews`: they wait for the COGs of the
        quicklook bands too, in this batch or the solve batch they share in tile scope)."""
        plan = self.plan
        tasks = []
        if not self.cogs_with_solve:
            waits = masks if plan.config.output.keep_clear else ()
            tasks += self.band_cogs(cube, dict.fromkeys(plan.bands, waits))
        mask_cogs = (cube, [self.cog_tmp / n for n in self._cog_names("mask")])
        tasks.append(
            Task(
                "cog-mask",
                write_mask_cogs,
                mask_cogs,
                {"grid": plan.grid, "block": plan.tiles.tile_size},
                after=masks,
                stage="products",
                priority=MASK_PRIORITY,
            )
        )
        spec = self.preview
        if spec is not None:
            # A task per date: the last tasks of a run are short, so both workers finish
            # together (the dates' images are independent, each stretched on its own).
            names = self._quicklook_names()
            size = {"height": plan.grid.height, "width": plan.grid.width}
            tasks += [
                Task(
                    f"quicklook-{plan.time_labels[i]}",
                    write_quicklooks,
                    (spec, list(plan.tiles), [self.looks_tmp / name]),
                    {**size, "dates": (i,)},
                    after=masks + tuple(_band_cog_key(plan.bands[b]) for b in spec.bands),
                    stage="products",
                    priority=MASK_PRIORITY,
                )
                for i, name in enumerate(names)
            ]
        return tasks

    def diagnostics(self, records: list[dict[str, Any]], cube: Path) -> None:
        """Report what the tiles' ``records`` say (dates left out, empty tiles) and write the
        diagnostics table into the cube and as CSV."""
        layout = self.plan.layout
        _report_dates_left_out(records, self.plan.time_labels)
        write_diagnostics(records, layout.partial(layout.diagnostics_csv), cube)
        _report_empty_tiles(records)


def _band_cog_key(band: str) -> str:
    """The key of the task writing ``band``'s COGs (:meth:`_ProductPlan.band_cogs`)."""
    return f"cog-{band}"


#: Longest side of a quicklook panel, in pixels.
QUICKLOOK_SIZE = 1024


def _preview_spec(plan: RunPlan) -> PreviewSpec | None:
    """What the mask and COG tasks keep for the quicklooks (None: no quicklooks)."""
    return _samples_spec(plan) if plan.config.output.quicklooks else None


def _samples_spec(plan: RunPlan) -> PreviewSpec:
    """The quicklooks' samples, whether or not this run writes quicklooks (staging keeps the
    observations' samples always: a later run may ask for quicklooks, and it stages nothing)."""
    step = preview_step(plan.grid.height, plan.grid.width, QUICKLOOK_SIZE)
    return PreviewSpec(tuple(_quicklook_bands(plan.bands)), step, str(plan.layout.previews))


def _report_empty_tiles(records: list[dict[str, Any]]) -> None:
    """Warn once per tile with no valid data on any date: its output is NaN (COG nodata)."""
    empty = sorted({f"r{r['row']:02d}c{r['col']:02d}" for r in records if r.get("empty")})
    if empty:
        log.warning(
            "%d tile(s) have no valid data on any date (%s): their output is NaN, nodata in "
            "the COGs; narrow grid.bounds to the inputs' footprint to avoid them",
            len(empty),
            ", ".join(empty),
        )


def _report_dates_left_out(records: list[dict[str, Any]], labels: Sequence[str]) -> None:
    """Name the dates left out of each tile (too little of them observed: NaN there) in its
    record, indices into the series → their ``;``-joined time labels for diagnostics.csv, and
    warn once per such date with the tiles concerned."""
    tiles: dict[str, set[str]] = {}
    for r in records:
        days = [labels[t] for t in r.get("dates_left_out", ())]
        r["dates_left_out"] = ";".join(days)
        for day in days:
            tiles.setdefault(day, set()).add(f"r{r['row']:02d}c{r['col']:02d}")
    for day, names in sorted(tiles.items()):
        log.warning(
            "date %s observes too little of %d tile(s) (%s) to be filled there: left out of "
            "their matrices, its output there is NaN (diagnostics.csv, dates_left_out)",
            day,
            len(names),
            ", ".join(sorted(names)),
        )
