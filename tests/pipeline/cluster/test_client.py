"""Running a batch of tasks on a real Dask cluster (:func:`pipeline.cluster.run_tasks`).

A local cluster of worker threads (``processes=False``: the same scheduler and workers as
with processes, and the tasks can append to one list here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from distributed import Client, LocalCluster, get_client

from pipeline.cluster import Task, TaskClock, run_tasks
from pipeline.cluster.client import holds_tasks
from pipeline.config import ClusterSpec
from tests.pipeline.pages import fresh_pages

#: What the tasks saw, in the order they started: (key, tasks unfinished at the scheduler).
STARTED: list[tuple[str, int]] = []
_LOCK = threading.Lock()


def _unfinished(dask_scheduler) -> int:  # run on the scheduler
    return sum(
        ts.state in ("queued", "processing", "no-worker") for ts in dask_scheduler.tasks.values()
    )


def _record(key: str, seconds: float) -> str:
    """A task: note its start and how many tasks the scheduler holds unfinished, then sleep."""
    unfinished = get_client().run_on_scheduler(_unfinished)
    with _LOCK:
        STARTED.append((key, unfinished))
    time.sleep(seconds)
    return key


def _client(n_workers: int) -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture()
def one_worker() -> Iterator[Client]:
    STARTED.clear()
    yield from _client(1)


@pytest.fixture()
def two_workers() -> Iterator[Client]:
    STARTED.clear()
    yield from _client(2)


def _task(key: str, priority: int = 0, after: tuple[str, ...] = (), seconds: float = 0.05) -> Task:
    return Task(key, _record, (key, seconds), after=after, priority=priority)


def test_held_tasks_start_by_priority_then_batch_order(one_worker: Client) -> None:
    # "first" goes first; while it runs, "mid" waits and the "high" ones become ready: with
    # one worker thread they are all held and start highest priority first, ties in batch
    # order, whenever they became ready.
    batch = [
        _task("first", 3, seconds=0.3),
        _task("low", 0, after=("first",)),
        _task("high-a", 2, after=("first",)),
        _task("mid", 1),
        _task("high-b", 2, after=("first",)),
    ]
    results, failures = run_tasks(one_worker, batch, stage="test", hold=True)
    assert not failures and set(results) == {t.key for t in batch}
    order = [key for key, _ in STARTED]
    assert order == ["first", "high-a", "high-b", "mid", "low"]


def test_holding_shows_the_scheduler_no_more_tasks_than_threads(two_workers: Client) -> None:
    batch = [_task(f"t{i}", seconds=0.1) for i in range(8)]
    results, _ = run_tasks(two_workers, batch, stage="test", hold=True)
    assert len(results) == 8
    assert max(unfinished for _, unfinished in STARTED) <= 2


def test_without_holding_every_ready_task_goes_to_the_scheduler(two_workers: Client) -> None:
    # The contrast of the test above: the scheduler holds more tasks than threads.
    batch = [_task(f"t{i}", seconds=0.1) for i in range(8)]
    run_tasks(two_workers, batch, stage="test")
    assert max(unfinished for _, unfinished in STARTED) > 2


def test_a_held_task_behind_a_failed_one_is_dropped(one_worker: Client) -> None:
    batch = [
        Task("boom", _fail, ()),
        _task("behind", 1, after=("boom",)),
        _task("free", 0),
    ]
    results, failures = run_tasks(one_worker, batch, stage="test", hold=True)
    assert set(failures) == {"boom"} and set(results) == {"free"}


def _fail() -> None:
    raise ValueError("this task fails")


def test_only_clusters_of_a_configured_size_hold_tasks() -> None:
    assert holds_tasks(ClusterSpec(kind="local"))
    assert not holds_tasks(ClusterSpec(kind="address", address="tcp://127.0.0.1:8786"))


def test_task_seconds_split_the_kernel_s_part_of_the_cpu(one_worker: Client) -> None:
    # 20 × 128 MiB of new pages: about 650 000 page faults, tens of milliseconds of system time
    # at the least.
    clock = TaskClock()
    batch = [Task(f"p{i}", fresh_pages, (128, 10)) for i in range(2)]
    results, failures = run_tasks(one_worker, batch, stage="pages", clock=clock)
    assert not failures and set(results.values()) == {10}
    seconds, cpu, kernel = clock.by_stage["pages"]
    assert seconds > 0.0
    assert 0.0 < kernel <= cpu + 0.02  # µs against a ns clock


#: Each task's sleep in the clock's test: long against what a loaded machine adds to a task.
NAP = 1.0


@pytest.mark.parametrize(("hold", "workers"), [(True, 1), (True, 2), (False, 2)])
def test_the_clock_counts_each_worker_s_busy_seconds_and_the_span(
    hold: bool, workers: int, request: pytest.FixtureRequest
) -> None:
    client = request.getfixturevalue("one_worker" if workers == 1 else "two_workers")
    clock = TaskClock()
    batch = [_task(f"t{i}", seconds=NAP) for i in range(4)]
    results, failures = run_tasks(client, batch, stage="nap", hold=hold, clock=clock)
    assert not failures and len(results) == 4
    assert len(clock.busy) == workers  # by worker address, even for workers in one process
    busy = sum(clock.busy.values())
    assert busy == pytest.approx(clock.by_stage["nap"][0])
    # At least the naps; under twice them, so a task counted twice fails, while a loaded
    # machine's overhead does not (each task's round trip to the scheduler: 0.34 s a task in a
    # fresh clone's suite, 2.57 s in all, when the naps were 0.3 s; hence naps of a second).
    assert 4 * NAP <= busy < 2 * 4 * NAP
    # One worker runs them one after the other; two run two at a time.
    assert busy / workers <= clock.span < busy / workers + 0.5
