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
