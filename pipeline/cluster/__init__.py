"""The Dask cluster: connecting to it and running tasks (:mod:`~pipeline.cluster.client`), the
back-ends that start one (:mod:`~pipeline.cluster.backends`), and the test hooks that make
tasks fail on purpose (:mod:`~pipeline.cluster.faults`)."""

from pipeline.cluster.client import (
    RETRIES,
    Task,
    TaskClock,
    connect,
    holds_tasks,
    run_tasks,
    solver_threads,
)

__all__ = ["RETRIES", "Task", "TaskClock", "connect", "holds_tasks", "run_tasks", "solver_threads"]
