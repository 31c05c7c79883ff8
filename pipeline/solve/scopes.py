"""The two solve scopes a run can take (``solver.scope``), as objects the run asks for its
solve phase, its markers and its progress units, instead of branching on the setting.

- :class:`TileScope` (``tile``, the default): one task per (band, tile row) solves the row's
  tile halos and blends them (:mod:`pipeline.solve.rows`), one task per border between tile
  rows blends the seam; the outputs join the same batch.
- :class:`SceneScope` (``scene``): each band solved as one matrix by one Dask actor per worker
  holding its tiles (:mod:`pipeline.solve.scene_scope`), a band after the other; the outputs
  follow in a batch of their own.

:func:`scope_for` picks one; a new scope is a class here with the same methods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.cluster import Task, solver_threads
from pipeline.config import SolverConfig
from pipeline.errors import ConfigError, InputError
from pipeline.plan import ROW_PRIORITY, SEAM_PRIORITY, RunPlan
from pipeline.solve.rows import RowJob, SeamJob, blend_seam, solve_row, strip_ids
from pipeline.store.durable import OutputError, write_marker

__all__ = ["Accounting", "SceneScope", "SolveContext", "SolveScope", "TileScope", "scope_for"]

log = logging.getLogger(__name__)

#: Given the bands' COG dependencies (band → the keys of the solve tasks they wait for) and,
#: when the batch completes every band, the keys of all its solve tasks (else None): the output
#: tasks that join the solve batch (:meth:`pipeline.outputs.tasks.ProductTasks.with_solve`).
JoinOutputs = Callable[[dict[str, tuple[str, ...]], "tuple[str, ...] | None"], list[Task]]


class Accounting(Protocol):
    """How a scope runs its work and accounts for it: the run's progress
    (:class:`pipeline.control.progress.Progress`)."""

    counts: dict[str, int]  # the run's counters (``solved``, ``solve_skipped``, ``blended``)
    failures: list[Any]  # the failed tiles listed so far

    def run_batch(
        self, client: Any, jobs: list[Task], stage: str, *, held: bool = True
    ) -> dict[str, Any]:
        """Run a batch of tasks; the results of those that succeeded."""
        ...

    def check(self, stage: str, failed: dict[str, BaseException]) -> None:
        """Stop on a failure the user must fix; list the others."""
        ...


@dataclass
class SolveContext:
    """What a scope's solve phase works with.

    Attributes
    ----------
    client
        The Dask client.
    plan
        The run's plan.
    cube
        The cube under construction (:func:`pipeline.solve.cube.open_cube`).
    unstaged
        The keys of the tiles the stage phase could not stage.
    progress
        Runs the batches and keeps the counts and failures.
    """

    client: Any
    plan: RunPlan
    cube: Path
    unstaged: set[str]
    progress: Accounting


class SolveScope(Protocol):
    """What the run asks of a solve scope."""

    def progress_units(self, plan: RunPlan) -> dict[str, int]:
        """The markers that count the solve's progress, each with the tiles it covers."""
        ...

    def record_markers(self, plan: RunPlan) -> list[Path]:
        """The markers holding the diagnostics of every (band, tile)."""
        ...

    def solve(self, ctx: SolveContext, join_outputs: JoinOutputs) -> bool:
        """Solve every band into ``ctx.cube``; returns whether the outputs ran in its batch
        (asked for through ``join_outputs``)."""
        ...


class TileScope:
    """Tile scope: each tile's halo solved as its own matrix, the halos feather-blended."""

    def progress_units(self, plan: RunPlan) -> dict[str, int]:
        """Tiles are done a row at a time: each row id with its number of tiles."""
        n = plan.tiles.n_cols
        return {rid: n for ids in plan.row_ids.values() for rid in ids.values()}

    def record_markers(self, plan: RunPlan) -> list[Path]:
        """The row markers (each holds its tiles' records)."""
        return [plan.layout.marker(rid) for b in plan.bands for rid in plan.row_ids[b].values()]

    def solve(self, ctx: SolveContext, join_outputs: JoinOutputs) -> bool:
        """Solve and blend every band in one batch; the outputs join it.

        A band's row tasks go in row order, each seam as soon as its two rows are done (seams
        first among ready tasks, which frees their strips), so no worker idles at a band's end
        and the scratch disk holds only the strips of rows whose neighbour is not done yet.
        The outputs ``join_outputs`` returns come behind them; the mask pass only when every
        band is done or completed by this batch (not when tiles could not be staged: the run
        then fails and a rerun finishes it).

        Returns
        -------
        bool
            Whether the mask pass and the products behind it were in the batch.
        """
        plan, counts = ctx.plan, ctx.progress.counts
        threads = solver_threads(plan.config.cluster)
        jobs: list[Task] = []
        band_work: dict[str, list[str]] = {}  # band → keys of its tasks in this batch
        cogs_after: dict[str, tuple[str, ...]] = {}  # band → the tasks its COGs wait for
        names = plan.layout.marker_ids()  # one listing of work/done/ for every band
        every_band_complete = True  # each band done already, or completed by this batch
        for b, band in enumerate(plan.bands):
            if plan.blended_id(band) in names:
                counts["solve_skipped"] += len(plan.tiles)
                cogs_after[band] = ()
                continue
            band_jobs, skipped, complete = _band_tasks(ctx, b, band, threads, names)
            counts["solve_skipped"] += skipped
            jobs += band_jobs
            if complete:  # every row and seam of the band is (or will be) run
                band_work[band] = [t.key for t in band_jobs]
                cogs_after[band] = tuple(band_work[band])
            every_band_complete &= complete
        with_outputs = every_band_complete and not ctx.progress.failures
        solving = tuple(key for keys in band_work.values() for key in keys)
        jobs += join_outputs(cogs_after, solving if with_outputs else None)
        stages = {t.key: t.stage or "solve" for t in jobs}
        done = ctx.progress.run_batch(ctx.client, jobs, "solve")
        counts["solved"] = sum(len(r["tiles"]) for k, r in done.items() if stages[k] == "solve")
        counts["blended"] = sum(stages[k] == "blend" for k in done)
        for band, keys in band_work.items():
            if all(key in done for key in keys):
                # Each task made its chunks durable; the marker vouches for the whole band.
                write_marker(plan.layout.marker(plan.blended_id(band)), {"band": band})
        return with_outputs


def _band_tasks(
    ctx: SolveContext, b: int, band: str, threads: int, names: set[str]
) -> tuple[list[Task], int, bool]:
    """The row and seam tasks of one band still to do, given the ids of the existing markers.

    Returns the tasks, how many tiles are skipped as done (their row's marker exists) and
    whether the band can be completed by them (False when a row waits for tiles that could not
    be staged: that row and its seams wait for a rerun).

    A row is done when its marker exists and the strips its undone seams need are there; a
    seam when its marker exists.
    """
    plan, cube = ctx.plan, str(ctx.cube)
    layout, tiles = plan.layout, plan.tiles
    rows, seams = plan.row_ids[band], plan.seam_ids[band]
    undone_seams = {r for r, sid in seams.items() if sid not in names}
    # The rows write the ground unless the mask pass writes all of it (Config.rows_write_ground).
    solver, ground = plan.config.solver, plan.config.rows_write_ground

    def needed_strips(r: int) -> list[Path]:
        top, bottom = (layout.strip(s) for s in strip_ids(rows[r], ground))
        return [top] * (r in undone_seams) + [bottom] * (r + 1 in undone_seams)

    jobs: list[Task] = []
    skipped, complete = 0, True
    runnable: set[int] = set()  # rows done or run by this batch
    for r, row_id in rows.items():
        if row_id in names and all(p.exists() for p in needed_strips(r)):
            skipped += tiles.n_cols
            runnable.add(r)
            continue
        if any(plan.stage_ids[r, c] in ctx.unstaged for c in range(tiles.n_cols)):
            complete = False
            continue
        tile_ids = tuple(plan.solve_ids[band][r, c] for c in range(tiles.n_cols))
        job = RowJob(tiles, r, b, band, row_id, tile_ids, layout, cube, solver, threads, ground)
        jobs.append(Task(row_id, solve_row, (job,), weight=tiles.n_cols, priority=ROW_PRIORITY))
        runnable.add(r)
    for r in sorted(undone_seams):
        if not {r - 1, r} <= runnable:
            continue
        upper, lower = strip_ids(rows[r - 1], ground)[1], strip_ids(rows[r], ground)[0]
        seam = SeamJob(
            tiles, r, b, seams[r], layout.strip(upper), layout.strip(lower), layout, cube
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


class SceneScope:
    """Scene scope: each band solved as one matrix over the whole scene, never gathered."""

    def progress_units(self, plan: RunPlan) -> dict[str, int]:
        """Bands are done one at a time: each band marker with the scene's number of tiles."""
        return {plan.blended_id(b): len(plan.tiles) for b in plan.bands}

    def record_markers(self, plan: RunPlan) -> list[Path]:
        """The band markers (each holds its tiles' records)."""
        return [plan.layout.marker(plan.blended_id(b)) for b in plan.bands]

    def solve(self, ctx: SolveContext, join_outputs: JoinOutputs) -> bool:
        """Solve each band as one matrix, one band after the other; a band whose marker exists
        is skipped (resume is per band). The outputs do not join: returns False."""
        from pipeline.solve.scene_scope import BandJob, dn_scale, solve_band

        plan, counts = ctx.plan, ctx.progress.counts
        names = plan.layout.marker_ids()
        failed: dict[str, BaseException] = {}
        for b, band in enumerate(plan.bands):
            band_id = plan.blended_id(band)
            if band_id in names:
                counts["solve_skipped"] += len(plan.tiles)
                continue
            if ctx.unstaged:
                continue  # a band needs every tile; the stage listed those it could not stage
            job = BandJob(
                grid=plan.tiles,
                band_index=b,
                band=band,
                band_id=band_id,
                tile_ids=plan.solve_ids[band],
                n_dates=len(plan.acquisitions),
                layout=plan.layout,
                cube=str(ctx.cube),
                solver=plan.config.solver,
                max_dn=dn_scale(plan.acquisitions),
                ground=plan.config.rows_write_ground,
            )
            try:
                solve_band(ctx.client, job)
            except Exception as exc:
                log.error("solve %s failed: %s", band_id, exc)
                failed[band_id] = exc
                if isinstance(exc, InputError | ConfigError | OutputError):
                    break  # the user's to fix: the other bands would fail the same way
                continue
            counts["solved"] += len(plan.tiles)
        ctx.progress.check("solve", failed)
        return False


#: The scope object of each ``solver.scope`` value.
SCOPES: dict[str, SolveScope] = {"tile": TileScope(), "scene": SceneScope()}


def scope_for(solver: SolverConfig) -> SolveScope:
    """The solve scope that ``solver.scope`` names.

    Parameters
    ----------
    solver
        The ``solver`` section of the run's configuration.
    """
    return SCOPES[solver.scope]
