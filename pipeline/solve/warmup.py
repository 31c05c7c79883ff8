"""Load the solver's compiled kernels on every worker as it starts, while it stages tiles.

Why: the numba kernels of :mod:`cloudcore._kernels` are compiled on a worker's first solve
unless numba's on-disk cache holds them; with the cache empty (a fresh install, a new numba, a
changed ``_kernels.py``) each worker compiled them itself, in its first solve task: about 19 s
per worker measured at 2560² on the 2-core development machine, both workers at once. Served
from the cache they load in ~0.3 s.

:class:`KernelWarmup` is a Dask worker plugin: when a worker starts, a background thread runs one
tiny masked solve in the run's precision, which loads (or compiles) every kernel the tile and
scene solvers call. That happens while the stage tasks run. An exclusive file lock makes the
workers of one machine take turns: the first compiles and fills the cache, the others then load
from it instead of compiling the same code again at the same time.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from pipeline.config import SolverConfig

__all__ = [
    "LOCK_PATH",
    "WARMUP_TOL",
    "KernelWarmup",
    "brief_solver",
    "machine_lock",
    "warm_dn_blocks",
    "warm_kernels",
    "warmup_matrix",
]

log = logging.getLogger(__name__)

#: The lock the workers of one machine take turns on (per machine: numba's cache is local too,
#: unless ``NUMBA_CACHE_DIR`` points at a shared one).
LOCK_PATH = Path(tempfile.gettempdir()) / "cloudremoval-kernels.lock"


@contextlib.contextmanager
def machine_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (POSIX ``flock``; no lock where there is none).

    Parameters
    ----------
    path
        The lock file (created if missing); one per machine, :data:`LOCK_PATH`.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: compile side by side, as without the lock
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def warm_kernels(solver: SolverConfig) -> float:
    """Solve one tiny masked matrix as a tile of ``solver`` is solved
    (:func:`pipeline.solve.tile.solve_matrix`: its method, then :func:`cloudcore.refine` if it
    refines; its precision, since kernels are compiled per argument type), in one iteration
    (:func:`brief_solver`) on one thread, so that every kernel a tile or scene solve calls is
    loaded (compiled if numba's cache lacks it); returns the seconds.

    The matrix has a partly observed date, so the masked path and the refit are taken; the
    unmasked path calls the same kernels with the same argument types. The row tasks' blend
    kernel (:mod:`pipeline.solve._feather`) is loaded too, the mask pass's
    (:func:`warm_mask_kernel`), and with the ground capped (``solver.cap_ground``) the cap's
    (:func:`cloudcore.cap_ground`), and with ``solver.shadow_free_fill`` its second solve's
    (:func:`pipeline.solve.tile.written_layers`).
    """
    from pipeline.solve.tile import resolve_lambda, solve_matrix, written_layers

    started = time.perf_counter()
    D, mask = warmup_matrix(solver.dtype)
    brief = brief_solver(solver)
    with machine_lock(LOCK_PATH):
        result = solve_matrix(D, mask, brief, (64, 64), resolve_lambda("auto", *D.shape), threads=1)
        # The cap's kernel, if the solver caps; the second solve's (aatm-shadow), if it has one.
        written_layers(result, D, mask, brief, threads=1)
        import pipeline.solve._feather  # noqa: F401  (the blend's kernel, compiled on import)

        warm_mask_kernel()

        if solver.scope == "scene":
            warm_dn_blocks(brief)
    return time.perf_counter() - started


def warm_mask_kernel() -> None:
    """Load the mask pass's kernel (:func:`cloudcore.masks.darkening_level` of a shadow beside
    its cloud) for the float32 scores the pass holds (:class:`cloudcore.masks.BandMean`), both
    as whole arrays and as the column cuts of them it classifies where one held window covers
    a core's context (``pipeline.outputs.mask_layer``): numba compiles each memory layout on
    its own."""
    import numpy as np

    from cloudcore.masks import darkening_level

    scores = np.zeros((1, 4, 8), np.float32)
    counted = np.ones((1, 4, 4), bool)
    darkening_level(np.ascontiguousarray(scores[..., :4]), counted, 1)
    darkening_level(scores[..., :4], counted, 1)  # a cut: not contiguous


def warmup_matrix(dtype: str) -> tuple[Any, Any]:
    """The tiny matrix the warm-up solves: 4096 random pixels × 4 dates in ``dtype``, the second
    date seen on 3072 of them (the masked path and the refit), and that mask."""
    import numpy as np

    D = np.random.default_rng(0).random((4096, 4)).astype(dtype)
    mask = np.ones(D.shape, dtype=bool)
    mask[:1024, 1] = False
    return D, mask


#: The warm-up's tolerance: met after the first iteration (whose residual is about 0.2 on its
#: matrix), which calls every kernel later iterations call.
WARMUP_TOL = 1.0


def brief_solver(solver: SolverConfig) -> SolverConfig:
    """``solver`` stopped, converged, after its first iteration: loading the kernels is all the
    warm-up solves for, and a converged solve has nothing to warn about. (With 3 iterations and
    the run's tolerance it stopped unconverged, and a warm-up's "aatm did not converge in 3
    iterations" reached the demo's log through the ``warnings.catch_warnings`` that silenced
    it, which is not thread-safe; the pipeline's solves now pass ``warn=False`` instead.)"""
    return solver.model_copy(update={"max_iter": 3, "tol": WARMUP_TOL})


def warm_dn_blocks(solver: SolverConfig) -> None:
    """Solve one tiny masked block held as 10-bit DN as scene scope does
    (:class:`cloudcore.scene.Block` with ``max_dn``): the kernels' variants that read D as DN
    are compiled apart from the float ones.

    Parameters
    ----------
    solver
        The warm-up's solver (:func:`brief_solver`): its method, precision and stopping rule.
        Its solve converges; nothing here silences warnings (``warnings.catch_warnings`` in
        this thread would race the worker's tasks).
    """
    import numpy as np

    from cloudcore.scene import Block, BlockGroup, LocalShards, solve_blocks

    n, side, max_dn = 4, 64, 1023.0
    dn = np.random.default_rng(0).integers(0, int(max_dn) + 1, (n, side, side))
    stack = dn.astype(np.float32) / np.float32(max_dn)
    stack[1, :, : side // 4] = np.nan  # a partly observed date: the masked path and the refit
    block = Block(stack, solver.dtype, max_dn=max_dn)
    shards = LocalShards([BlockGroup([block], threads=1)])
    solve_blocks(
        shards,
        d=side * side,
        n=n,
        dtype=solver.dtype,
        method=solver.method,
        tol=solver.tol,
        max_iter=solver.max_iter,
        rho=solver.rho,
    )


class KernelWarmup(WorkerPlugin):
    """Worker plugin: :func:`warm_kernels` in a background thread when a worker starts.

    Parameters
    ----------
    solver
        The run's ``solver`` section.
    """

    name = "cloudremoval-kernel-warmup"

    def __init__(self, solver: SolverConfig) -> None:
        self.solver = solver

    def setup(self, worker: Any) -> None:
        # In a thread: the worker takes tasks (staging) meanwhile; a solve that comes first
        # simply waits on numba's own compiler lock.
        threading.Thread(target=self._warm, name="kernel-warmup", daemon=True).start()

    def _warm(self) -> None:
        try:
            seconds = warm_kernels(self.solver)
            log.debug("solver kernels ready in %.1f s", seconds)
        except Exception as exc:  # a failed warm-up costs only time: the solve compiles
            log.warning("warming up the solver kernels failed: %s", exc)
