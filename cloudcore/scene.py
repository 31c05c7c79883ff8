"""The exact ALM of one matrix held in row blocks (tiles) that never meet: scene scope.

Every step of aATM (and RPCA, NN-RPCA) is element-wise except the SVT, and the SVT of the
d × n matrix needs only its n × n Gram matrix (:mod:`cloudcore.svt`), which is the sum of the
blocks' Gram matrices. ‖D‖₂ (from that Gram matrix), ‖D‖_∞, ‖D‖_F and the residual ‖Z‖_F are
reductions too. So :func:`solve_blocks` runs the schedule of :func:`cloudcore.decompose`
(``solvers.run_alm``) on blocks that live anywhere: one iteration is the fused kernel of
:mod:`cloudcore._kernels` on every block where it lives, a sum of n × n float64 numbers plus one
scalar, and a broadcast of the n × n SVT weights W. The blocks never move.

Where the blocks live is behind :class:`Shards`: ``map(method, *args)`` calls one method of
:class:`BlockGroup` on every shard and returns the answers in shard order. :class:`LocalShards`
holds the groups in this process (tests, benchmarks); the pipeline's Dask actors are another
(:mod:`pipeline.solve.scene_scope`). Each group sums its blocks' reductions in float64 in block
order, and the driver sums the groups' in shard order, so the result does not depend on timing.

The result equals :func:`cloudcore.decompose` of the whole matrix up to float64 summation order
in the Gram matrices and norms (the kernels' arithmetic on each pixel is the same code): the
iterations agree to an ulp or two in float32 (often bit for bit), with the same count; the refit
of partly observed dates to a few of its IRLS floor, 1e-6 (``tests/cloudcore/tolerances.py``).

A masked solve ends with the refit of partly observed dates, as decompose does; its block-wise
form is :mod:`cloudcore.scene_refit`.

Memory per block: L, C, C_next, N, Y in the solver precision, D in it too or, where the values
are DN / max_dn (``max_dn`` given, float32 and every observed value read back bit for bit),
as the 16-bit DN it came from, plus the boolean mask where a date is missing: 6·itemsize + 1
bytes per pixel and date (25 in float32, 49 in float64), 23 in float32 with D as DN.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from cloudcore import _kernels
from cloudcore._checks import check_positive, check_stopping
from cloudcore._dn import dn_values, values_of_dn
from cloudcore._growth import resolve_growth
from cloudcore._memory import lazy_zeros_like
from cloudcore._problem import RANGE_SLACK, numba_threads
from cloudcore._schedule import alm_schedule, initial_scales
from cloudcore.catalog import HAZE_METHODS, SCENE_METHODS, SHADOW_WEIGHT
from cloudcore.lam import lambda_default
from cloudcore.result import ConvergenceWarning
from cloudcore.scene_refit import BlockRefit, GroupRefit, refit_blocks
from cloudcore.solvers import FLOAT32_TOL_FLOOR, SparseRule, sparse_rule, split_shadow
from cloudcore.svt import sum_grams

__all__ = [
    "SCENE_METHODS",
    "Block",
    "BlockGroup",
    "LocalShards",
    "SceneOutcome",
    "Shards",
    "bytes_per_entry",
    "dn_values",
    "solve_blocks",
]


def bytes_per_entry(dtype: str | np.dtype[Any], dn: bool = False) -> int:
    """Bytes of solver state per pixel and date: D (2 bytes with ``dn``, D held as 16-bit DN),
    L, C, C_next, N, Y and the mask."""
    size = np.dtype(dtype).itemsize
    return 5 * size + (2 if dn else size) + 1


class Block(BlockRefit):
    """One block (tile) of the matrix and its solver state, dates × pixels as the kernels want.

    Parameters
    ----------
    stack
        Observations of the block, shape ``(n, ...)``: one leading axis of dates, the pixels in
        the trailing axes (``(n, h, w)`` for a tile, flattened in C order). NaN where a date was
        not observed. Observed values must lie in [0, 1].
    dtype
        Solver precision, ``float32`` or ``float64``.
    origin
        (row, column) of the block's first pixel in the scene: the refit of partly observed
        dates samples pixels in the scene's row-major order.
    max_dn
        None, or the DN scale of the values (value = DN / max_dn): in float32 D is then held
        as uint16 DN (2 bytes an entry instead of 4) where every observed value reads back bit
        for bit (:func:`dn_values`); the kernels divide it back
        (``cloudcore._kernels.block_values``), so the solve is the same bit for bit.
    """

    def __init__(
        self,
        stack: ArrayLike,
        dtype: str | np.dtype[Any] = "float32",
        origin: tuple[int, int] = (0, 0),
        max_dn: float | None = None,
    ) -> None:
        a = np.asarray(stack)
        self.origin = (int(origin[0]), int(origin[1]))
        if a.ndim < 2:
            raise ValueError(f"a block needs (dates, pixels...) axes, got shape {a.shape}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        self.frame_shape: tuple[int, ...] = a.shape[1:]
        x = a.reshape(a.shape[0], -1)
        obs = np.isfinite(x)
        values = x[obs]
        self.n, self.d = x.shape
        self.empty = not values.size
        low, high = (values.min(), values.max()) if values.size else (0.0, 0.0)
        if low < -RANGE_SLACK or high > 1 + RANGE_SLACK:
            raise ValueError(
                f"block has values in [{low:.4g}, {high:.4g}], outside [0, 1]; "
                "divide by the sensor's maximum DN first"
            )
        # max |D| in the solver precision (rounding is monotonic; unobserved entries are 0).
        self.peak = float(max(self.dtype.type(high), -self.dtype.type(low)))
        self.seen = obs.any(axis=0)  # pixels observed on some date (the others come back NaN)
        self.date_counts = obs.sum(axis=1)  # observed pixels per date
        # An all-observed block is solved unmasked, as decompose does with an all-True mask.
        self.obs: np.ndarray | None = None if obs.all() else np.ascontiguousarray(obs)
        if self.empty:  # nothing to solve: no state (its layers are NaN)
            self.obs = None
            x, obs = np.zeros((self.n, 0)), np.zeros((self.n, 0), np.bool_)
        dn = None
        if max_dn is not None and self.dtype == np.float32 and not self.empty:
            dn = dn_values(x, obs, max_dn)
        if dn is None:
            self.D = np.ascontiguousarray(np.where(obs, x, 0.0), dtype=self.dtype)
            self.div = _kernels.AS_STORED
        else:
            self.D, self.div = np.ascontiguousarray(dn), np.float32(max_dn)
        # The kernels' arguments for "no mask" and "no per-entry weights on λ".
        self._obs_arg = self.obs if self.obs is not None else np.ones((1, 1), np.bool_)
        self._no_weights = np.zeros((1, 1), self.dtype)
        self.L = self.C = self.C_next = self.N = self.Y = np.empty((0, 0), self.dtype)
        self._swap_pending = False
        self._basis = None  # the refit's rows of its basis (cloudcore.scene_refit)
        self._k = 0

    def values(self, D: np.ndarray | None = None) -> np.ndarray:
        """D (or ``D``, some of its entries) in the solver precision: the DN divided back."""
        D = self.D if D is None else D
        return D if D.dtype == self.dtype else values_of_dn(D, float(self.div))

    @property
    def nbytes(self) -> int:
        """Bytes of the state arrays this block holds now."""
        arrays = (self.D, self.L, self.C, self.C_next, self.N, self.Y, self.obs, self._basis)
        return sum(x.nbytes for x in arrays if x is not None)

    def stats(self) -> Stats:
        """Gram(D) (float64), max |D|, Σ D² (float64), observed pixels per date, pixels observed
        on some date, and whether any entry is missing."""
        masked = self.obs is not None
        if self.empty:
            zeros = np.zeros((self.n, self.n))
            return Stats(zeros, 0.0, 0.0, self.date_counts, 0, self.d > 0)
        gram = _kernels.gram(self.D, self.div)  # its trace is Σ D², summed in float64
        seen = int(self.seen.sum())
        return Stats(gram, self.peak, float(np.trace(gram)), self.date_counts, seen, masked)

    def start(self, lam: float, dual: float, mu: float, sparse: SparseRule) -> np.ndarray:
        """Y₀ = D / dual, L = C = N = 0, the sparse step of iteration 1; returns its Gram part."""
        if self.empty:
            return np.zeros((self.n, self.n))
        D = self.D
        self.Y = (self.values() / dual).astype(self.dtype, copy=False)
        # The RPCA variants never write N (cloudcore._memory).
        self.L, self.C = np.zeros_like(self.Y), np.zeros_like(self.Y)
        self.N = lazy_zeros_like(self.Y)
        self.C_next = np.empty_like(self.Y)
        self._swap_pending = False
        return _kernels.first_sparse_step(
            D,
            self.div,
            self.L,
            self.Y,
            self.C,
            self._obs_arg,
            self._no_weights,
            self.obs is not None,
            False,
            lam,
            1.0 / mu,
            *sparse,
        )

    def step(
        self,
        W: np.ndarray,
        lam: float,
        mu: float,
        n_factor: float,
        mu_next: float,
        sparse: SparseRule,
    ) -> tuple[np.ndarray, float]:
        """The rest of iteration k and the sparse step of k + 1 (one fused pass); returns this
        block's Gram(A_{k+1}) and ‖Z_k‖²."""
        if self.empty:
            return np.zeros((self.n, self.n)), 0.0
        if self._swap_pending:
            self.C, self.C_next = self.C_next, self.C
        gram, z2 = _kernels.fused_step(
            self.D,
            self.div,
            self.C,
            self.C_next,
            self.N,
            self.Y,
            self.L,
            self._obs_arg,
            self._no_weights,
            W,
            self.obs is not None,
            False,
            *sparse,
            lam,
            mu,
            n_factor,
            mu_next,
        )
        self._swap_pending = True
        return gram, float(z2)

    def finish(self, converged: bool) -> None:
        """End the iterations as decompose does: a converged run keeps the C that pairs with L
        and N; one stopped by ``max_iter`` has already moved on to C of the next iteration."""
        if self._swap_pending and not converged:
            self.C, self.C_next = self.C_next, self.C
        self._swap_pending = False
        self.C_next = np.empty((0, 0), self.dtype)  # no longer needed

    def zero(self) -> None:
        """The defined answer for ‖D‖₂ = 0: L = C = N = 0."""
        self.L, self.C, self.N = (np.zeros(self.D.shape, self.dtype) for _ in range(3))

    def layers(self, shadow: bool = False) -> tuple[np.ndarray, ...]:
        """Ground (L clipped to [0, 1]), C and N, and with ``shadow`` (the shadow model) S split
        from the signed sparse part, each ``(n, *frame_shape)``, NaN at pixels observed on no
        date (as :func:`cloudcore.decompose` returns them)."""
        shape = (self.n, *self.frame_shape)
        count = 4 if shadow else 3
        if self.empty:
            return tuple(np.full(shape, np.nan, self.dtype) for _ in range(count))
        out = [np.clip(self.L, 0.0, 1.0), self.C.copy(), self.N.copy()]  # new arrays
        if shadow:
            out.append(split_shadow(out[1]))
        if not self.seen.all():
            for y in out:
                y[:, ~self.seen] = np.nan
        return tuple(y.reshape(shape) for y in out)

    def release(self) -> None:
        """Drop the solver state (after the layers are written)."""
        for name in ("D", "L", "C", "C_next", "N", "Y"):
            setattr(self, name, np.empty((0, 0), self.dtype))
        self.obs = None
        self._obs_arg = np.ones((1, 1), np.bool_)


class BlockGroup(GroupRefit):
    """Blocks held in one place (a worker), called together: one answer per call for all of
    them, reductions summed in float64 in block order.

    ``threads`` numba threads run each kernel call (None: numba's current setting).
    ``seconds`` counts the time spent in the calls by phase (``setup``, ``step``: the
    iterations, ``refit``): the bare compute, for benchmarks.
    """

    def __init__(self, blocks: Sequence[Block], threads: int | None = None) -> None:
        self.blocks = list(blocks)
        self.threads = threads
        self.seconds: dict[str, float] = {}

    def _each(self, fn: Any, phase: str = "refit") -> list[Any]:
        started = time.perf_counter()
        with numba_threads(self.threads):
            out = [fn(b) for b in self.blocks]
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started
        return out

    def nbytes(self) -> int:
        """Bytes of solver state held by the group's blocks now."""
        return sum(b.nbytes for b in self.blocks)

    def stats(self) -> Stats:
        """The blocks' :meth:`Block.stats`, reduced."""
        return _reduce_stats(self._each(Block.stats, "setup"))

    def start(self, lam: float, dual: float, mu: float, sparse: SparseRule) -> np.ndarray:
        return sum_grams(self._each(lambda b: b.start(lam, dual, mu, sparse), "setup"))

    def step(
        self,
        W: np.ndarray,
        lam: float,
        mu: float,
        n_factor: float,
        mu_next: float,
        sparse: SparseRule,
    ) -> tuple[np.ndarray, float]:
        parts = self._each(lambda b: b.step(W, lam, mu, n_factor, mu_next, sparse), "step")
        return sum_grams([p[0] for p in parts]), math.fsum(p[1] for p in parts)

    def finish(self, converged: bool) -> None:
        self._each(lambda b: b.finish(converged))

    def zero(self) -> None:
        self._each(Block.zero, "setup")

    def timing(self) -> dict[str, float]:
        """Seconds spent in calls so far, by phase."""
        return dict(self.seconds)


@dataclass(frozen=True)
class Stats:
    """What the solver needs to know of D before iterating (see :meth:`Block.stats`)."""

    gram: np.ndarray
    peak: float
    sumsq: float
    date_counts: np.ndarray
    seen: int
    masked: bool


def _reduce_stats(parts: Sequence[Stats]) -> Stats:
    return Stats(
        gram=sum_grams([p.gram for p in parts]),
        peak=max((p.peak for p in parts), default=0.0),
        sumsq=math.fsum(p.sumsq for p in parts),
        date_counts=np.asarray(np.sum([p.date_counts for p in parts], axis=0, dtype=np.int64)),
        seen=sum(p.seen for p in parts),
        masked=any(p.masked for p in parts),
    )


class Shards(Protocol):
    """Where the block groups live: ``map`` calls a :class:`BlockGroup` method on every group
    (concurrently where they are remote) and returns the answers in a fixed shard order."""

    def map(self, method: str, *args: Any) -> list[Any]: ...


class LocalShards:
    """Block groups in this process, called one after the other."""

    def __init__(self, groups: Sequence[BlockGroup]) -> None:
        self.groups = list(groups)

    def map(self, method: str, *args: Any) -> list[Any]:
        return [getattr(g, method)(*args) for g in self.groups]


@dataclass(frozen=True)
class SceneOutcome:
    """How the block-wise solve went (the layers stay in the blocks, where they were solved).

    ``seconds_per_iteration`` is the wall time of the iterations (kernel passes, reductions,
    SVT weights, communication) divided by their number; ``setup_seconds`` the time of the
    statistics and the first sparse step; ``refit_seconds`` the time of the refit of partly
    observed dates (masked problems only) and ``refit_rounds`` its calls to the shards.
    """

    iterations: int
    converged: bool
    residual: float
    lam: float
    method: str
    norm_two: float
    seconds_per_iteration: float
    setup_seconds: float
    refit_seconds: float = 0.0
    refit_rounds: int = 0


def solve_blocks(
    shards: Shards,
    *,
    d: int,
    n: int,
    dtype: str | np.dtype[Any] = "float32",
    method: str = "aatm",
    lam: float | None = None,
    beta: float = 1.0,
    tol: float = 1e-7,
    max_iter: int = 1000,
    shadow_weight: float = SHADOW_WEIGHT,
    refit: bool = True,
    warn: bool = True,
    rho: float | None = None,
) -> SceneOutcome:
    """Solve the matrix held by ``shards`` exactly as :func:`cloudcore.decompose` solves it whole.

    Parameters
    ----------
    shards
        The block groups (:class:`LocalShards`, or remote ones with the same ``map``).
    d, n
        Pixels (rows of the whole matrix, pixels observed on no date included) and dates.
    dtype
        The blocks' precision: float32 floors ``tol`` at :data:`FLOAT32_TOL_FLOOR` as decompose
        does.
    method, lam, beta, tol, max_iter, shadow_weight, rho
        As in :func:`cloudcore.decompose`; λ defaults to 1/√d. Methods: :data:`SCENE_METHODS`.
    refit
        As in :func:`cloudcore.decompose`: refit the partly observed dates of a masked matrix
        (:mod:`cloudcore.scene_refit`); False leaves them as the ALM returns them.
    warn
        As in :func:`cloudcore.decompose`: False does not warn at ``max_iter`` (``converged``
        on the outcome says so either way).

    Returns
    -------
    SceneOutcome
        Iterations, convergence, residual, λ. The layers are in the blocks
        (:meth:`Block.layers`). A run that stops at ``max_iter`` warns with
        :class:`ConvergenceWarning` (unless ``warn`` is False), as decompose does.
    """
    if method not in SCENE_METHODS:
        raise ValueError(
            f"method {method!r} has no block-wise solver; choose one of {', '.join(SCENE_METHODS)}"
        )
    if n < 2 or d < n:
        raise ValueError(f"solve_blocks needs n ≥ 2 dates and d ≥ n pixels, got d={d}, n={n}")
    check_positive(beta, "beta")
    check_stopping(tol, max_iter)
    rho = resolve_growth(rho)
    lam = lambda_default(d) if lam is None else float(lam)
    check_positive(lam, "lam")
    if np.dtype(dtype) == np.float32:
        tol = max(tol, FLOAT32_TOL_FLOOR)
    sparse = sparse_rule(method, shadow_weight)
    n_beta = beta if method in HAZE_METHODS else None
    started = time.perf_counter()
    stats = _reduce_stats(shards.map("stats"))
    gram, peak, d_norm = stats.gram, stats.peak, math.sqrt(stats.sumsq)
    norm_two = float(np.sqrt(max(np.linalg.eigvalsh(gram)[-1], 0.0))) if gram.size else 0.0
    if norm_two == 0.0:
        shards.map("zero")
        return SceneOutcome(0, True, 0.0, lam, method, 0.0, 0.0, time.perf_counter() - started)
    # The schedule of solvers.run_alm (_schedule.alm_schedule), each step done on every block
    # and reduced here.
    dual, mu = initial_scales(norm_two, peak, lam)
    gram = sum_grams(shards.map("start", lam, dual, mu, sparse))
    setup = time.perf_counter() - started
    started = time.perf_counter()

    def step(W: np.ndarray, mu: float, n_factor: float, mu_next: float) -> tuple[np.ndarray, float]:
        parts = shards.map("step", W, lam, mu, n_factor, mu_next, sparse)
        return sum_grams([p[0] for p in parts]), math.fsum(p[1] for p in parts)

    it, res = alm_schedule(gram, mu, d_norm, step, beta=n_beta, tol=tol, max_iter=max_iter, rho=rho)
    converged = res < tol
    shards.map("finish", converged)
    per_iteration = (time.perf_counter() - started) / max(it, 1)
    refit_started, rounds = time.perf_counter(), 0
    if stats.masked:
        rounds = refit_blocks(shards, stats, method, lam, beta, shadow_weight, refit)
    refit_seconds = time.perf_counter() - refit_started
    if warn and not converged:
        warnings.warn(
            f"{method} did not converge in {max_iter} iterations (residual {res:.2e} > tol "
            f"{tol:.0e}); raise max_iter or check λ = {lam:.3g}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return SceneOutcome(
        it, converged, res, lam, method, norm_two, per_iteration, setup, refit_seconds, rounds
    )
