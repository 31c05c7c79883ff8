"""Real ``dask scheduler`` / ``dask worker`` processes for tests of the ``address`` back-end and
of failures (shared by test_backends and test_faults)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from distributed import Client

DASK = str(Path(sys.executable).with_name("dask"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_scheduler(port: int, logs: Path) -> subprocess.Popen[bytes]:
    """``dask scheduler`` on 127.0.0.1:``port``, its output in ``logs/scheduler.log``."""
    with open(logs / "scheduler.log", "wb") as log:
        return subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_for_workers(
    address: str, n: int, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 60
) -> None:
    """Block until ``n`` workers are connected to the scheduler at ``address``; raise if one of
    ``procs`` exits or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Client(address, timeout="5s") as client:
                client.wait_for_workers(n, timeout=timeout)
            return
        except OSError:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise
            time.sleep(0.5)
