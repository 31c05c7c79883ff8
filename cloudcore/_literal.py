"""Literal NumPy ports of the reference solvers, with full SVDs.

Slow on purpose: they follow the reference code line by line (SPEC-NOTES §2) and serve as the
readable oracle for tests and as the "literal port" row of ``benchmarks/solvers.py``. Use
:func:`cloudcore.decompose` for real work.
"""

from __future__ import annotations

import numpy as np


def _shrink(x: np.ndarray, t: float) -> np.ndarray:
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def _svt_full(x: np.ndarray, tau: float) -> np.ndarray:
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

    Returns ``(L, C, N, iterations)``.
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
