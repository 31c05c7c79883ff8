"""Debiased fill of partly observed dates: refit the low-rank ground on the observed entries.

Why (issue #14): with a mask, the ALM leaves the unobserved entries free, and two things bias
a partly observed date (column) dark. Its fill starts at 0 and only creeps up through the SVT
(soft-impute steps) until the *observed* residual meets ``tol``, long before the fill settles;
and the nuclear norm charges the whole column for a fit that only its observed rows reward, so
it shrinks the column's loading and lets C absorb the rest on its observed rows too. Measured
on tyrol-w1 (512², 7 dates, reference clouds, one date observed on its left third): that date
came back at 46 % of the truth's mean, in the strip it did not see *and* on the pixels it saw.

The remedy is the relaxed (debiased) fit of low-rank regression: keep the subspace the ALM
found and drop its shrinkage. With ``L = U Σ Vᵀ`` of the ALM's ground (U_k: its leading k
left singular vectors, k the numerical rank capped at (n − 1) // 2), every date with an
unobserved entry gets its coefficients refitted on its observed rows, and its whole column
(observed rows too: they were as dark) becomes ``U_k c_j``::

    c_j = argmin_c Σ_{i observed} ρ_q(D_ij − (U_k c)_i)        (pinball loss of quantile q)

Clouds only brighten D, so the ground is a *low quantile* of the data, not its mean. Which
quantile is read off the solve itself: q_j is the share of the entries of the other dates on
date j's observed pixels where the ALM's ground lies above the data (about 0.17 on tyrol-w1
with reference clouds). So date j sits in its data where the dates the ALM pinned sit in
theirs, on the same pixels. A fit by the aATM loss without the nuclear norm (a Huber loss with
threshold λ/β) hugs the lower envelope instead, and came out 3–14 % dark; least squares is
pulled up by the clouds. It is minimised by iteratively reweighted least squares (k unknowns
per date). C and N of the refitted date's observed entries are then re-split from the new
residual by the method's own rule, so D = L + C + N still holds there (aATM), and C = N = 0
stays on unobserved entries.

Dates observed everywhere keep the ALM's output bit for bit, and so does every unmasked
problem (nothing here runs then): the golden tests are untouched. A date observed on no pixel
at all cannot be refitted (nothing pins c_j) and comes back NaN, like a pixel observed on no
date. How many observed pixels a date needs in a *tile* before its fill is trusted is the
pipeline's rule (docs/FOOTPRINTS.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "FIT_ROWS",
    "IRLS_FLOOR",
    "IRLS_MAX_ITER",
    "IRLS_RTOL",
    "RANK_RTOL",
    "basis_weights",
    "fit_column",
    "ground_quantile",
    "irls_fit",
    "refit_partial_columns",
    "sample_stride",
    "set_column",
    "strided_rows",
]

#: Singular values of L below ``RANK_RTOL · σ₁`` are the solver's rounding, not ground: the
#: spectrum of L on tyrol-w1 is e.g. 578, 0.54, 0.28, 0.043, then 6e-6 (float32 solve).
RANK_RTOL = 1e-4
#: The IRLS of a date's fit stops once a step moves no coefficient by more than :data:`IRLS_RTOL`
#: of the largest, or after this many steps. At 200 (the cap of the NumPy IRLS, whose steps
#: cost 0.2 ms) some dates were still moving at the cap by a few :data:`IRLS_FLOOR`, and two
#: code paths that round the basis differently (a scene's blocks, a whole band) ended that far
#: apart; compiled, a step costs about a third of that, and at 1000 every date of the test
#: series settles (2-3 % of the fits on real series still reach the cap, 18-31 % at 200:
#: ``benchmarks/irls.py`` counts them).
IRLS_MAX_ITER = 1000
IRLS_RTOL = 1e-9
#: Residuals below this (|r|, in units of D) count as this in the IRLS weights of the pinball
#: loss, which would divide by zero at an exact fit: the fit treats such residuals as zero, so
#: it resolves the ground only to a few times this.
IRLS_FLOOR = 1e-6
#: The fit of a date's k ≤ 3 coefficients uses at most this many of its observed pixels, evenly
#: strided (deterministic): more change c_j by far less than the fit's own error, and the
#: IRLS on a whole 1024² band took 25 s instead of 1. 65536 rows took 1.0 s of the 1.3 s of a
#: refined 768² × 7 demo tile (:func:`cloudcore.refine` leaves every date partly observed);
#: 16384 halve that and change its ground by 0.1 % (relative Frobenius norm).
FIT_ROWS = 16384


def fit_column(U: np.ndarray, y: np.ndarray, q: float) -> np.ndarray:
    """Coefficients c minimising Σ ρ_q(y − U c) (pinball loss of quantile q) by IRLS.

    Parameters
    ----------
    U
        (rows, k) float64: the sampled rows of the basis U_k.
    y
        (rows,) float64: the date's data on those rows.
    q
        The quantile (:func:`ground_quantile`).

    Returns
    -------
    numpy.ndarray
        (k,) float64 coefficients, after at most :data:`IRLS_MAX_ITER` IRLS steps.
    """
    return irls_fit(U, y, q)[0]


def irls_fit(
    U: np.ndarray, y: np.ndarray, q: float, steps: int = IRLS_MAX_ITER
) -> tuple[np.ndarray, int]:
    """:func:`fit_column`'s IRLS with at most ``steps`` steps, from the least-squares fit.

    Parameters
    ----------
    U, y, q
        As :func:`fit_column`'s.
    steps
        The most IRLS steps (``benchmarks/irls.py`` compares caps).

    Returns
    -------
    tuple
        The (k,) float64 coefficients and the steps taken (``steps`` if it stopped unsettled).
    """
    U = np.asarray(U, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    start = np.linalg.lstsq(U, y, rcond=None)[0]
    Ut = np.ascontiguousarray(U.T)  # (k, rows): each pass of the kernel runs over contiguous rows
    c, taken = _irls(Ut, y, float(q), start, steps, IRLS_RTOL, IRLS_FLOOR)
    return c, int(taken)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _irls(
    Ut: np.ndarray, y: np.ndarray, q: float, c: np.ndarray, steps: int, rtol: float, floor: float
) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled; tested through fit_column
    # Each step: the residual, its pinball weight, and the weighted normal equations (k × k,
    # k ≤ 3 in practice), each a vectorised pass over the rows of the (k, rows) basis. NumPy's
    # version made six (rows × k) temporaries a step (0.2 ms a step, 158 steps a date).
    k, rows = Ut.shape
    r = np.empty(rows)
    w = np.empty(rows)
    gram = np.empty((k, k))
    rhs = np.empty(k)
    taken = 0
    while taken < steps:
        taken += 1
        r[:] = y
        for a in range(k):
            ca = c[a]
            u = Ut[a]
            for i in range(rows):
                r[i] -= u[i] * ca
        for i in range(rows):
            ri = r[i]
            w[i] = (q if ri > 0.0 else 1.0 - q) / max(abs(ri), floor)
        for a in range(k):
            ua = Ut[a]
            total = 0.0
            for i in range(rows):
                total += w[i] * ua[i] * y[i]
            rhs[a] = total
            for b in range(a + 1):
                ub = Ut[b]
                total = 0.0
                for i in range(rows):
                    total += w[i] * ua[i] * ub[i]
                gram[a, b] = total
                gram[b, a] = total
        # NumPy's rcond=None cutoff (eps · the larger dimension), not numba's default (eps).
        c_next = np.linalg.lstsq(gram, rhs, rcond=k * 2.220446049250313e-16)[0]
        step = np.abs(c_next - c).max()
        c = c_next
        if step <= rtol * max(np.abs(c).max(), 1e-300):
            break
    return c, taken


def ground_quantile(
    D: np.ndarray, obs: np.ndarray, L: np.ndarray, rows: np.ndarray, j: int, whole: np.ndarray
) -> float:
    """The quantile q_j of date ``j``'s fit: the share of the observed entries of the other
    dates on ``rows`` where the ALM's ground lies above the data.

    Parameters
    ----------
    D, obs, L
        (pixels, dates) data, observed mask and the ALM's ground (or the sampled rows of them).
    rows
        The rows of date j's sample.
    j
        The date being fitted.
    whole
        The dates observed on every pixel: the share is taken over them if there are any,
        else over every date but j.

    Returns
    -------
    float
        q in [0.01, 0.99].
    """
    others = (whole if whole.size else np.delete(np.arange(D.shape[1]), j)).astype(np.intp)
    above, seen = _count_above(D, L, obs, rows.astype(np.intp), others)  # j ∉ others
    if not seen:
        above, seen = _count_above(D, L, obs, np.arange(D.shape[0], dtype=np.intp), others)
    q = above / max(seen, 1)
    return min(max(q, 0.01), 0.99)


@njit(cache=True, nogil=True)
def _count_above(
    D: np.ndarray, L: np.ndarray, obs: np.ndarray, rows: np.ndarray, dates: np.ndarray
) -> tuple[int, int]:  # pragma: no cover - compiled; tested through ground_quantile
    # The observed entries of (rows × dates), and those where L lies above D, counted in
    # place: NumPy's fancy indexing copied the three blocks first (5 ms a date at 16384 rows).
    above = 0
    seen = 0
    for j in dates:
        for i in rows:
            if obs[i, j]:
                seen += 1
                if L[i, j] > D[i, j]:
                    above += 1
    return above, seen


def _resplit(
    r: np.ndarray,
    low: np.ndarray,
    method: str,
    lam: float,
    beta: float,
    shadow_weight: float,
    out: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None]:
    """C and N of entries with residual ``r = D − L`` (``low`` = L), by the method's own rule
    for a fixed L; N is None for the methods whose N is zero everywhere.

    In place: C (E for aATM-shadow) is written into ``out``, N into ``r``; what is returned are
    those arrays (``r`` itself as C for RPCA). A refit date's arrays are a column of the tile
    (13 MiB in float64 at 1280² px), allocated anew by every step they are not written into.
    """
    if method == "aatm":  # C = clip(r − λ/β, 0, 1), N = r − C
        np.subtract(r, lam / beta, out=out)
        np.clip(out, 0.0, 1.0, out=out)
        return out, np.subtract(r, out, out=r)
    if method == "aatm-shadow":  # the signed sparse part E = C − S, split later (κ below)
        t = lam / beta
        shade = np.add(r, shadow_weight * t)
        np.minimum(shade, 0.0, out=shade)
        np.subtract(r, t, out=out)
        np.maximum(out, 0.0, out=out)
        np.add(out, shade, out=out)
        del shade
        np.clip(out, -1.0, 1.0, out=out)
        return out, np.subtract(r, out, out=r)
    if method == "atm":  # D = L∘(1 − C) + C
        np.subtract(1.0, low, out=out)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(r, out, out=out)
        np.copyto(out, 0.0, where=~(low < 1.0))
        return np.clip(out, 0.0, 1.0, out=out), None
    return r, None  # rpca, nnrpca: D = L + C


def basis_weights(gram: np.ndarray) -> np.ndarray | None:
    """The weights of the refit's basis: U_k = L_full · M.

    Parameters
    ----------
    gram
        (m, m) float64 L_fullᵀ L_full, the Gram matrix of the ALM's ground on the m dates
        observed somewhere.

    Returns
    -------
    numpy.ndarray or None
        (m, k) M, k the numerical rank (singular values above ``RANK_RTOL · σ₁``), at least 1
        and at most (m − 1) // 2; None when L = 0 (nothing to fit on).
    """
    evals, evecs = np.linalg.eigh(gram)
    order = np.argsort(evals)[::-1]
    sigma = np.sqrt(np.clip(evals[order], 0.0, None))
    if sigma[0] == 0.0:
        return None
    k = int(np.sum(sigma > RANK_RTOL * sigma[0]))
    k = max(1, min(k, (gram.shape[0] - 1) // 2))
    return evecs[:, order[:k]] / sigma[:k]


def set_column(
    basis: np.ndarray,
    coef: np.ndarray,
    d: np.ndarray,
    o: np.ndarray,
    low: np.ndarray,
    cloud: np.ndarray,
    haze: np.ndarray,
    method: str,
    lam: float,
    beta: float,
    shadow_weight: float,
    work: np.ndarray,
) -> None:
    """Write the refitted ground of one date and re-split its cloud and haze, in place.

    The methods without haze leave ``haze`` as it is (zero): writing zeros would only touch
    pages the solver left untouched (no memory until then). The split is computed on every
    entry and kept on the observed ones: the same values as computing it on the observed
    entries alone (elementwise), without the copies that selecting them makes.

    Parameters
    ----------
    basis, coef
        The basis U_k (pixels, k) and the date's coefficients: its ground is ``basis @ coef``.
    d, o
        The date's data and where it was observed (1-D, one entry per pixel).
    low, cloud, haze
        The date's L, C (E for aATM-shadow) and N (1-D views), written: L everywhere, C and N
        from the residual on observed entries and zero elsewhere.
    method, lam, beta, shadow_weight
        The solve's method, λ, β and κ: the re-split is the method's own rule for a fixed L.
    work
        A float64 (3, pixels) array, overwritten: the column, its residual and its split. A
        caller refitting several dates passes the same one (an array of a column's size, 13 MiB
        at 1280² px, allocated anew may be mapped and paged in afresh by malloc).
    """
    column, residual, split = work
    np.matmul(basis, coef, out=column)
    low[:] = column
    np.subtract(d, column, out=residual)
    c, n = _resplit(residual, column, method, lam, beta, shadow_weight, split)
    unseen = ~o
    np.copyto(cloud, c, where=o, casting="same_kind")
    cloud[unseen] = 0.0
    if n is not None:
        np.copyto(haze, n, where=o, casting="same_kind")
        haze[unseen] = 0.0


def sample_stride(count: int, most: int = FIT_ROWS) -> int:
    """The least stride s ≥ 1 that leaves at most ``most`` of ``count`` observed pixels in the
    sample of a date's fit (every s-th of them, in row-major order)."""
    return max(-(-count // most), 1)


def strided_rows(observed: np.ndarray, most: int, block: int = 1 << 18) -> np.ndarray:
    """Indices of every s-th True entry of the 1-D ``observed``, s the least stride that leaves
    at most ``most`` of them: ``np.flatnonzero(observed)[::s]``, found a block at a time so that
    the indices of all observed entries (13 MiB at 1280² px) are never held at once."""
    step = sample_stride(int(np.count_nonzero(observed)), most)
    picked, seen = [], 0
    for start in range(0, observed.size, block):
        here = np.flatnonzero(observed[start : start + block])
        picked.append(here[(-seen) % step :: step] + start)
        seen += here.size
    return np.concatenate(picked) if picked else np.zeros(0, np.intp)


def refit_partial_columns(
    D: np.ndarray,
    obs: np.ndarray,
    L: np.ndarray,
    C: np.ndarray,
    N: np.ndarray,
    *,
    method: str,
    lam: float,
    beta: float,
    shadow_weight: float = 1.0,
) -> np.ndarray:
    """Refit, in place, every partly observed column of ``L`` (and re-split its C, N).

    Parameters
    ----------
    D, obs, L, C, N
        (pixels, dates) arrays (views of the solver's internal layout are fine; they are
        written in place). Unobserved entries of D are 0; every row is observed on some date.
    method, lam, beta, shadow_weight
        The solve's method, λ, β (aATM and aATM-shadow) and κ (aATM-shadow).

    Returns
    -------
    numpy.ndarray
        Boolean (n,): the columns observed on no row. They are left to the caller (NaN).
    """
    seen = obs.sum(axis=0)
    empty = seen == 0
    partial = np.flatnonzero((seen < obs.shape[0]) & ~empty)
    if partial.size == 0:
        return empty
    low = L[:, np.flatnonzero(~empty)].astype(np.float64)
    M = basis_weights(low.T @ low)
    if M is None:
        return empty  # L = 0: nothing to refit from
    basis = low @ M  # U_k, orthonormal columns
    del low  # a float64 copy of L: gone before the per-date fits (a tile's memory peak)
    whole = np.flatnonzero(seen == obs.shape[0])
    work = np.empty((3, obs.shape[0]))  # set_column's arrays, shared by every date
    for j in map(int, partial):
        o = obs[:, j]
        rows = strided_rows(o, FIT_ROWS)
        q = ground_quantile(D, obs, L, rows, j, whole)
        coef = fit_column(basis[rows], D[rows, j].astype(np.float64), q)
        layers = (D[:, j], o, L[:, j], C[:, j], N[:, j])
        set_column(basis, coef, *layers, method, lam, beta, shadow_weight, work)
    return empty
