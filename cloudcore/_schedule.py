"""The inexact ALM's schedule shared by every solver: the starting dual and step μ₀ (the
reference's), and the outer loop that grows μ by ρ until the constraint's residual is below the
tolerance (:func:`alm_schedule`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cloudcore.svt import svt_weights

__all__ = ["MU_RANGE", "Outcome", "Step", "alm_schedule", "initial_scales", "initial_state"]

#: How far μ may grow above μ₀ (the reference's cap, μ_max = μ₀ · MU_RANGE).
MU_RANGE = 1e7

#: What a solver's iterations return: L, C, N, the iterations and the last residual.
Outcome = tuple[np.ndarray, np.ndarray, np.ndarray, int, float]


def initial_scales(norm_two: float, peak: float, lam: float) -> tuple[float, float]:
    """The divisor of D in Y₀ and μ₀ of the reference schedule, from ‖D‖₂ and ‖D‖_∞."""
    return max(norm_two, peak / lam), 1.25 / norm_two


def initial_state(
    D: np.ndarray, lam: float, norm_two: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Y₀ and μ₀ of the reference schedule; with per-entry ``weights`` on λ, Y₀ uses
    ‖D / weights‖_∞."""
    peak = float(np.abs(D if weights is None else D / weights).max())
    dual, mu = initial_scales(norm_two, peak, lam)
    return (D / dual).astype(D.dtype, copy=False), mu


#: One ALM step given the SVT weights W, μ, the haze factor μ/(β+μ) and the next μ: it updates
#: the iterates and returns the Gram matrix of the next L and ‖D − L − C − N‖²_F.
Step = Callable[[np.ndarray, float, float, float], tuple[np.ndarray, float]]


def alm_schedule(
    gram: np.ndarray,
    mu: float,
    d_norm: float,
    step: Step,
    *,
    beta: float | None,
    tol: float,
    max_iter: int,
    rho: float,
    advance: Callable[[], None] | None = None,
) -> tuple[int, float]:
    """The outer loop of the fused inexact ALM: SVT weights from the Gram matrix, μ growing by
    ``rho`` up to its cap, stop at ‖D − L − C − N‖_F / ‖D‖_F < tol or ``max_iter``.

    ``step`` does the element-wise work (one fused kernel in memory, one per block in
    :mod:`cloudcore.scene`); ``advance`` runs after each step that does not stop the loop.
    Returns the iterations and the last residual.
    """
    mu_max = mu * MU_RANGE
    res = math.inf
    it = 0
    while it < max_iter:
        it += 1
        W, _ = svt_weights(gram, 1.0 / mu)
        n_factor = mu / (beta + mu) if beta is not None else 0.0
        mu_next = min(mu * rho, mu_max)
        gram, z2 = step(W, mu, n_factor, mu_next)
        mu = mu_next
        res = math.sqrt(z2) / d_norm
        if res < tol:
            break
        if advance is not None:
            advance()
    return it, res
