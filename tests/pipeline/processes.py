"""Real ``dask scheduler`` / ``dask worker`` processes for tests of the ``address`` back-end and
of failures (shared by test_backends, test_faults, test_scene and tests/deploy/test_dask_cli)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


def start_worker(address: str, logs: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    """One ``dask worker`` process with one thread and no nanny, connected to ``address``, with
    ``env`` added to its environment; its output in ``logs/NAME.log``."""
    # --no-nanny: the worker is this very process, so kill -9 of its pid is a lost worker.
    with open(logs / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            [
                *(DASK, "worker", address, "--host", "127.0.0.1", "--nthreads", "1"),
                *("--no-nanny", "--no-dashboard", "--name", name),
                *("--local-directory", str(logs / name)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
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


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """Stop ``proc`` as Ctrl-C would (SIGTERM), killing it after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` (SIGKILL) unless it has exited, and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=15)


@contextmanager
def dask_cli_cluster(logs: Path, n_workers: int) -> Iterator[str]:
    """``dask scheduler`` and ``dask worker ADDRESS --nworkers N --nthreads 1`` on 127.0.0.1,
    two processes started with the ``dask`` command line as deploy/README.md's recipe does (their
    output in ``logs``); yields the scheduler's address once the workers are connected, and
    stops both on exit."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_scheduler(port, logs))
        with open(logs / "worker.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        *(DASK, "worker", address, "--host", "127.0.0.1"),
                        *("--nworkers", str(n_workers), "--nthreads", "1", "--no-dashboard"),
                        *("--local-directory", str(logs)),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        wait_for_workers(address, n_workers, procs)
        yield address
    finally:
        for proc in reversed(procs):
            stop(proc)
