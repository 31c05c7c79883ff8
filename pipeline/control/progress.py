"""What a run has done so far: counts, failures, wall seconds per phase, the run record; and the
one way a phase runs a batch of tasks and accounts for them."""

from __future__ import annotations

import logging
import time
from typing import Any

from pipeline.cluster import Task, TaskClock, holds_tasks, run_tasks
from pipeline.control.status import (
    RunSummary,
    TileFailure,
    finish_run_record,
    write_run_record,
)
from pipeline.errors import ConfigError, InputError, PipelineError
from pipeline.plan import RunPlan
from pipeline.store.durable import OutputError

__all__ = ["Progress", "user_error"]

log = logging.getLogger(__name__)

#: The counters of a run's summary (:class:`~pipeline.control.status.RunSummary`).
COUNTS = ("staged", "stage_skipped", "solved", "solve_skipped", "blended")


def user_error(stage: str, failed: dict[str, BaseException]) -> PipelineError | None:
    """The first failure the user must fix (bad input, unwritable output), as one error.

    Such a failure would fail again on every rerun, so it ends the run with exit code 2 and
    one line instead of being listed as a tile to retry.

    Parameters
    ----------
    stage
        The stage the failures happened in (named in the message when there are several).
    failed
        Task key → the exception it raised.

    Returns
    -------
    PipelineError or None
        The first fixable failure, of its own type, or None when every failure is a tile's.
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


class Progress:
    """What a run has done so far, and its run record (``work/run.json``, for ``status``).

    Parameters
    ----------
    plan
        The run's plan.
    started
        ``time.perf_counter()`` when the run started.
    units
        Progress unit (marker id) → the tiles it covers, as the solve scope counts them
        (:meth:`pipeline.solve.scopes.SolveScope.progress_units`).
    """

    def __init__(self, plan: RunPlan, started: float, units: dict[str, int]) -> None:
        self.plan, self.started = plan, started
        # Whether the client may hold ready tasks until a worker is free (the clusters this
        # package starts, whose size is fixed: pipeline.cluster.holds_tasks).
        self.hold = holds_tasks(plan.config.cluster)
        self.record = write_run_record(plan, units)
        self.failures: list[TileFailure] = []
        self.counts = dict.fromkeys(COUNTS, 0)
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
        error = user_error(stage, failed)
        if error is not None:
            finish_run_record(self.plan.layout, self.record, "failed")
            raise error
        self.failures.extend(
            TileFailure(stage, key, str(exc).splitlines()[0]) for key, exc in sorted(failed.items())
        )

    def run_batch(
        self, client: Any, jobs: list[Task], stage: str, *, held: bool = True
    ) -> dict[str, Any]:
        """Run a batch of tasks and account for them: stop on a failure the user must fix, list
        the others by each task's own stage (``stage`` for those that name none).

        Parameters
        ----------
        client
            The Dask client.
        jobs
            The batch.
        stage
            The stage name of the tasks that name none.
        held
            Let the client hold ready tasks until a worker is free, where that is safe
            (:attr:`hold`): for batches of long tasks (seconds or more each)
            with priorities to honour.

        Returns
        -------
        dict
            Task key → result, for the tasks that succeeded.
        """
        stages = {t.key: t.stage or stage for t in jobs}
        hold = self.hold and held
        done, failed = run_tasks(client, jobs, stage=stage, clock=self.clock, hold=hold)
        for name in dict.fromkeys(stages.values()):
            self.check(name, {k: exc for k, exc in failed.items() if stages[k] == name})
        return done

    def finish(self, outcome: str, products: tuple[str, ...] = ()) -> RunSummary:
        """Record the outcome (``complete`` or ``failed``) and sum the run up."""
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
