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


# Frees 16 MiB arrays, each below a small block still in use: under the workers' 32 MiB
# threshold they are heap memory that stays resident; inside mmap_threshold(8 MiB) they are
# mmapped and unmapped when freed. Prints the resident growth of each, and the growth of
# allocations after the block (the threshold restored: on the heap again).
_THRESHOLD_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from pipeline.cluster.heap import SOLVE_MMAP_THRESHOLD, mmap_threshold

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    def kept_after_freeing():
        start = rss()
        blocks, pinned = [], []
        for _ in range(16):
            blocks.append(np.ones(1 << 21))  # 16 MiB
            pinned.append(np.ones(1 << 14))  # 128 KiB above it (smaller ones land elsewhere)
        del blocks
        return rss() - start

    heap = kept_after_freeing()
    with mmap_threshold(SOLVE_MMAP_THRESHOLD) as took:
        inside = kept_after_freeing()
    after = kept_after_freeing()
    print(took, heap, inside, after)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_lower_mmap_threshold_returns_freed_arrays_at_once_and_is_restored() -> None:
    env = {**os.environ, **WORKER_ENV}
    out = subprocess.run(
        [sys.executable, "-c", _THRESHOLD_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    took, heap, inside, after = out.stdout.split()
    assert took == "True"
    assert int(heap) > 128 * 2**20  # 16 × 16 MiB freed below live blocks: still resident
    assert int(inside) < 16 * 2**20  # mmapped: gone when freed
    assert int(after) > 128 * 2**20  # the workers' threshold again


def test_mmap_threshold_leaves_a_process_without_the_setting_alone(monkeypatch) -> None:
    from pipeline.cluster.heap import mmap_threshold

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    with mmap_threshold(1 << 20) as took:
        assert took is False
