"""The whole experiment on Dask: one task per trial, then the CSV tables and the report.

The results table (``results.csv``, one row per trial × method × λ) and the per-trial table
(``trials.csv``: λ bounds of the simulated D, r of the cloudy input) are written to the output
directory, followed by the markdown tables, figures and t-tests of :func:`write_report`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cloudlab.config import ExperimentConfig
from cloudlab.report import write_report
from cloudlab.trials import RESULT_COLUMNS, run_trial, trials_of
from pipeline.cluster import Task, connect, run_tasks, solver_threads

__all__ = ["ExperimentResult", "run_experiment"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExperimentResult:
    """What :func:`run_experiment` wrote."""

    output: Path
    results_csv: Path
    trials_csv: Path
    trials: int
    rows: int
    failures: dict[str, str]
    seconds: float

    @property
    def ok(self) -> bool:
        """True when every trial task succeeded."""
        return not self.failures


def run_experiment(
    cfg: ExperimentConfig,
    *,
    output: str | Path | None = None,
    client: Any | None = None,
    report: bool = True,
) -> ExperimentResult:
    """Run all trials of ``cfg`` on Dask (one task per trial) and write tables and report.

    A failed trial does not stop the others: it is left out of the tables and named in
    ``failures``.

    Parameters
    ----------
    cfg
        The validated configuration.
    output
        Output directory; default ``cfg.output``.
    client
        A ``distributed.Client`` to use; default: start the cluster of ``cfg.cluster``.
    report
        Also write the markdown tables, figures and t-tests (:func:`write_report`).

    Returns
    -------
    ExperimentResult
        Where the tables are, how many trials and rows they hold, and the failed trials' keys
        with their error messages.
    """
    out = Path(output) if output is not None else cfg.output
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
    trials = trials_of(cfg)
    log.info(
        "experiment %s: %d trials (%d images x %d n x %d repeats) -> %s",
        cfg.name,
        len(trials),
        len(cfg.images),
        len(cfg.ns),
        cfg.repeats,
        out,
    )
    threads = solver_threads(cfg.cluster)
    tasks = [Task(t.key, run_trial, (t, cfg), {"threads": threads}) for t in trials]
    started = time.perf_counter()
    if client is not None:
        results, failures = run_tasks(client, tasks, stage="trial", unit="trials")
    else:
        with connect(cfg.cluster) as own:
            results, failures = run_tasks(own, tasks, stage="trial", unit="trials")
    seconds = time.perf_counter() - started

    # Fixed order (the trial order, then the order run_trial adds rows) so reruns compare equal.
    done = [results[t.key] for t in trials if t.key in results]
    rows = pd.DataFrame([row for res in done for row in res.rows], columns=list(RESULT_COLUMNS))
    infos = pd.DataFrame([res.info for res in done])
    results_csv, trials_csv = out / "results.csv", out / "trials.csv"
    rows.to_csv(results_csv, index=False)
    infos.to_csv(trials_csv, index=False)
    failed = {key: f"{type(exc).__name__}: {exc}" for key, exc in failures.items()}
    if report and done:
        write_report(out, title=cfg.name, wall_seconds=seconds)
    log.info(
        "experiment %s: %d rows from %d trials in %.1f s", cfg.name, len(rows), len(done), seconds
    )
    return ExperimentResult(out, results_csv, trials_csv, len(done), len(rows), failed, seconds)
