"""Masked re-solve: flag the entries far from a first decomposition's ground, solve again
without them.

Why (issue #16): on real cloudy series (docs/REAL-CLOUDS.md) one decomposition has to do two
jobs at once, and no single λ does both well. To *find* clouds and shadows the ground must stay
clean, which wants a small λ (anomalies go to the sparse part cheaply); to *fill* them from the
clear entries the fit must hug those entries, which wants a larger λ (real ground departs from
a low-rank model by more than the paper's static simulated ground: phenology, sun angle,
registration). Measured on the bundled Landsat series with the reference masks as an oracle,
RPCA at λ = 3/√d on the clear entries alone predicts the pasted pixels with r = 0.075, while
single solves of the whole series score 0.16–0.24 at best (RPCA, 1/√d).

So the refinement splits the jobs:

1. a first decomposition (any method, λ ≈ 1/√d) gives the ground L₀;
2. per entry, the residual R = D − L₀ in units of the band's robust scale
   σ = 1.4826 · MAD(R) over the observed entries; entries with |R| ≥ ``threshold``·σ are flagged
   (bright: cloud or haze; dark: shadow), the flags of each date are opened with a 3 × 3 square
   (specks go) and dilated by ``radius`` pixels (cloud edges and thin rims go too);
3. RPCA with λ = ``lam_scale``/√d on the observed, unflagged entries gives the ground; the
   flagged entries are filled from the low-rank model (with the debiased refit of
   :mod:`cloudcore.refit`, since every date is now partly observed).

``rounds`` > 1 repeats 2–3 with the new ground (σ from the unflagged entries). The defaults were
chosen on the real-cloud experiment (docs/REAL-CLOUDS.md "Choosing the refinement"). The result
keeps D = L + C − S on the observed entries: C = max(R, 0) and S = max(−R, 0) of the final
residual, N = 0, so :func:`cloudcore.classify_result` reads clouds from C and shadows from S.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from cloudcore._growth import resolve_growth
from cloudcore._memory import lazy_zeros_like
from cloudcore._morphology import dilate, erode
from cloudcore.anomaly import sample_entries
from cloudcore.result import ConvergenceWarning, Decomposition

__all__ = ["RefineRule", "flag_outliers", "refine", "robust_scale"]


@dataclass(frozen=True)
class RefineRule:
    """Settings of :func:`refine` (defaults measured, docs/REAL-CLOUDS.md).

    Attributes
    ----------
    threshold
        Flag an entry where |D − L| ≥ ``threshold`` · σ.
    radius
        Dilation of each date's flags, in pixels (after a 3 × 3 opening); 0: neither.
    rounds
        Flag-and-re-solve rounds.
    lam_scale
        λ of the re-solve = ``lam_scale`` / √d.
    """

    threshold: float = 3.0
    radius: int = 1
    rounds: int = 1
    lam_scale: float = 3.0

    def __post_init__(self) -> None:
        if not (self.threshold > 0 and self.lam_scale > 0):
            raise ValueError("refine: threshold and lam_scale must be > 0")
        if self.radius < 0 or self.rounds < 1:
            raise ValueError("refine: radius must be >= 0 and rounds >= 1")


def robust_scale(residual: np.ndarray, keep: np.ndarray) -> float:
    """σ = 1.4826 × the median absolute deviation of ``residual`` over the ``keep`` entries.

    An evenly strided sample of whole pixels, at most about
    :data:`cloudcore.anomaly.SCALE_SAMPLE` entries, is used (a tile holds ~10⁷; see
    :func:`cloudcore.anomaly.sample_entries`); 0 when no entry is kept.
    """
    values = sample_entries(residual, keep)
    if values.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


def flag_outliers(
    residual: np.ndarray,
    observed: np.ndarray,
    image_shape: tuple[int, int],
    rule: RefineRule = RefineRule(),
    previous: np.ndarray | None = None,
) -> np.ndarray:
    """The entries whose residual is an outlier, cleaned per date.

    Parameters
    ----------
    residual
        D − L, shape (d, n) with d = h·w in row-major order of ``image_shape``.
    observed
        Boolean (d, n), True where observed.
    image_shape
        (h, w) of one date.
    rule
        Threshold and radius.
    previous
        Flags of the previous round: σ is measured on the entries outside them.

    Returns
    -------
    numpy.ndarray
        Boolean (d, n), True where flagged (never where not observed).
    """
    h, w = image_shape
    d, n = residual.shape
    if d != h * w:
        raise ValueError(f"refine: {d} rows do not hold images of shape {image_shape}")
    keep = observed if previous is None else observed & ~previous
    sigma = robust_scale(residual, keep)
    if sigma == 0.0:
        return np.zeros((d, n), dtype=bool)
    # (n, h, w) views of the (d, n) arrays: cloudcore's matrices are transposed views of
    # dates × pixels, so .T is C-ordered and the reshape copies nothing.
    big = np.abs(residual) >= rule.threshold * sigma  # NaN compares False
    big &= observed  # before the opening: unobserved entries must not seed or grow flags
    frames = big.T.reshape(n, h, w)
    if rule.radius > 0:
        # The opening by a 3 × 3 square (erosion, then dilation), then the dilation by a
        # (2·radius + 1)² square, within each date, as ``ndimage.binary_opening`` and
        # ``binary_dilation`` compute them (cloudcore._morphology), written into arrays owned
        # here: each step's output is an (n, h, w) boolean array (11 MiB for a tile).
        scratch = np.empty_like(frames)
        eroded = erode(frames, 1, scratch=scratch)
        dilate(eroded, 1, out=frames, scratch=scratch)
        dilate(frames, rule.radius, out=eroded, scratch=scratch)
        frames = eroded
    flags = frames.reshape(n, d).T
    flags &= observed
    return flags


def refine(
    D: ArrayLike,
    first: Decomposition,
    image_shape: tuple[int, int],
    *,
    rule: RefineRule = RefineRule(),
    mask: ArrayLike | None = None,
    tol: float = 1e-7,
    max_iter: int = 1000,
    threads: int | None = None,
    warn: bool = True,
    rho: float | None = None,
) -> Decomposition:
    """Re-solve a decomposition with its outlying entries left out (see the module docstring).

    Parameters
    ----------
    D
        The matrix (d, n) that ``first`` decomposed, values in [0, 1]; float32 stays float32.
    first
        Its decomposition, by any method.
    image_shape
        (h, w) of one date; d must equal h·w.
    rule
        Threshold, radius, rounds and the re-solve's λ scale.
    mask
        Boolean (d, n), True where observed (None: every entry).
    tol, max_iter, threads, warn, rho
        As in :func:`cloudcore.decompose`, for the re-solves (one warning for the last
        re-solve, not one per round).

    Returns
    -------
    Decomposition
        ``L`` the re-solved ground; ``C`` = max(D − L, 0) and ``S`` = max(L − D, 0) on the
        observed entries (0 elsewhere), ``N`` zeros; all four NaN on pixels observed on no
        date; ``iterations`` counts every solve, ``converged`` whether the first solve and the
        last re-solve both converged, ``residual`` the last re-solve's, ``lam`` its λ,
        ``method`` ``"<first method>+refine"``. Where the re-solve has nothing left to pin (a
        pixel or a date flagged on every observed entry) the first ground is kept.
    """
    from cloudcore.solvers import decompose

    rho = resolve_growth(rho)  # once: every round's re-solve with the same ρ
    data = np.asarray(D)
    dtype = np.float32 if data.dtype == np.float32 else np.float64
    observed = np.isfinite(data) if mask is None else np.asarray(mask, dtype=bool)
    if first.L.shape != data.shape or observed.shape != data.shape:
        raise ValueError(f"refine: D {data.shape}, L {first.L.shape} and mask differ in shape")
    lam = rule.lam_scale / math.sqrt(data.shape[0])
    ground = first.L
    flags: np.ndarray | None = None
    iterations = first.iterations
    converged, residual = first.converged, first.residual  # of the last solve
    # The re-solve's memory is a tile's peak in the pipeline: arrays are let go once used.
    for _ in range(rule.rounds):
        flags = flag_outliers(
            np.where(observed, data - ground, np.nan), observed, image_shape, rule, flags
        )
        keep = np.logical_not(flags)
        keep &= observed
        last = decompose(  # warned of once, below
            data,
            "rpca",
            lam=lam,
            tol=tol,
            max_iter=max_iter,
            mask=keep,
            threads=threads,
            warn=False,
            rho=rho,
        )
        del keep
        iterations += last.iterations
        converged, residual = last.converged, last.residual
        # Nothing left to pin a row or a date: keep the previous ground there (written into
        # the re-solve's own L, which nothing else holds: no new array at a tile's peak).
        resolved = last.L.astype(dtype, copy=False)
        unpinned = np.isfinite(resolved)
        np.logical_not(unpinned, out=unpinned)  # in place: one boolean array, not two
        np.copyto(resolved, ground, where=unpinned)
        del unpinned
        ground = resolved
        del last  # its C and N are not used
    if warn and not converged:
        warnings.warn(
            f"refine: the re-solve stopped at max_iter={max_iter} (residual {residual:.2e})",
            ConvergenceWarning,
            stacklevel=2,
        )
    # D − L on the observed entries, 0 elsewhere, written into one array (no temporary).
    resid = np.subtract(data, ground, out=np.zeros_like(ground), where=observed)
    # Pixels observed on no date stay NaN in every layer, as decompose leaves them.
    nothing = np.isnan(ground)
    resid[nothing] = np.nan
    cloud = np.maximum(resid, 0)
    shadow = np.maximum(np.negative(resid, out=resid), 0, out=resid)
    haze = lazy_zeros_like(resid)  # only the pages holding a NaN are ever written
    haze[nothing] = np.nan
    return Decomposition(
        L=ground,
        C=cloud,
        N=haze,
        S=shadow,
        iterations=iterations,
        residual=residual,
        converged=first.converged and converged,
        lam=lam,
        method=f"{first.method}+refine",
    )
