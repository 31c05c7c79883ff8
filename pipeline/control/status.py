"""How far a run got and what it did: the run record, ``python -m pipeline status``, and the
summary a run returns.

``status`` needs no inputs: ``run`` records its ids in ``work/run.json`` when it starts, and
progress is the markers that exist among them.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.store.durable import read_json, write_json
from pipeline.store.layout import Layout

if TYPE_CHECKING:
    from pipeline.plan import RunPlan

__all__ = [
    "RunSummary",
    "TileFailure",
    "describe_status",
    "finish_run_record",
    "write_run_record",
]

log = logging.getLogger(__name__)


def write_run_record(plan: RunPlan, units: dict[str, int]) -> dict[str, Any]:
    """Record the ids of the run that starts now in ``work/run.json`` (for ``status``).

    Parameters
    ----------
    plan
        The run's plan.
    units
        The markers by which the solve's progress is counted, each with the tiles it covers (a
        tile row's in tile scope, a band's in scene scope:
        :meth:`pipeline.solve.scopes.SolveScope.progress_units`).
    """
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
        "stage_ids": sorted(plan.stage_ids.values()),
        "row_tiles": units,
        "outcome": None,
    }
    write_json(plan.layout.run_record, record)
    return record


def finish_run_record(layout: Layout, record: dict[str, Any], outcome: str) -> None:
    """Mark the recorded run as finished with ``outcome`` (``complete`` or ``failed``)."""
    finished = datetime.now().astimezone().isoformat(timespec="seconds")
    write_json(layout.run_record, {**record, "outcome": outcome, "finished": finished})


def _alive(pid: int, host: str) -> bool:
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def describe_status(layout: Layout) -> str:
    """Progress of the run recorded under ``layout`` (running or stopped) and what is published.

    Reads only ``work/run.json``, the markers and the names of the published products, so it
    is cheap and safe while a run is writing.
    """
    lines = [f"output: {layout.root}"]
    record = read_json(layout.run_record)
    if record is None:
        lines.append("run: none recorded (no work/run.json); start one with `run`")
    else:
        outcome = record.get("outcome")
        if outcome:
            state = f"{outcome} (finished {record.get('finished', '?')})"
        elif _alive(int(record.get("pid", -1)), str(record.get("host", ""))):
            state = f"running (pid {record['pid']} on {record['host']})"
        else:
            state = "stopped before finishing (interrupted); rerun `run` to resume"
        lines.append(f"run: {state}; started {record.get('started', '?')}")
        names = layout.marker_ids()
        stage_ids = record.get("stage_ids", [])
        lines.append(f"stage: {sum(t in names for t in stage_ids)}/{len(stage_ids)} tiles done")
        rows = record.get("row_tiles", {})
        solved = sum(n for rid, n in rows.items() if rid in names)
        lines.append(f"solve: {solved}/{sum(rows.values())} tiles done")
        if layout.cube_partial.exists():
            lines.append("blend: cube.zarr.partial exists (being built, or left by a stop)")
    cogs = len(list(layout.cog_dir.glob("*.tif"))) if layout.cog_dir.is_dir() else 0
    looks = len(list(layout.quicklook_dir.glob("*.png"))) if layout.quicklook_dir.is_dir() else 0
    lines.append(
        f"published: cube.zarr {'yes' if layout.cube.exists() else 'no'}, {cogs} COGs, "
        f"{looks} quicklooks, diagnostics.csv {'yes' if layout.diagnostics_csv.exists() else 'no'}"
    )
    if layout.complete.exists():
        done_at = (read_json(layout.complete) or {}).get("completed", "?")
        lines.append(f"complete: yes (COMPLETE.json, {done_at})")
    else:
        lines.append("complete: no (no COMPLETE.json: do not use partial products)")
    return "\n".join(lines)


@dataclass(frozen=True)
class TileFailure:
    """A tile (or product) that failed in one stage."""

    stage: str
    key: str
    message: str


@dataclass(frozen=True)
class RunSummary:
    """What a run did; ``ok`` is False when any tile failed."""

    output: Path
    tiles: int
    bands: int
    staged: int
    stage_skipped: int
    solved: int
    solve_skipped: int
    blended: int  # seams (borders between tile rows) blended
    seconds: float
    failures: tuple[TileFailure, ...] = ()
    products: tuple[str, ...] = field(default=())
    phase_seconds: tuple[tuple[str, float], ...] = ()  # (phase, wall seconds), in run order
    #: (stage, seconds, CPU seconds, of those in the kernel) inside its tasks, summed over the
    #: workers, in run order
    task_seconds: tuple[tuple[str, float, float, float], ...] = ()
    #: Seconds each worker spent in tasks, most first, and the seconds from the first task's
    #: start to the last one's end: how well the tasks kept the workers busy.
    worker_busy: tuple[float, ...] = ()
    task_span: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def packing(self) -> str:
        """How well the tasks kept the workers busy: each worker's seconds in tasks against the
        span from the first task's start to the last one's end, and the span the same tasks
        would take perfectly packed (their seconds over the workers), the most a better
        schedule could gain. Scene scope's band solves run in actors, not tasks: not counted."""
        packed = sum(self.worker_busy) / max(len(self.worker_busy), 1)
        return (
            "workers busy in tasks "
            + ", ".join(f"{b:.1f}" for b in self.worker_busy)
            + f" s of the {self.task_span:.1f} s from the first task's start to the last end; "
            f"perfectly packed {packed:.1f} s"
        )

    def describe(self) -> str:
        """A short human-readable account for the terminal."""
        lines = [
            f"output: {self.output}",
            f"tiles: {self.tiles} x {self.bands} bands; staged {self.staged} "
            f"(skipped {self.stage_skipped}), solved {self.solved} (skipped {self.solve_skipped}), "
            f"seams blended {self.blended}; {self.seconds:.1f} s",
        ]
        if self.phase_seconds:
            lines.append("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.phase_seconds))
        if self.task_seconds:
            lines.append(
                "in tasks (all workers; CPU s, of which in the kernel): "
                + ", ".join(
                    f"{k} {s:.1f} s ({c:.1f}, {sys_:.1f})" for k, s, c, sys_ in self.task_seconds
                )
            )
        if self.worker_busy:
            lines.append(self.packing())
        lines += [f"FAILED {f.stage} {f.key}: {f.message}" for f in self.failures]
        if self.failures:
            lines.append("nothing was published; rerun the same command to retry the failed tiles")
        return "\n".join(lines)
