"""The calling thread's usage (:class:`pipeline.usage.ThreadUsage`), by which a tile's record
splits its solve's CPU time."""

from __future__ import annotations

import resource
import threading

import numpy as np
import pytest

from pipeline.usage import ThreadUsage

pytestmark = pytest.mark.skipif(
    not hasattr(resource, "RUSAGE_THREAD"), reason="per-thread usage is Linux's"
)


def _touch_fresh_pages(megabytes: int) -> float:
    """Write every byte of ``megabytes`` of new memory, several times over (each array is
    mapped afresh and freed)."""
    return sum(float(np.ones(megabytes << 17)[-1]) for _ in range(8))  # 8-byte floats


def test_it_counts_the_calling_thread_s_page_faults_and_only_those() -> None:
    before = ThreadUsage.now()
    _touch_fresh_pages(64)
    own = ThreadUsage.now() - before
    # 8 × 64 MiB written: at least one fault per 2 MiB huge page, 4 096 per 4 KiB page.
    assert own.page_faults >= 8 * 32
    assert 0.0 <= own.kernel_seconds <= own.cpu_seconds + 0.01  # µs against a ns clock

    before = ThreadUsage.now()
    other = threading.Thread(target=_touch_fresh_pages, args=(64,))
    other.start()
    other.join()
    idle = ThreadUsage.now() - before
    assert idle.page_faults < own.page_faults / 4  # another thread's faults are not ours
