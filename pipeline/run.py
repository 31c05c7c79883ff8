"""One pipeline run: inputs → target grid → stage → solve + blend → outputs, on a Dask cluster.

This module is the phase loop; each stage builds its own tasks beside the code they run
(:func:`pipeline.stage.staging.stage_tasks`, the solve scope of
:mod:`pipeline.solve.scopes`, :class:`pipeline.outputs.tasks.ProductTasks`). Tasks are keyed
by deterministic ids (:mod:`pipeline.plan`). Work whose completion marker exists is skipped, so
a rerun resumes where a previous one stopped, even after a ``kill -9``: markers are written only
once the data is durable (:mod:`pipeline.store.durable`). A task that raises is retried
(:data:`pipeline.cluster.RETRIES`), and one that keeps failing is reported at the end while the
others still finish. Problems the user must fix (bad input, a full or read-only output disk)
stop the run with a :class:`~pipeline.errors.PipelineError` instead, once the stage's other
tiles are done. Nothing is published unless every tile and product succeeded.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from pipeline.cluster import connect
from pipeline.config import Config
from pipeline.control.folders import check_space, check_writable, remove_if_empty
from pipeline.control.progress import Progress
from pipeline.control.publish import publish
from pipeline.control.status import RunSummary, TileFailure
from pipeline.outputs.tasks import ProductTasks
from pipeline.plan import RunPlan, make_plan
from pipeline.solve.cube import open_cube
from pipeline.solve.scopes import SolveContext, SolveScope, scope_for
from pipeline.solve.warmup import KernelWarmup
from pipeline.stage.staging import clear_work, stage_tasks
from pipeline.store.durable import output_errors
from pipeline.store.layout import Layout

__all__ = ["RunSummary", "TileFailure", "run"]

log = logging.getLogger(__name__)


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
    created = check_writable(layout)
    if overwrite:
        clear_work(layout)
    try:
        # A disk that fills up while the client itself writes (templates, markers, products).
        with output_errors(layout.root):
            return _run(config, layout, started)
    except BaseException:
        remove_if_empty(created)  # stopped (bad input, no cluster): no empty directory left
        raise


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
    check_space(plan)
    scope = scope_for(config.solver)
    progress = Progress(plan, started, scope.progress_units(plan))
    outputs = ProductTasks(plan, scope.record_markers(plan))
    with connect(config.cluster) as client:
        # Workers load the solver's kernels while they stage (pipeline.solve.warmup).
        client.register_plugin(KernelWarmup(config.solver))
        progress.lap("setup")
        unstaged = _stage(client, plan, progress)
        progress.lap("stage")
        cube, outputs_ran = _solve(client, plan, progress, scope, unstaged, outputs)
        progress.lap("solve")
        if progress.failures:
            # A cube with holes must never look like a result: keep it under its temporary name,
            # publish nothing, and let a rerun (which retries only the failed tiles) finish it.
            return progress.finish("failed")
        outputs.diagnostics(cube)
        if not outputs_ran:
            progress.run_batch(client, outputs.after_solve(cube), "mask")
        progress.lap("mask+products")
        if progress.failures:
            return progress.finish("failed")
    published = publish(plan, cube, outputs.finals)
    progress.lap("publish")
    return progress.finish("complete", published)


def _stage(client: Any, plan: RunPlan, progress: Progress) -> set[str]:
    """Phase 1: warp every date of each tile not yet staged into ``work/input.zarr``.

    Returns the keys of the tiles that could not be staged.
    """
    tasks, skipped = stage_tasks(plan)
    # Not held: the stage tasks are many and short, and all alike (no priorities to honour).
    staged = progress.run_batch(client, tasks, "stage", held=False)
    progress.counts.update(staged=len(staged), stage_skipped=skipped)
    return {t.key for t in tasks} - set(staged)  # stage tasks wait for none: these failed


def _solve(
    client: Any,
    plan: RunPlan,
    progress: Progress,
    scope: SolveScope,
    unstaged: set[str],
    outputs: ProductTasks,
) -> tuple[Path, bool]:
    """Phases 2-3 (and in tile scope 4): solve every band into the cube under construction.

    Returns the cube and whether the outputs ran with the solve (the scope decides).
    """
    cube = open_cube(plan)
    ctx = SolveContext(client, plan, cube, unstaged, progress)
    joined = scope.solve(ctx, lambda after, solving: outputs.with_solve(cube, after, solving))
    return cube, joined
