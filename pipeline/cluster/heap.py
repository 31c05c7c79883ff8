"""Give a worker's freed memory back to the operating system between tasks.

Why: glibc keeps the memory a process frees and reuses it later; it hands back to the system
only the free top of the heap beyond ``MALLOC_TRIM_THRESHOLD_`` (64 MiB on our workers,
:data:`pipeline.cluster.backends.WORKER_ENV`), never free pages between live allocations. Arrays
under the mmap threshold (32 MiB there: a scene-scope tile's state arrays of 1024² × 7 float32
are 28 MiB each) live on the heap, so a worker that has held a band's state or solved a row of
tiles keeps hundreds of MiB of resident memory it no longer uses, and that memory adds to the
next task's peak. ``malloc_trim(0)`` returns every free page of every arena; it takes a few
milliseconds, against tasks of seconds.

Inside a tile row's solve, :func:`mmap_threshold` lowers the threshold to
:data:`SOLVE_MMAP_THRESHOLD`, so that a tile's boolean masks and per-date float64 columns
(11-13 MiB at 1280² × 7) are mmapped and go back to the system as soon as they are freed: a
full-size row task of 12 tiles peaked at 1.27 GiB RSS against 1.30-1.38 GiB with 32 MiB. Not
for every task: the COG and mask tasks allocate many band-sized arrays (26 MiB at 2560²) that
would then each be paged in afresh; with 8 MiB for the whole run their CPU time rose by 20 %
(2560² scene scope, products 14.4-15.9 against 12.8-13.7 CPU s).

Elsewhere than glibc (macOS, musl) this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["SOLVE_MMAP_THRESHOLD", "mmap_threshold", "return_free_memory"]

#: Bytes from which allocations are mmapped while a tile row is solved (see the module text).
SOLVE_MMAP_THRESHOLD = 8 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)


@functools.cache
def _libc(name: str, argtypes: tuple[Any, ...]) -> Callable[..., int] | None:
    """glibc's function ``name`` (returning int), or None where the C library has none."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


def return_free_memory() -> bool:
    """Return the process's free heap pages to the system; whether the C library could."""
    trim = _libc("malloc_trim", (ctypes.c_size_t,))
    if trim is None:
        return False
    trim(0)
    return True


@contextlib.contextmanager
def mmap_threshold(nbytes: int) -> Iterator[bool]:
    """Within the block, allocations of ``nbytes`` or more are mmapped; then the process's own
    ``MALLOC_MMAP_THRESHOLD_`` again. Yields whether it took effect: only where that variable
    is set (every worker of this package's clusters, :data:`pipeline.cluster.backends.WORKER_ENV`),
    since glibc's dynamic default could not be restored afterwards, and only with glibc."""
    mallopt = _libc("mallopt", (ctypes.c_int, ctypes.c_int))
    own = os.environ.get("MALLOC_MMAP_THRESHOLD_", "")
    if mallopt is None or not own.isdigit():
        yield False
        return
    mallopt(_M_MMAP_THRESHOLD, nbytes)
    try:
        yield True
    finally:
        mallopt(_M_MMAP_THRESHOLD, int(own))
