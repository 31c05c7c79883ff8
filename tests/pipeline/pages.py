"""Work that makes the kernel work: the tests of CPU accounting use it."""

from __future__ import annotations

import numpy as np


def fresh_pages(megabytes: int, times: int) -> int:
    """Fill ``megabytes`` of freshly mapped memory ``times`` times over (each array is mapped
    afresh and freed, so every page is a fault); returns ``times``."""
    return sum(int(np.ones(megabytes << 17)[-1]) for _ in range(times))  # 8-byte floats
