"""Freed memory goes back to the system between tasks (pipeline.cluster.heap)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pipeline.cluster.backends import WORKER_ENV

# Frees 256 one-MiB blocks, each below a small block still in use: glibc keeps those pages (it
# trims only the heap's free top by itself) until they are handed back.
_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from pipeline.cluster.heap import return_free_memory

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    blocks, pinned = [], []
    for _ in range(256):
        blocks.append(np.ones(1 << 17))  # 1 MiB: on the heap, not mmapped
        pinned.append(np.ones(1 << 10))  # 8 KiB above it
    del blocks
    before = rss()
    assert return_free_memory()
    print(before - rss())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_pages_return_to_the_system() -> None:
    env = {**os.environ, **WORKER_ENV}  # the workers' malloc settings
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    returned = int(out.stdout.strip())
    assert returned > 128 * 2**20, f"only {returned / 2**20:.0f} MiB returned"


# A tile's arrays freed and allocated again by a task thread (a Dask worker runs its tasks in a
# thread, whose arena is not the main one): three 44 MiB float32 layers and an 88 MiB float64
# refit of a 1280² × 7 tile. Prints the page faults of each of three rounds.
_REUSE_SCRIPT = textwrap.dedent(
    """
    import resource, threading
    import numpy as np

    def faults():
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    def tiles():
        counts = []
        for _ in range(3):
            start = faults()
            layers = [np.ones((7, 1280 * 1280), np.float32) for _ in range(3)]
            refit = np.ones((7, 1280 * 1280))
            del layers, refit
            counts.append(faults() - start)
        print(*counts)

    thread = threading.Thread(target=tiles)
    thread.start()
    thread.join()
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_a_task_thread_reuses_a_tiles_freed_arrays_under_the_workers_settings() -> None:
    # pipeline.cluster.backends.WORKER_ENV: under glibc's 32 MiB ceiling every one of these
    # arrays was mapped afresh and zeroed by the kernel, tile after tile (as many faults in
    # every round); with two arenas the task thread's 64 MiB heaps still mapped the refit.
    env = {**os.environ, **WORKER_ENV}
    out = subprocess.run(
        [sys.executable, "-c", _REUSE_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    first, *again = (int(n) for n in out.stdout.split())
    assert first > 0
    assert max(again) < first / 10, (first, again)
