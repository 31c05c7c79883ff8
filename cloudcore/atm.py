"""ATM, the paper's Alg. 1: the exact scattering model D = L∘(1 − C) + C, its ground found by an
accelerated proximal-gradient inner loop (:func:`atm_lowrank`). Called through
:func:`cloudcore.decompose` with ``method="atm"``."""

from __future__ import annotations

import math

import numpy as np

from cloudcore._memory import lazy_zeros_like
from cloudcore._problem import Problem
from cloudcore._schedule import MU_RANGE, Outcome, initial_state
from cloudcore.svt import svt

__all__ = ["atm_lowrank", "run_atm"]

# ATM's inner loop (Alg. 1): at most this many accelerated proximal-gradient steps per outer
# iteration, stopping when the inner objective changes by less than _INNER_TOL (absolute, as in
# the paper).
_INNER_MAX_ITER = 100
_INNER_TOL = 1e-3


def run_atm(
    problem: Problem, lam: float, norm_two: float, tol: float, max_iter: int, rho: float
) -> Outcome:
    """ATM, Alg. 1: exact scattering model D = L∘(1 − C) + C with box constraints.

    Two corrections to the printed algorithm (CONVENTIONS §2): the C step soft-thresholds the
    stationary point with magnitude (|b| − λ)/a, and the inner loop takes a proximal *gradient*
    step, L ← SVT_{1/μ}(W + (B − (1 − C)∘W)∘(1 − C)) with B = D − C + Y/μ, where the print shows
    only SVT_{1/μ}(W). The Lipschitz constant of the smooth part is max (1 − C)² ≤ 1 (ℓ_p = 1).
    """
    D, obs = problem.D, problem.obs
    Y, mu = initial_state(D, lam, norm_two)
    mu_max = mu * MU_RANGE
    d_norm = float(np.linalg.norm(D))
    L = np.zeros_like(D)
    C = np.zeros_like(D)
    observed = obs  # None: every entry observed (no mask arrays, no masking passes)
    res = math.inf
    it = 0
    while it < max_iter:
        it += 1
        R = D - L + Y / mu
        one_minus_l = 1.0 - L
        a = mu * one_minus_l**2
        # a = 0 where L = 1: the constraint holds for any C, take C = 0.
        safe = a > 0 if observed is None else (a > 0) & observed
        with np.errstate(divide="ignore", invalid="ignore"):
            stationary = np.where(safe, R / np.where(safe, one_minus_l, 1.0), 0.0)
            thr = np.where(safe, lam / np.where(safe, a, 1.0), np.inf)
        C = np.clip(np.sign(stationary) * np.maximum(np.abs(stationary) - thr, 0.0), 0.0, 1.0)
        C = C.astype(D.dtype, copy=False)
        L = atm_lowrank(D, C, L, Y, mu, observed)
        Z = _where_observed(observed, D - C - (1.0 - C) * L).astype(D.dtype, copy=False)
        Y = Y + mu * Z
        mu = min(mu * rho, mu_max)
        res = float(np.linalg.norm(Z)) / d_norm
        if res < tol:
            break
    return L, C, lazy_zeros_like(D), it, res  # ATM has no haze


def _where_observed(observed: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """``x`` on observed entries, 0 elsewhere (``observed`` None: all entries)."""
    return x if observed is None else np.where(observed, x, 0.0)


def atm_lowrank(
    D: np.ndarray,
    C: np.ndarray,
    L: np.ndarray,
    Y: np.ndarray,
    mu: float,
    observed: np.ndarray | None,
) -> np.ndarray:
    """ATM's inner loop (Alg. 1) for L: Nesterov-accelerated proximal-gradient steps from
    ``L``, then clipped to [0, 1].

    Parameters
    ----------
    D, C, L, Y
        The data, cloud, current ground and dual variable in the solvers' wide layout (dates ×
        pixels).
    mu
        The penalty μ of this outer iteration.
    observed
        Boolean, True where observed (None: every entry).

    Returns
    -------
    numpy.ndarray
        The new ground, after at most ``_INNER_MAX_ITER`` steps.
    """
    w = _where_observed(observed, 1.0 - C).astype(D.dtype, copy=False)
    B = _where_observed(observed, D - C + Y / mu).astype(D.dtype, copy=False)
    theta = theta_prev = 1.0
    L_prev = L
    f_prev, f = 0.0, math.inf
    k = 0
    while k < _INNER_MAX_ITER and abs(f - f_prev) > _INNER_TOL:
        W = L + (theta / theta_prev - theta) * (L - L_prev)
        L_prev = L
        L, nuclear = svt(W + (B - w * W) * w, 1.0 / mu)
        theta_prev = theta
        theta = (math.sqrt(theta**4 + 4 * theta**2) - theta**2) / 2
        f_prev = f
        f = 0.5 * mu * float(np.linalg.norm(B - w * L)) ** 2 + nuclear
        k += 1
    return np.clip(L, 0.0, 1.0)
