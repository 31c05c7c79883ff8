"""Where a run's CPU goes, from a sampling profile of every process: the task functions, and
the threads that run outside them (Zarr's codec pool, Dask's event loops).

The run summary times each task from its start to its end; the chunks a task reads or writes
are encoded and decoded in Zarr's thread pool, and the driver's scheduler and client have no
task at all. A sampling profiler sees them all. Record a run with py-spy (in the ``bench``
extra: ``pip install -e ".[bench]"``), every process of the tree, only threads that are running
(no ``--idle``)::

    py-spy record --subprocesses -r 25 -f raw -o run.txt -- python -m pipeline run CONFIG
    python benchmarks/profile_budget.py run.txt --rate 25

It prints the thread-seconds of each group, largest first, and the leaf functions of Zarr's
pool. py-spy's idea of a running thread is a heuristic, so compare groups within one profile.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

#: (group, a substring of a frame): the first that any frame of a stack has names the stack.
#: The solve's kernels come first, the rest of cloudcore after the tasks that call it besides
#: the rows (the mask's scores), the rows last: a row task's solve runs inside its blend loop.
GROUPS = (
    ("solve (the fused iteration)", "fused_"),
    ("solve (the refinement)", "cloudcore/refine"),
    ("stage", "stage_tile"),
    ("seams", "blend_seam"),
    ("mask", "mask_row"),
    ("band COGs", "write_cogs"),
    ("mask COGs", "write_mask_cogs"),
    ("quicklooks", "write_quicklooks"),
    ("solve (the rest of cloudcore)", "cloudcore/"),
    ("rows: halos, blend, write", "solve_row"),
    ("Zarr's codec threads", "zarr/"),
    ("Dask: workers, scheduler, client", "distributed/"),
    ("the driver's own code", "pipeline/"),
)


#: Leaf frames of threads that wait (an idle pool thread, an event loop in ``select``) although
#: py-spy sampled them as running: left out of the budget. Matched anywhere in the leaf frame,
#: not at its start: py-spy 0.4 names a method with its class (``EpollSelector.select
#: (selectors.py:468)``), and Zarr's event-loop thread idling there was 218 of a full-size
#: run's 1926 "running" thread-seconds, counted as work until 2026-11-29.
WAITS = ("_worker (concurrent/futures/thread.py", "select (selectors.py", "Condition.wait (")


def budget(lines: list[str], rate: float) -> tuple[Counter[str], Counter[str]]:
    """Thread-seconds by group, and by leaf function within Zarr's codec threads."""
    groups: Counter[str] = Counter()
    zarr_leaves: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if any(wait in frames[-1] for wait in WAITS):
            continue
        seconds = int(count) / rate
        group = next((g for g, key in GROUPS if any(key in f for f in frames)), "other")
        groups[group] += seconds
        if group == "Zarr's codec threads":
            zarr_leaves[frames[-1].split(" (")[0]] += seconds
    return groups, zarr_leaves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record -f raw output")
    parser.add_argument("--rate", type=float, default=25.0, help="py-spy's -r, samples/s")
    args = parser.parse_args()
    groups, zarr_leaves = budget(args.profile.read_text().splitlines(), args.rate)
    total = sum(groups.values())
    print(f"{total:.1f} thread-seconds running")
    for group, seconds in groups.most_common():
        print(f"  {seconds:7.1f}  {100 * seconds / total:5.1f} %  {group}")
    print("Zarr's codec threads, by leaf function:")
    for leaf, seconds in zarr_leaves.most_common(10):
        print(f"  {seconds:7.1f}  {leaf}")


if __name__ == "__main__":
    main()
