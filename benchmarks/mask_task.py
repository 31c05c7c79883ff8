"""One mask task of a finished run, alone: its time, its CPU and how far its memory rises.

Runs :func:`pipeline.outputs.mask_layer.mask_row` for one tile row of a run that has finished
(its configuration and its cube), in this process, and prints the task's seconds, CPU seconds
and the process's resident memory at its start and at its highest (sampled every 10 ms by
``pipeline_run.PeakMemory``, this folder's pipeline benchmark's sampler); with
``--trace``, also the largest total of NumPy's live allocations (``tracemalloc``) in each of
the pass's steps. The task rewrites the row's mask, provenance and kept observations in the
cube with the values a run writes there (the pass is idempotent), so a copy of the cube
compared with the original afterwards shows whether a change kept the bits.

Run it with the workers' environment (:data:`pipeline.cluster.backends.WORKER_ENV`, set
before Python starts: glibc reads it then), so that the memory is what a worker's is::

    env MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_ARENA_MAX=1 \\
        ZARR_ASYNC__CONCURRENCY=1 python benchmarks/mask_task.py CONFIG CUBE --row 1 [--trace]

CONFIG is the run's configuration file, CUBE its ``cube.zarr`` (or a copy of it).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from pipeline_run import PeakMemory  # this folder's benchmark

import pipeline.outputs.mask_layer as mask_layer
from pipeline.config import Config, load
from pipeline.outputs.tasks import ProductTasks
from pipeline.plan import make_plan
from pipeline.solve.scopes import scope_for
from pipeline.store.layout import Layout

#: The steps of a mask task whose live NumPy memory ``--trace`` reports.
STEPS = ("scores_over", "columns", "classify_scores", "_write_core")


def _traced(name: str, step: Callable[..., Any], peaks: dict[str, float]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        tracemalloc.reset_peak()
        result = step(*args, **kwargs)
        peaks[name] = max(peaks.get(name, 0.0), tracemalloc.get_traced_memory()[1] / 2**20)
        return result

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="the finished run's configuration file")
    parser.add_argument("cube", type=Path, help="its cube.zarr (or a copy)")
    parser.add_argument("--row", type=int, default=0, help="the tile row")
    parser.add_argument("--trace", action="store_true", help="NumPy's live memory per step")
    args = parser.parse_args()

    config = load(args.config, Config)
    plan = make_plan(config, Layout(Path(config.output.path)))
    products = ProductTasks(plan, scope_for(config.solver).record_markers(plan))
    masks = [t for t in products.after_solve(args.cube) if t.stage == "mask"]  # one per row
    job = masks[args.row].args[0]
    peaks: dict[str, float] = {}
    if args.trace:
        for name in STEPS:
            setattr(mask_layer, name, _traced(name, getattr(mask_layer, name), peaks))
        tracemalloc.start()
    start = psutil.Process().memory_info().rss
    with PeakMemory(interval=0.01) as memory:
        t0, c0 = time.perf_counter(), time.process_time()
        result = mask_layer.mask_row(job)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    highest = memory.driver_highest[0]
    print(
        f"tile row {args.row} ({len(job.tiles)} cores, {len(job.bands)} bands): {wall:.2f} s, "
        f"CPU {cpu:.2f} s; RSS {start / 2**30:.3f} GiB at the start, {highest / 2**30:.3f} at "
        f"the highest: {(highest - start) / 2**20:.0f} MiB above the start"
    )
    for name, peak in peaks.items():
        print(f"  live NumPy memory at its highest in {name}: {peak:.0f} MiB")
    print(f"  classes: {result['classes']}")


if __name__ == "__main__":
    main()
