"""Test hooks that make real tasks fail or stall, named as such.

They are read *inside* each task, on the worker, so that tests exercise real failures of a real
cluster rather than mocks. Workers read their own environment: set these where the workers
start (a local cluster inherits the client's). Unset, they do nothing.

``CLOUDREMOVAL_FAIL_TILES``
    Comma-separated ``[stage:]name`` tokens; work of that stage (default ``solve``) whose key
    contains ``name`` — a tile (``r01c00``), a band and tile (``B2-r01c00``), a seam
    (``blend:s01``) or a product (``products:cog-B2``) — raises :class:`InjectedFault` on every
    attempt. A task that does several units of work (a row task solves a row of tiles) checks
    each unit's key with :func:`inject_faults`.
``CLOUDREMOVAL_TASK_DELAY``
    Seconds every task (and every tile of a row task) sleeps before it starts, so that tests
    can stop a run mid-stage.
"""

from __future__ import annotations

import os
import time

__all__ = ["DELAY_ENV", "FAIL_ENV", "InjectedFault", "inject_faults"]

FAIL_ENV = "CLOUDREMOVAL_FAIL_TILES"
DELAY_ENV = "CLOUDREMOVAL_TASK_DELAY"


class InjectedFault(RuntimeError):
    """Raised inside a task selected by ``CLOUDREMOVAL_FAIL_TILES`` (tests only)."""


def inject_faults(stage: str, key: str) -> None:
    """The test hooks (:data:`DELAY_ENV`, :data:`FAIL_ENV`) for one unit of work of ``stage``
    named ``key``; they do nothing unless those variables are set where the worker runs."""
    delay = os.environ.get(DELAY_ENV)
    if delay:
        time.sleep(float(delay))
    for token in filter(None, (t.strip() for t in os.environ.get(FAIL_ENV, "").split(","))):
        target_stage, _, name = token.rpartition(":")
        if (target_stage or "solve") == stage and f"-{name}-" in f"-{key}-":
            raise InjectedFault(f"{stage} {key}: injected failure ({FAIL_ENV}={token})")
