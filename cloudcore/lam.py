"""Rules for the sparsity weight λ (paper §"Determining the best λ", appendix; CONVENTIONS §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from cloudcore._checks import check_pixels

__all__ = ["LambdaBounds", "lambda_bounds", "lambda_default", "lambda_star"]

# Coefficients of the paper's fit of the best λ against n (eq. bestlambda), natural logarithms.
_STAR_SLOPE = -0.5682
_STAR_INTERCEPT = 1.0747


def lambda_default(d: int) -> float:
    """The classical RPCA weight 1/√d (Candès et al.), with d the pixels of the matrix solved.

    Parameters
    ----------
    d
        Number of rows (pixels) of the matrix actually solved: a tile, not the scene.

    Returns
    -------
    float
        1/√d.
    """
    check_pixels(d)
    return 1.0 / math.sqrt(d)


def lambda_star(d: int, n: int) -> float:
    """The paper's fitted best λ, floored at the lower bound 1/√(dn).

    λ̂* = max((−0.5682·ln(ln n) + 1.0747)/√d, 1/√(dn)), fitted on n = 2…250.

    Parameters
    ----------
    d
        Number of pixels of the matrix solved.
    n
        Number of dates, at least 2.

    Returns
    -------
    float
        λ̂*, never below 1/√(dn).
    """
    check_pixels(d)
    if n < 2:
        raise ValueError(f"lambda_star needs n >= 2 dates (ln ln n is undefined below), got n={n}")
    fitted = (_STAR_SLOPE * math.log(math.log(n)) + _STAR_INTERCEPT) / math.sqrt(d)
    return max(fitted, 1.0 / math.sqrt(d * n))


@dataclass(frozen=True)
class LambdaBounds:
    """Range of λ giving non-trivial solutions (paper appendix).

    Attributes
    ----------
    lower
        1/√(dn): below it L = 0 and C = D.
    upper
        ‖UVᵀ‖_∞ for the thin SVD D = UΣVᵀ: above it C = 0 and L = D.
    upper_asymptotic
        2√3/(√d − √n), the paper's random-matrix approximation of ``upper``.
    """

    lower: float
    upper: float
    upper_asymptotic: float


def lambda_bounds(D: ArrayLike) -> LambdaBounds:
    """Feasible range of λ for the data matrix ``D`` (d × n, d > n).

    The thin SVD is taken through the n × n Gram matrix: UVᵀ = D·V·Σ⁻¹·Vᵀ, so no d × d work.
    Directions with singular value below ``1e-12·σ₁`` are treated as rank deficiency and dropped.

    Parameters
    ----------
    D
        Observed matrix, shape (d, n), finite.

    Returns
    -------
    LambdaBounds
        The lower and upper bounds and the asymptotic upper bound.
    """
    a = np.asarray(D, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"D must be a 2-D (d, n) matrix, got shape {a.shape}")
    d, n = a.shape
    if d <= n:
        raise ValueError(f"lambda_bounds assumes d > n (pixels > dates), got d={d}, n={n}")
    if not np.all(np.isfinite(a)):
        raise ValueError("lambda_bounds: D holds NaN or inf")
    evals, evecs = np.linalg.eigh(a.T @ a)
    sigma = np.sqrt(np.clip(evals, 0.0, None))
    if sigma.max() == 0.0:
        raise ValueError("lambda_bounds: D is all zero, every λ gives L = C = 0")
    keep = sigma > 1e-12 * sigma.max()
    v = evecs[:, keep]
    uvt = a @ (v / sigma[keep]) @ v.T
    upper = float(np.abs(uvt).max())
    asym = 2.0 * math.sqrt(3.0) / (math.sqrt(d) - math.sqrt(n))
    return LambdaBounds(lower=1.0 / math.sqrt(d * n), upper=upper, upper_asymptotic=asym)
