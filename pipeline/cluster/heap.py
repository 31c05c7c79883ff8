"""Give a worker's freed memory back to the operating system between tasks.

Why: glibc keeps the memory a process frees and reuses it later; it hands back to the system
only the free top of the heap beyond ``MALLOC_TRIM_THRESHOLD_`` (1 GiB on our workers,
:data:`pipeline.cluster.backends.WORKER_ENV`), never free pages between live allocations. Arrays
under the mmap threshold (256 MiB there: every array of a tile's solve, and a scene-scope
tile's state) live on the heap, so a worker that has held a band's state or solved a row of
tiles keeps hundreds of MiB of resident memory it no longer uses, and that memory adds to the
next task's peak. ``malloc_trim(0)`` returns every free page of every arena; it takes a few
milliseconds, against tasks of seconds.

Within a task the heap is kept on purpose: a row task's tiles are of one size, and each reuses
the pages the one before it freed instead of having them mapped afresh and zeroed by the
kernel (the page faults of the solving thread fell to a quarter, its CPU by 5-10 %; the run's
peak rose 0.2 GiB, docs/PERFORMANCE.md). Until version e088dfa the row tasks even lowered the
threshold to 8 MiB, to hold a full-size row task 0.1-0.4 GiB lower when the run's peak was
near 3 GB; the peak has come down since.

Elsewhere than glibc (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["return_free_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        trim = ctypes.CDLL(library).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def return_free_memory() -> bool:
    """Return the process's free heap pages to the system; whether the C library could."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
