"""Matrix-completion (MC) post-step of the RPCA-based pipelines (paper eq. 2, CONVENTIONS §2).

Given a decomposition's cloud layer C, the entries judged cloudy form a mask Ω; then
min ‖B‖_* + α‖S_Ω‖₁ + ‖S_Ω̄‖₁ s.t. D = B + S is solved with the same inexact ALM as RPCA, with λ = 1
and per-entry weights α on Ω (clouds may go into S cheaply) and 1 elsewhere. B is the result.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from numpy.typing import ArrayLike
from scipy import ndimage

from cloudcore._checks import check_positive, check_stopping
from cloudcore._growth import resolve_growth
from cloudcore._problem import prepare
from cloudcore.result import Decomposition
from cloudcore.solvers import run_alm, solve, sparse_rule

__all__ = ["cloud_mask", "complete"]


def cloud_mask(
    C: ArrayLike, image_shape: tuple[int, int], *, gamma: float = 0.8, radius: int = 3
) -> np.ndarray:
    """The MC mask of the reference experiments: |C| > γ·std(C), cleaned per date.

    Each date's mask is opened with a disk of ``radius`` (drops specks) and then dilated twice
    with the same disk (covers cloud edges).

    Parameters
    ----------
    C
        Cloud layer, shape (d, n) with d = h·w (C-order frames); NaN rows are ignored.
    image_shape
        (h, w) of one frame.
    gamma
        Threshold as a fraction of the standard deviation of C over the whole matrix.
    radius
        Disk radius of the morphological clean-up, in pixels.

    Returns
    -------
    numpy.ndarray
        Boolean (d, n), True where the entry is taken as cloud.
    """
    c = np.asarray(C, dtype=np.float64)
    h, w = image_shape
    if c.ndim != 2 or c.shape[0] != h * w:
        raise ValueError(f"C of shape {c.shape} does not hold frames of shape {image_shape}")
    finite = np.isfinite(c)
    spread = float(np.std(c[finite])) if finite.any() else 0.0
    raw = finite & (np.abs(np.where(finite, c, 0.0)) > gamma * spread)
    # Imported here: only the MC step needs scikit-image, and `import cloudcore` stays light.
    from skimage.morphology import disk

    footprint = disk(radius).astype(bool)
    out = np.empty_like(raw)
    for j in range(c.shape[1]):
        frame = ndimage.binary_opening(raw[:, j].reshape(h, w), structure=footprint)
        frame = ndimage.binary_dilation(frame, structure=footprint, iterations=2)
        out[:, j] = frame.ravel()
    return out


def complete(
    D: ArrayLike,
    C: ArrayLike,
    image_shape: tuple[int, int],
    *,
    gamma: float = 0.8,
    radius: int = 3,
    alpha: float | None = None,
    tol: float = 1e-7,
    max_iter: int = 1000,
    mask: ArrayLike | None = None,
    threads: int | None = None,
    rho: float | None = None,
) -> Decomposition:
    """Re-estimate the ground with the cloudy entries down-weighted (the MC step).

    Parameters
    ----------
    D
        The observed matrix (d, n) that was decomposed, values in [0, 1].
    C
        The cloud layer of that decomposition (d, n), e.g. ``decompose(D).C``.
    image_shape
        (h, w) of one frame; d must equal h·w.
    gamma, radius
        Mask rule, see :func:`cloud_mask`.
    alpha
        Weight of S on cloudy entries; default 0.1/√d.
    tol, max_iter, mask, threads, rho
        As in :func:`cloudcore.decompose`; ``mask`` marks observed entries, ``rho`` is μ's
        growth per iteration (None: the paper's 1.5, or a study's).

    Returns
    -------
    Decomposition
        ``L`` is the completed ground B, ``C`` the residual S, ``N`` zeros; ``lam`` is α.
    """
    check_stopping(tol, max_iter)
    rho = resolve_growth(rho)  # checked before any work
    problem = prepare(D, mask)
    d = problem.shape[0]
    alpha = 0.1 / math.sqrt(d) if alpha is None else float(alpha)
    check_positive(alpha, "alpha")
    cloudy = cloud_mask(C, image_shape, gamma=gamma, radius=radius)
    weights = problem.internal(np.where(cloudy, alpha, 1.0))

    # Weighted RPCA: λ = 1 with per-entry weights α (cloudy) or 1 (clear); no haze layer.
    iterate = partial(run_alm, problem, 1.0, sparse=sparse_rule("rpca"), beta=None, weights=weights)
    return solve(problem, "mc", alpha, tol, max_iter, threads, iterate, rho=rho)
