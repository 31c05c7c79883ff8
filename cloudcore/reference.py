"""Literal NumPy ports of the reference solvers, with full SVDs: the public oracle.

Slow on purpose: they follow the reference code line by line (CONVENTIONS §2) and serve as the
readable oracle for tests and as the "literal port" row of ``benchmarks/solvers.py``. Use
:func:`cloudcore.decompose` for real work.
"""

from __future__ import annotations

import numpy as np

__all__ = ["literal_alm"]


def _shrink(x: np.ndarray, t: float) -> np.ndarray:
    """Soft thresholding: the proximal operator of t‖·‖₁."""
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def _svt_full(x: np.ndarray, tau: float) -> np.ndarray:
    """Singular value thresholding by a full thin SVD (the reference's way)."""
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    return (u * np.maximum(s - tau, 0.0)) @ vt


def literal_alm(
    D: np.ndarray,
    lam: float,
    *,
    method: str = "aatm",
    beta: float = 1.0,
    tol: float = 1e-7,
    max_iter: int = 1000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Inexact ALM for aATM (Alg. 2), RPCA (eq. 1) or non-negative RPCA, as the reference runs them.

    Parameters
    ----------
    D
        Observed matrix (d, n), values in [0, 1]; no mask, no NaN.
    lam
        Sparsity weight λ.
    method
        ``"aatm"``, ``"rpca"`` or ``"nnrpca"`` (ATM has no literal port).
    beta
        Haze weight β (aATM only).
    tol, max_iter
        Stop when ‖D − L − C − N‖_F / ‖D‖_F < tol or after ``max_iter`` iterations.

    Returns
    -------
    tuple
        ``(L, C, N, iterations)``; the arrays have the shape of ``D``.
    """
    norm_two = float(np.linalg.norm(D, 2))
    Y = D / max(norm_two, float(np.abs(D).max()) / lam)
    mu = 1.25 / norm_two
    mu_max = mu * 1e7
    rho = 1.5
    d_norm = float(np.linalg.norm(D))
    L = np.zeros_like(D)
    C = np.zeros_like(D)
    N = np.zeros_like(D)
    it = 0
    while it < max_iter:
        it += 1
        C = _shrink(D - L - N + Y / mu, lam / mu)
        if method in ("aatm", "nnrpca"):
            C = np.clip(C, 0.0, 1.0)
        L = _svt_full(D - C - N + Y / mu, 1.0 / mu)
        if method == "aatm":
            N = mu / (beta + mu) * (D - L - C + Y / mu)
        Z = D - L - C - N
        Y = Y + mu * Z
        mu = min(mu * rho, mu_max)
        if np.linalg.norm(Z) / d_norm < tol:
            break
    return L, C, N, it
