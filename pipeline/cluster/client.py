"""The Dask cluster a run uses, and per-stage progress over its futures.

A local cluster runs worker *processes* (the solver holds the GIL in places and numba threads
are per process); an ``address`` connects to a scheduler someone else runs. Worker processes
must see the same file paths as the client (a shared file system on real clusters).

Every task is submitted with :data:`RETRIES` retries: an exception, or the loss of the worker
running it, reschedules it (Dask reruns tasks of a lost worker on the others by itself).

The test hooks of :mod:`pipeline.cluster.faults` run before every task.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from distributed import Client, Future, as_completed, get_worker
from tqdm import tqdm

from pipeline.cluster.faults import inject_faults
from pipeline.cluster.heap import return_free_memory
from pipeline.cluster.usage import CpuUsage
from pipeline.config import ClusterSpec
from pipeline.errors import ConfigError

__all__ = [
    "RETRIES",
    "Task",
    "TaskClock",
    "connect",
    "holds_tasks",
    "run_tasks",
    "solver_threads",
]

log = logging.getLogger(__name__)

#: How long to wait for an existing scheduler before telling the user the address is wrong.
CONNECT_TIMEOUT_S = 10

#: Extra attempts per task: rides out transient I/O errors (a shared file system hiccup, an
#: evicted worker) without rerunning the whole stage; a deterministic failure costs 2 retries.
RETRIES = 2


def _call(
    stage: str, key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> tuple[Any, str, float, float, CpuUsage]:
    """Run one task on a worker, after the test hooks; returns its result, the worker's address,
    when it started (seconds since the epoch), its seconds and the worker process's usage
    meanwhile (a worker runs one task at a time, so that usage is the task's, the threads it
    starts included). The memory the task freed goes back to the system afterwards
    (:mod:`pipeline.cluster.heap`), so the next task's peak does not stack on it."""
    inject_faults(stage, key)
    worker = get_worker().address
    epoch, started, usage = time.time(), time.perf_counter(), CpuUsage.of_process()
    try:
        result = fn(*args, **kwargs)
        seconds = time.perf_counter() - started
        return result, worker, epoch, seconds, CpuUsage.of_process() - usage
    finally:
        return_free_memory()


@dataclass
class TaskClock:
    """Where the workers' time went, from the tasks of a run (:func:`run_tasks` fills it).

    Attributes
    ----------
    by_stage
        Per stage, ``[seconds, CPU seconds, of those in the kernel]`` inside its tasks that
        succeeded, summed over the workers.
    busy
        Per worker (by address), the seconds it spent inside tasks that succeeded.
    first_start, last_end
        When the first of those tasks started and the last one ended (seconds since the epoch,
        the workers' clocks).
    """

    by_stage: dict[str, list[float]] = field(default_factory=dict)
    busy: dict[str, float] = field(default_factory=dict)
    first_start: float = math.inf
    last_end: float = -math.inf

    def add(self, stage: str, worker: str, start: float, seconds: float, usage: CpuUsage) -> None:
        """Count one task's time."""
        totals = self.by_stage.setdefault(stage, [0.0, 0.0, 0.0])
        for k, value in enumerate((seconds, usage.cpu_seconds, usage.kernel_seconds)):
            totals[k] += value
        self.busy[worker] = self.busy.get(worker, 0.0) + seconds
        self.first_start = min(self.first_start, start)
        self.last_end = max(self.last_end, start + seconds)

    @property
    def span(self) -> float:
        """Seconds from the first task's start to the last one's end (0 before any task):
        with every worker busy all along, each worker's :attr:`busy` would be this."""
        return max(self.last_end - self.first_start, 0.0)


def solver_threads(cfg: ClusterSpec) -> int:
    """numba threads per solver call: 1 unless set, so workers × threads never oversubscribe."""
    return cfg.solver_threads or 1


def _dashboard_available() -> bool:
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def connect(cfg: ClusterSpec) -> Iterator[Client]:
    """Start (or connect to) the cluster described by ``cfg`` and yield a client.

    Parameters
    ----------
    cfg
        The ``cluster`` section.

    Yields
    ------
    distributed.Client
        Closed (and a local cluster shut down) on exit.

    Raises
    ------
    ConfigError
        ``cluster.address`` cannot be reached, or the back-end of ``cluster.kind`` (slurm, pbs,
        kubernetes) is not installed.
    """
    dashboard = cfg.dashboard and _dashboard_available()
    if cfg.dashboard and not dashboard:
        log.info("dashboard off: it needs bokeh (pip install 'bokeh>=3.1')")
    if cfg.kind == "address":
        try:
            client = Client(cfg.address, timeout=f"{CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError) as exc:
            raise ConfigError(
                f"cluster.address {cfg.address!r}: no scheduler answered within "
                f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__}): start it or fix `cluster.address`"
            ) from None
        with client:
            _announce(client, dashboard)
            yield client
        return
    from pipeline.cluster.backends import make_cluster

    # Local worker processes, or jobs and pods that start when the scheduler asks for them
    # (tasks wait for workers).
    with make_cluster(cfg) as cluster, Client(cluster) as client:
        log.info("%s cluster: %s", cfg.kind, cluster.scheduler_address)
        _announce(client, dashboard)
        yield client


def _announce(client: Client, dashboard: bool) -> None:
    if dashboard:
        print(f"Dask dashboard: {client.dashboard_link}", flush=True)


@dataclass(frozen=True)
class Task:
    """One unit of work: ``key`` names the Dask task (a tile id or similar).

    ``after`` names tasks of the same batch that must succeed first (the task is dropped when
    one of them fails); ``stage`` overrides the batch's stage for the fault hooks and the task
    key; ``weight`` is how many progress-bar units (tiles) it counts for; a higher
    ``priority`` runs first among tasks that are ready.
    """

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    stage: str | None = None
    weight: int = 1
    priority: int = 0


def holds_tasks(cfg: ClusterSpec) -> bool:
    """Whether :func:`run_tasks` may hold ready tasks until a worker thread is free (its
    ``hold``): on the clusters this package starts, whose size is fixed by the configuration;
    not on a scheduler at ``cluster.address``, which may be adaptive and grow only for the
    tasks it is shown."""
    return cfg.kind != "address"


def run_tasks(
    client: Client,
    tasks: Iterable[Task],
    *,
    stage: str,
    unit: str = "tiles",
    clock: TaskClock | None = None,
    hold: bool = False,
) -> tuple[dict[str, Any], dict[str, BaseException]]:
    """Run tasks, one Dask task each, as their dependencies finish, showing a progress bar.

    A task is submitted once every task it comes ``after`` has succeeded: the client, not the
    scheduler, holds the dependency, so a task never waits on a worker for another, and the
    result of one task is not shipped to the next (tasks communicate through files).

    With ``hold``, the client also holds ready tasks until a worker thread is free for them
    (fewer tasks running than the cluster has threads), and then submits the one of highest
    ``priority`` (the first in the batch among equals). Dask's scheduler honours priorities only
    among the tasks it queues; tasks that become ready a few at a time (a band's COGs, a
    batch's last tasks) it sends to a worker at once, where they wait behind the task running
    there while another worker may have nothing to do. Holding costs a round trip between the
    end of one task and the start of the next (milliseconds), so it is for tasks of a second or
    more. While the cluster has no worker (jobs still queued), every ready task is submitted.

    Parameters
    ----------
    client
        The cluster client.
    tasks
        Tasks with unique keys.
    stage
        Name shown on the progress bar and in the log.
    unit
        What the progress bar counts (the tasks' ``weight``): ``tiles``, ``products``, ...
    clock
        If given, the time of the tasks that succeeded is added to it (by stage and by worker):
        the run's time budget.
    hold
        Submit a ready task only when a worker thread is free for it, highest priority first
        (see above; :func:`holds_tasks` says where this is safe).

    Returns
    -------
    results, failures
        Results by key for tasks that succeeded and the exception by key for the others (after
        :data:`RETRIES` retries); a failed task never stops the others. Tasks left out because
        a task they come after failed are in neither.
    """
    started = time.perf_counter()
    batch = list(tasks)
    keys = {t.key for t in batch}
    running: dict[Future, Task] = {}
    queue = as_completed()

    def submit(task: Task) -> None:
        task_stage = task.stage or stage
        future = client.submit(
            _call,
            task_stage,
            task.key,
            task.fn,
            *task.args,
            key=f"{task_stage}-{task.key}",
            pure=False,
            retries=RETRIES,
            priority=task.priority,
            **task.kwargs,
        )
        running[future] = task
        queue.add(future)

    order = {t.key: i for i, t in enumerate(batch)}
    # Held tasks, a heap: highest priority first, then batch order (unique, so tasks are never
    # compared).
    ready: list[tuple[int, int, Task]] = []

    def make_ready(task: Task) -> None:
        heapq.heappush(ready, (-task.priority, order[task.key], task))

    def submit_ready() -> None:
        if not ready:
            return  # no scheduler round trip
        free = _free_threads(client, len(running)) if hold else len(ready)
        for _ in range(min(free, len(ready))):
            submit(heapq.heappop(ready)[2])

    # Dependencies outside the batch (done by an earlier run) are already satisfied.
    waiting = [t for t in batch if keys.intersection(t.after)]
    for task in batch:
        if not keys.intersection(task.after):
            make_ready(task)
    submit_ready()
    log.info("%s: %d task(s) submitted, %d waiting", stage, len(running), len(waiting) + len(ready))
    results: dict[str, Any] = {}
    failures: dict[str, BaseException] = {}
    dropped: list[str] = []
    # tqdm disables itself when stderr is not a terminal (CI logs stay clean).
    total = sum(t.weight for t in batch)
    with tqdm(total=total, desc=stage, unit=f" {unit}", disable=None) as bar:
        for future in queue:
            task = running.pop(future)
            if future.status == "error":
                try:
                    exc = future.exception()
                except Exception as unreadable:  # the worker's exception did not unpickle
                    exc = RuntimeError(f"{type(unreadable).__name__}: {unreadable}")
                failures[task.key] = exc
                log.error("%s %s failed: %s", task.stage or stage, task.key, exc)
            else:
                results[task.key], *spent = future.result()
                if clock is not None:
                    clock.add(task.stage or stage, *spent)
                bar.update(task.weight)
            future.release()
            waiting = _release_ready(waiting, keys, results, failures, dropped, make_ready)
            submit_ready()
    dropped += [t.key for t in waiting]  # behind a dropped task: can never run
    if dropped:
        log.info("%s: %d task(s) not run: a task they depend on failed", stage, len(dropped))
    log.info(
        "%s: %d done, %d failed in %.1f s",
        stage,
        len(results),
        len(failures),
        time.perf_counter() - started,
    )
    return results, failures


def _free_threads(client: Client, running: int) -> int:
    """How many more tasks the cluster's worker threads can start now, given ``running``
    tasks submitted and not finished; unlimited while it has no worker yet."""
    threads = sum(client.nthreads().values())
    return max(threads - running, 0) if threads else 1 << 30


def _release_ready(
    waiting: list[Task],
    keys: set[str],
    results: dict[str, Any],
    failures: dict[str, BaseException],
    dropped: list[str],
    submit: Callable[[Task], None],
) -> list[Task]:
    """Pass on (``submit``) the waiting tasks whose dependencies all succeeded, drop those with
    a failed one (transitively), and return the ones still waiting."""
    still: list[Task] = []
    for task in waiting:
        needs = keys.intersection(task.after)
        if any(k in failures or k in dropped for k in needs):
            dropped.append(task.key)
        elif all(k in results for k in needs):
            submit(task)
        else:
            still.append(task)
    return still
