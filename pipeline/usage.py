"""What one thread has used so far: CPU seconds, the kernel's part of them, page faults and
preemptions; the difference of two readings is what the thread did in between.

A tile's solve records it (:func:`pipeline.solve.solve_tile`), and the benchmark reads the same
for the bare reference, so that the solve's extra cost inside the pipeline can be split: the
kernel's (memory the solve touches afresh) against the user-space part (caches shared with the
other work of the machine).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

__all__ = ["ThreadUsage"]

#: Linux counts system time, faults and context switches per thread; elsewhere they read 0.
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


@dataclass(frozen=True)
class ThreadUsage:
    """The calling thread's usage so far, or (after ``-``) between two readings.

    Attributes
    ----------
    cpu_seconds
        User and system time (``time.thread_time``).
    kernel_seconds
        Of those, system time: page faults (the kernel zeroing fresh memory), file I/O.
    page_faults
        Minor and major page faults.
    preempted
        Involuntary context switches: times another thread or process took the core.
    """

    cpu_seconds: float
    kernel_seconds: float
    page_faults: int
    preempted: int

    @classmethod
    def now(cls) -> ThreadUsage:
        """The calling thread's usage since it started."""
        cpu = time.thread_time()
        if _RUSAGE_THREAD is None:
            return cls(cpu, 0.0, 0, 0)
        used = resource.getrusage(_RUSAGE_THREAD)
        return cls(cpu, used.ru_stime, used.ru_minflt + used.ru_majflt, used.ru_nivcsw)

    def __sub__(self, earlier: ThreadUsage) -> ThreadUsage:
        return self + ThreadUsage(
            -earlier.cpu_seconds, -earlier.kernel_seconds, -earlier.page_faults, -earlier.preempted
        )

    def __add__(self, other: ThreadUsage) -> ThreadUsage:
        """Both together (usage summed over several solves)."""
        return ThreadUsage(
            self.cpu_seconds + other.cpu_seconds,
            self.kernel_seconds + other.kernel_seconds,
            self.page_faults + other.page_faults,
            self.preempted + other.preempted,
        )
