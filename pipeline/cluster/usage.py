"""CPU a thread or a process has used so far: seconds, the kernel's part of them, page faults
and preemptions; the difference of two readings is what it did in between.

A task's process-wide usage goes into the run's time budget (:func:`pipeline.cluster.client.
_call`: a worker runs one task at a time, so its process's usage is the task's, the codec
threads it starts included). A tile's solve records its own thread's
(:func:`pipeline.solve.tile.solve_tile`), and the benchmark reads the same for the bare
reference, so that the solve's extra cost inside the pipeline can be split: the kernel's
(memory the solve touches afresh) against the user-space part (caches shared with the other
work of the machine).
"""

from __future__ import annotations

import resource
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CpuUsage"]

#: Linux counts system time, faults and context switches per thread; elsewhere a thread's
#: read 0.
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


@dataclass(frozen=True)
class CpuUsage:
    """Usage so far (:meth:`of_thread`, :meth:`of_process`), or between two readings (``-``),
    or summed over several (``+``).

    Attributes
    ----------
    cpu_seconds
        User and system time.
    kernel_seconds
        Of those, system time: page faults (the kernel zeroing fresh memory), file I/O.
    page_faults
        Minor and major page faults.
    preempted
        Involuntary context switches: times another thread or process took the core.
    """

    cpu_seconds: float = 0.0
    kernel_seconds: float = 0.0
    page_faults: int = 0
    preempted: int = 0

    @classmethod
    def of_thread(cls) -> CpuUsage:
        """The calling thread's usage since it started."""
        cpu = time.thread_time()
        if _RUSAGE_THREAD is None:
            return cls(cpu)
        return cls._read(cpu, _RUSAGE_THREAD)

    @classmethod
    def of_process(cls) -> CpuUsage:
        """The calling process's usage since it started, all its threads."""
        return cls._read(time.process_time(), resource.RUSAGE_SELF)

    @classmethod
    def _read(cls, cpu: float, who: int) -> CpuUsage:
        used = resource.getrusage(who)
        return cls(cpu, used.ru_stime, used.ru_minflt + used.ru_majflt, used.ru_nivcsw)

    def __sub__(self, earlier: CpuUsage) -> CpuUsage:
        return self + CpuUsage(
            -earlier.cpu_seconds, -earlier.kernel_seconds, -earlier.page_faults, -earlier.preempted
        )

    def __add__(self, other: CpuUsage) -> CpuUsage:
        return CpuUsage(
            self.cpu_seconds + other.cpu_seconds,
            self.kernel_seconds + other.kernel_seconds,
            self.page_faults + other.page_faults,
            self.preempted + other.preempted,
        )

    def as_record(self) -> dict[str, Any]:
        """The fields, seconds rounded to 0.1 ms, as a tile's record holds them."""
        fields = asdict(self)
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in fields.items()}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CpuUsage:
        """Read back from a record written with :meth:`as_record` (or a superset of it)."""
        return cls(
            float(record["cpu_seconds"]),
            float(record["kernel_seconds"]),
            int(record["page_faults"]),
            int(record["preempted"]),
        )
