"""Low-rank + sparse decompositions of a (pixels × dates) matrix: aATM, ATM, RPCA, NN-RPCA.

All solvers share the inexact-ALM schedule of the reference code (CONVENTIONS §2): Y₀ = D /
max(‖D‖₂, ‖D‖_∞/λ), μ₀ = 1.25/‖D‖₂, μ ← min(ρμ, 10⁷μ₀) with ρ = ``rho`` (the paper's 1.5 by
default), stop when ‖Z‖_F/‖D‖_F < tol (:mod:`cloudcore._schedule`; ATM in :mod:`cloudcore.atm`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from cloudcore import _kernels
from cloudcore._checks import check_positive, check_stopping
from cloudcore._growth import resolve_growth
from cloudcore._memory import lazy_zeros_like
from cloudcore._problem import Problem, numba_threads, prepare, spectral_norm, zero_result
from cloudcore._schedule import Outcome, alm_schedule, initial_state
from cloudcore.atm import run_atm
from cloudcore.catalog import HAZE_METHODS, METHODS, SHADOW_METHODS, SHADOW_WEIGHT, Method
from cloudcore.lam import lambda_default
from cloudcore.refit import refit_partial_columns
from cloudcore.result import ConvergenceWarning, Decomposition

__all__ = [
    "HAZE_METHODS",
    "METHODS",
    "SHADOW_METHODS",
    "SHADOW_WEIGHT",
    "Method",
    "SparseRule",
    "decompose",
    "sparse_rule",
]


class SparseRule(NamedTuple):
    """The sparse step's rule in the ALM kernels: shrink positive values by λ/μ and negative
    ones by ``neg``·λ/μ, then (if ``clip``) clip to [``floor``, 1]."""

    clip: bool
    floor: float
    neg: float


def sparse_rule(method: str, shadow_weight: float = SHADOW_WEIGHT) -> SparseRule:
    """The sparse step of ``method``.

    aATM and NN-RPCA keep the cloud C in [0, 1]; RPCA's sparse part is unbounded. The shadow
    model D = L + C − S + N with C, S in [0, 1] and the penalty λ(‖C‖₁ + κ‖S‖₁) solves for the
    signed part E = C − S in [−1, 1]: only E enters the constraint, and for a given E the
    penalty is least with C = E⁺ and S = E⁻, so the sparse step is a soft threshold by λ/μ
    above and κλ/μ below, clipped to [−1, 1] (docs/CONVENTIONS.md §9). κ > 1 keeps a dark
    ground from being explained as a shadow under a brighter low-rank fit.
    """
    if method in ("aatm", "nnrpca"):
        return SparseRule(True, 0.0, 1.0)
    if method in SHADOW_METHODS:
        return SparseRule(True, -1.0, float(shadow_weight))
    return SparseRule(False, 0.0, 1.0)


# float32 entries carry ~6e-8 relative rounding, so ‖Z‖/‖D‖ cannot be driven much below ~1e-7 in
# float32: the constraint residual is floored here for float32 input (docs/CLOUDCORE.md,
# "float32 input").
FLOAT32_TOL_FLOOR = 1e-6


def decompose(
    D: ArrayLike,
    method: str = "aatm",
    *,
    lam: float | None = None,
    beta: float = 1.0,
    tol: float = 1e-7,
    max_iter: int = 1000,
    mask: ArrayLike | None = None,
    threads: int | None = None,
    shadow_weight: float = SHADOW_WEIGHT,
    refit: bool = True,
    warn: bool = True,
    rho: float | None = None,
) -> Decomposition:
    """Split a scene-series matrix into ground, cloud and haze.

    Parameters
    ----------
    D
        Observed matrix of shape (d, n): one row per pixel, one column per date, values in [0, 1]
        (DN divided by the sensor's maximum DN). float32 input is solved in float32 (Gram matrices
        in float64); anything else in float64.
    method
        ``"aatm"`` (D = L + C + N, Alg. 2, the default), ``"aatm-shadow"`` (D = L + C − S + N:
        aATM with a shadow layer S in [0, 1] for dark sparse anomalies, see :func:`sparse_rule`),
        ``"atm"`` (D = L∘(1 − C) + C, Alg. 1), ``"rpca"`` (D = L + C) or ``"nnrpca"`` (RPCA with C
        clamped to [0, 1]).
    lam
        Sparsity weight λ. Default 1/√d with d the number of rows of ``D`` as given, pixels
        observed on no date included (1/√max(d, n) if d < n).
    beta
        Haze weight β of aATM and aATM-shadow (ignored by the other methods); must be > 0.
    tol
        Stop when ‖D − L − C − N‖_F / ‖D‖_F < tol. For float32 input the effective tolerance is
        ``max(tol, FLOAT32_TOL_FLOOR)``, since float32 rounding floors the residual near 1e-7.
    max_iter
        Iteration limit; reaching it without convergence emits a :class:`ConvergenceWarning`.
    mask
        Boolean (d, n), True where observed. Only observed entries are fitted; the others are
        filled from the low-rank part (C = N = 0 there). Rows observed on no date come back NaN.
    threads
        numba threads for this call (None: numba's current setting).
    shadow_weight
        κ of ``"aatm-shadow"``: the shadow layer's ℓ1 weight relative to the cloud's
        (:func:`sparse_rule`); ignored by the other methods.
    refit
        With a mask, refit the dates observed on some pixels only (:mod:`cloudcore.refit`):
        without the refit the ALM returns them biased dark (issue #14). False is for studies of
        that bias; it changes nothing without a mask.
    warn
        Emit the :class:`ConvergenceWarning` when ``max_iter`` is reached (``converged`` on the
        result says so either way). False is for callers that record convergence themselves
        and solve in threads: silencing the warning with ``warnings.catch_warnings`` instead is
        not thread-safe (each thread's exit restores the filters it saw on entry).
    rho
        The growth of the ALM's step μ per iteration, > 1. None: the paper's 1.5
        (:data:`cloudcore._growth.PAPER_RHO`, unless a study changed it for a while with
        :func:`cloudcore._growth.mu_growth`). A larger ρ stops in fewer iterations and is a
        different solve (docs/PERFORMANCE.md, "The ALM's growth ρ").

    Returns
    -------
    Decomposition
        ``L``, ``C``, ``N`` (and ``S`` for ``"aatm-shadow"``) in the input precision, plus
        iterations, convergence and λ.

    Raises
    ------
    ValueError
        On an unknown method, bad parameters, fewer than 2 dates or pixels, NaN/inf without a mask,
        or observed values outside [0, 1].
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    check_positive(beta, "beta")
    check_positive(shadow_weight, "shadow_weight")
    check_stopping(tol, max_iter)
    rho = resolve_growth(rho)  # checked before any work
    problem = prepare(D, mask)
    lam = lambda_default(max(problem.shape[0], problem.shape[1])) if lam is None else float(lam)
    check_positive(lam, "lam")
    iterate: Callable[..., Outcome]
    if method == "atm":
        iterate = partial(run_atm, problem, lam)
    else:
        iterate = partial(
            run_alm,
            problem,
            lam,
            sparse=sparse_rule(method, shadow_weight),
            beta=beta if method in HAZE_METHODS else None,
        )
    if problem.obs is not None:
        iterate = partial(_debiased, iterate, problem, method, lam, beta, shadow_weight, refit)
    return solve(problem, method, lam, tol, max_iter, threads, iterate, warn=warn, rho=rho)


def solve(
    problem: Problem,
    method: str,
    lam: float,
    tol: float,
    max_iter: int,
    threads: int | None,
    iterate: Callable[..., Outcome],
    *,
    rho: float,
    warn: bool = True,
) -> Decomposition:
    """Run a solver on a validated problem and package its result (shared by every method).

    ``iterate(norm_two, tol=…, max_iter=…, rho=…)`` runs the iterations with ``rho``, the growth
    the caller resolved and checked (:func:`cloudcore._growth.resolve_growth`, before any
    work). This applies the float32 tolerance floor, the defined answer for ‖D‖₂ = 0, the
    thread setting and the convergence warning (unless ``warn`` is False).
    """
    if problem.D.dtype == np.float32:
        tol = max(tol, FLOAT32_TOL_FLOOR)
    norm_two = spectral_norm(problem.D)
    if norm_two == 0.0:
        return zero_result(problem, lam, method)
    with numba_threads(threads):
        L, C, N, it, res = iterate(norm_two, tol=tol, max_iter=max_iter, rho=rho)
    converged = res < tol
    if warn and not converged:
        warnings.warn(
            f"{method} did not converge in {max_iter} iterations (residual {res:.2e} > tol "
            f"{tol:.0e}); raise max_iter or check λ = {lam:.3g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    S = split_shadow(C) if method in SHADOW_METHODS else None
    # One at a time, each internal array let go once mapped: expand copies where rows observed
    # on no date were dropped, and all of them at once would double the solve's memory.
    L = problem.expand(L)
    C = problem.expand(C)
    N = problem.expand(N)
    S = problem.expand(S) if S is not None else None
    return Decomposition(
        L=L,
        C=C,
        N=N,
        S=S,
        iterations=it,
        converged=converged,
        residual=res,
        lam=lam,
        method=method,
    )


def split_shadow(E: np.ndarray) -> np.ndarray:
    """Split the signed sparse part E = C − S of the shadow model in place: E becomes C = E⁺;
    returns S = E⁻ (a new array; NaN stays NaN in both)."""
    S = np.negative(np.minimum(E, 0))
    np.maximum(E, 0, out=E)
    return S


def _debiased(
    iterate: Callable[..., Outcome],
    problem: Problem,
    method: str,
    lam: float,
    beta: float,
    shadow_weight: float,
    refit: bool,
    norm_two: float,
    **stopping: Any,
) -> Outcome:
    """``iterate``, then :func:`_debias` of its result: what :func:`decompose` runs with a mask."""
    L, C, N, it, res = iterate(norm_two, **stopping)
    _debias(problem, L, C, N, method, lam, beta, shadow_weight, refit)
    return L, C, N, it, res


def _debias(
    problem: Problem,
    L: np.ndarray,
    C: np.ndarray,
    N: np.ndarray,
    method: str,
    lam: float,
    beta: float,
    shadow_weight: float = SHADOW_WEIGHT,
    refit: bool = True,
) -> None:
    """Refit the partly observed dates of a masked solve in place (unless not ``refit``); NaN
    for dates seen nowhere.

    The arrays are in the internal layout; the refit works on (pixels, dates) views of them.
    """
    assert problem.obs is not None
    views = [x.T if problem.transposed else x for x in (problem.D, problem.obs, L, C, N)]
    D_, obs_, L_, C_, N_ = views
    if refit:
        empty = refit_partial_columns(
            D_, obs_, L_, C_, N_, method=method, lam=lam, beta=beta, shadow_weight=shadow_weight
        )
    else:
        empty = np.asarray(obs_.sum(axis=0) == 0)  # what the refit returns: dates seen nowhere
    for x in (L_, C_, N_):
        x[:, empty] = np.nan


def run_alm(
    problem: Problem,
    lam: float,
    norm_two: float,
    *,
    sparse: SparseRule,
    beta: float | None,
    tol: float,
    max_iter: int,
    rho: float | None = None,
    weights: np.ndarray | None = None,
    start: tuple[np.ndarray, int] | None = None,
) -> Outcome:
    """Fused inexact ALM shared by aATM (``beta`` set), aATM-shadow, RPCA, NN-RPCA and weighted
    RPCA (MC).

    ``sparse`` is the sparse step's rule (:func:`sparse_rule`); ``weights`` (same shape as D)
    scales λ per entry; Y₀ then uses ‖D / weights‖_∞. ``rho``: μ's growth per iteration
    (None: :func:`cloudcore._growth.growth`). ``start`` (a ground L₀ in the internal
    layout, and j) starts from L₀ with μ₀ advanced j steps of the schedule, a warm start that
    ``benchmarks/warm_start.py`` measures and no solver uses (docs/PERFORMANCE.md).
    """
    D, obs = problem.D, problem.obs
    rho = resolve_growth(rho)
    dtype = D.dtype
    weighted = weights is not None
    dummy = np.zeros((1, 1), dtype=dtype)
    obs_arr = obs if obs is not None else np.ones((1, 1), dtype=np.bool_)
    w_arr = weights.astype(dtype, copy=False) if weights is not None else dummy
    Y, mu = initial_state(D, lam, norm_two, weights)
    L = np.zeros_like(D) if start is None else np.array(start[0], dtype=dtype, order="C")
    if start is not None:
        mu *= rho ** start[1]
    # The RPCA variants (n_factor = 0) never write N: its pages stay the system's zero page.
    N = lazy_zeros_like(D)
    C = [np.zeros_like(D), np.empty_like(D)]  # this iterate and the next; swapped per step
    masked = obs is not None
    gram = _kernels.first_sparse_step(
        D, _kernels.AS_STORED, L, Y, C[0], obs_arr, w_arr, masked, weighted, lam, 1.0 / mu, *sparse
    )

    def step(W: np.ndarray, mu: float, n_factor: float, mu_next: float) -> tuple[np.ndarray, float]:
        # The kernel reads this C and writes the next one: C.reverse swaps them between steps.
        return _kernels.fused_step(
            D,
            _kernels.AS_STORED,
            C[0],
            C[1],
            N,
            Y,
            L,
            obs_arr,
            w_arr,
            W,
            masked,
            weighted,
            *sparse,
            lam,
            mu,
            n_factor,
            mu_next,
        )

    it, res = alm_schedule(
        gram,
        mu,
        float(np.linalg.norm(D)),
        step,
        beta=beta,
        tol=tol,
        max_iter=max_iter,
        rho=rho,
        advance=C.reverse,
    )
    return L, C[0], N, it, res
