"""The calling thread's usage (:class:`pipeline.cluster.usage.CpuUsage`), by which a tile's record
splits its solve's CPU time."""

from __future__ import annotations

import resource
import threading

import pytest

from pipeline.cluster.usage import CpuUsage
from tests.pipeline.pages import fresh_pages

pytestmark = pytest.mark.skipif(
    not hasattr(resource, "RUSAGE_THREAD"), reason="per-thread usage is Linux's"
)


def test_it_counts_the_calling_thread_s_page_faults_and_only_those() -> None:
    before = CpuUsage.of_thread()
    fresh_pages(64, 8)
    own = CpuUsage.of_thread() - before
    # 8 × 64 MiB written: at least one fault per 2 MiB huge page, 4 096 per 4 KiB page.
    assert own.page_faults >= 8 * 32
    assert 0.0 <= own.kernel_seconds <= own.cpu_seconds + 0.01  # µs against a ns clock

    before = CpuUsage.of_thread()
    other = threading.Thread(target=fresh_pages, args=(64, 8))
    other.start()
    other.join()
    idle = CpuUsage.of_thread() - before
    assert idle.page_faults < own.page_faults / 4  # another thread's faults are not ours
