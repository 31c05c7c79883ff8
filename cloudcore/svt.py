"""Singular value thresholding through the small Gram matrix.

For a wide matrix X (n × d, n ≪ d; the solvers hold D as dates × pixels) with thin SVD
X = VΣUᵀ, SVT_τ(X) = V·max(Σ − τ, 0)·Uᵀ = W·X with W = V·diag(max(1 − τ/σ, 0))·Vᵀ (symmetric).
W comes from the eigen-decomposition of XXᵀ (n × n, accumulated in float64), so no d × n SVD is
ever taken. Squaring the condition number only affects singular values far below σ₁, and those
are at or below τ in every iteration that matters (the golden tests agree to ~1e-11).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cloudcore._kernels import gram

__all__ = ["sum_grams", "svt", "svt_weights"]


def svt_weights(gram: np.ndarray, tau: float) -> tuple[np.ndarray, float]:
    """n × n symmetric matrix W with SVT_τ(X) = W·X, from the Gram matrix ``gram = XXᵀ``.

    Parameters
    ----------
    gram
        XXᵀ (n × n, symmetric positive semi-definite), best accumulated in float64.
    tau
        Threshold τ ≥ 0 on the singular values of X.

    Returns
    -------
    W, nuclear
        The weight matrix and the nuclear norm of the thresholded result, Σ max(σ − τ, 0).
    """
    evals, evecs = np.linalg.eigh(gram)
    sigma = np.sqrt(np.clip(evals, 0.0, None))
    keep = sigma > tau
    scale = np.zeros_like(sigma)
    scale[keep] = 1.0 - tau / sigma[keep]
    weights = (evecs * scale) @ evecs.T
    return weights, float(np.sum(sigma[keep] - tau))


def svt(x: np.ndarray, tau: float) -> tuple[np.ndarray, float]:
    """SVT_τ(x) for a wide (n × d) matrix, and the nuclear norm of the result.

    The Gram matrix is accumulated in float64 whatever the input dtype; the product keeps ``x``'s
    dtype.

    Parameters
    ----------
    x
        Wide matrix (n × d, n ≤ d), float32 or float64.
    tau
        Threshold τ ≥ 0 on the singular values.

    Returns
    -------
    thresholded, nuclear
        SVT_τ(x), of ``x``'s shape and dtype, and its nuclear norm Σ max(σ − τ, 0).
    """
    weights, nuclear = svt_weights(gram(np.ascontiguousarray(x)), tau)
    return weights.astype(x.dtype, copy=False) @ x, nuclear


def sum_grams(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The Gram matrix of a matrix held in blocks of columns, from the blocks' Gram matrices.

    Summed in float64 in the order given, so that a block-wise solve (:mod:`cloudcore.scene`)
    gets the same bits whichever block answers first.

    Parameters
    ----------
    parts
        The blocks' Gram matrices, each (n × n); none gives a (0, 0) matrix.

    Returns
    -------
    numpy.ndarray
        Their sum, float64.
    """
    total = np.zeros_like(parts[0], dtype=np.float64) if parts else np.zeros((0, 0))
    for g in parts:
        total += g
    return total
