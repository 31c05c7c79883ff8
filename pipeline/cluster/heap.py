"""Give a worker's freed memory back to the operating system between tasks.

Why: glibc keeps the memory a process frees and reuses it later; it hands back to the system
only the free top of the heap beyond ``MALLOC_TRIM_THRESHOLD_`` (64 MiB on our workers,
:data:`pipeline.cluster.backends.WORKER_ENV`), never free pages between live allocations. Arrays
under the mmap threshold (32 MiB there: a scene-scope tile's state arrays of 1024² × 7 float32
are 28 MiB each) live on the heap, so a worker that has held a band's state or solved a row of
tiles keeps hundreds of MiB of resident memory it no longer uses, and that memory adds to the
next task's peak. ``malloc_trim(0)`` returns every free page of every arena; it takes a few
milliseconds, against tasks of seconds.

A tile row's solve runs under the same 32 MiB threshold: its boolean masks and per-date float64
columns (11-13 MiB at 1280² × 7) are reused from the heap rather than mapped afresh and zeroed by
the kernel for each tile. An 8 MiB threshold inside the row tasks (until version e088dfa) held a
full-size row task 0.1-0.4 GiB lower when the run's peak was near 3 GB; since then the peak came
down: at full size the run peaked at 2.15 GiB without it against 2.16 GiB with it, and its wall
ratio to the bare solve went from 1.59 to 1.52 (docs/PERFORMANCE.md).

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
