"""Fused numba kernels for the inexact ALM of aATM / RPCA / NN-RPCA / weighted RPCA (MC).

Layout: every matrix is held *dates × pixels* (n × d, C-contiguous), the transpose of the public
(d, n) layout, so each date's pixels are contiguous and every inner loop below runs over
contiguous memory and vectorises (row-major pixels × dates with n ≈ 7 did not, and was 3x slower).
Pixels are processed in fixed blocks; per-block partial sums are added in block order, so results
do not depend on the number of threads.

An iteration is memory-bound on tall-skinny tiles, so it is fused into few passes:

* :func:`first_sparse_step` runs the sparse step of iteration 1 (C) and returns the n × n Gram
  matrix of the SVT argument A = D − C − N + Y/μ in float64 (A itself is never stored);
* :func:`fused_iteration` does the rest of iteration k *and* the sparse step of k + 1 in one pass
  (reads D, C, N, Y; writes L, C_next, N, Y), because C_{k+1} of a pixel depends only on that
  pixel's L_k, N_k, Y_k: 8 array passes per iteration instead of 12;
* :func:`fused_iteration_no_haze` is that pass for the methods whose N stays zero (RPCA,
  NN-RPCA, weighted RPCA): 6 passes, N never read nor written. It is a kernel of its own because
  a run-time flag in the shared one changed aATM's rounding and slowed every method, and numba's
  literal dispatch of the flag was 2.3x slower. :func:`fused_step` picks one.

D is float32 or float64, or (scene scope's compact state) the uint16 DN the values were staged
from: each kernel reads a block's D through :func:`block_values`, which hands float D over as it
is and divides DN back once per block, with the staging's own float32 division, so every kernel
sees the same bits either way (``tests/cloudcore/test_kernels.py``).

Helpers marked ``inline="always"`` are inlined in numba's IR, so they compile as if written in
place (each kernel keeps its bits; ``tests/cloudcore/test_kernels.py``).

SVT_τ(A) = W·A, with W (n × n) from the eigen-decomposition of the Gram matrix
(see :mod:`cloudcore.svt`).

Every kernel is compiled with ``cache=True``: compiling them takes 10-20 s, which every new
worker process would pay otherwise (a first call served from the cache takes ~0.3 s). numba keeps
the machine code in ``__pycache__`` beside this file or, where that is not writable (an installed,
read-only package), in the user's cache directory; the ``NUMBA_CACHE_DIR`` environment variable
overrides both (e.g. a path shared by a cluster's workers). An entry is reused while this file and
the CPU and numba version are unchanged, and rebuilt otherwise.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from cloudcore._dn import values_of_dn

BLOCK = 2048  # pixels per block: n × BLOCK float64 scratch stays in L2
# Reassociation lets LLVM vectorise the reductions; no NaN/inf assumptions (masked entries are
# never NaN inside the kernels, but we keep IEEE semantics anyway).
FASTMATH = {"reassoc", "contract", "nsz"}

#: The ``div`` of the kernels' D when D holds the values themselves (float32 or float64).
AS_STORED = np.float32(1.0)


def block_values(D, div, p0, m):
    """The block of pixels ``p0 : p0 + m`` of D as the solver sees them, and where it starts:
    ``(D, p0)`` when D holds the values (float32 or float64), ``(values, 0)`` when D holds
    integer DN (scene scope's compact D, :class:`cloudcore.scene.Block`), each divided back
    once per block into an n × m float32 array by the same IEEE division that staged it
    (float32(DN) / float32(max_dn), ``pipeline.stage.values``), so the solver sees the same
    bits. Compiled code inlines :func:`_block_values_impl`'s version for the type at hand."""
    if D.dtype.kind == "f":
        return D, p0
    return values_of_dn(D[:, p0 : p0 + m], div), 0


@overload(block_values, inline="always")
def _block_values_impl(D, div, p0, m):  # pragma: no cover - compiled
    if isinstance(D.dtype, types.Float):
        return lambda D, div, p0, m: (D, p0)

    def decode(D, div, p0, m):
        out = np.empty((D.shape[0], m), np.float32)
        for j in range(D.shape[0]):
            Dj, oj = D[j, p0 : p0 + m], out[j]
            for p in range(m):
                oj[p] = np.float32(Dj[p]) / div
        return out, 0

    return decode


@njit(cache=True)
def _partial_grams(n, d):  # pragma: no cover - compiled
    """Zeroed n × n accumulators, one per block of ``d`` pixels (summed in block order)."""
    return np.zeros(((d + BLOCK - 1) // BLOCK, n, n))


@njit(cache=True)
def _block(b, d, n):  # pragma: no cover - compiled
    """First pixel ``p0`` and length ``m`` of block ``b`` of ``d`` pixels, and n × m scratch."""
    p0 = b * BLOCK
    m = min(d, p0 + BLOCK) - p0
    return p0, m, np.empty((n, m))


@njit(cache=True, fastmath=FASTMATH)
def _gram_block(a, m, parts, b):  # pragma: no cover - compiled
    """Gram matrix of the block scratch ``a`` (n × m) into ``parts[b]``."""
    n = a.shape[0]
    for j in range(n):
        aj = a[j]
        for k in range(j, n):
            ak = a[k]
            acc = 0.0
            for p in range(m):
                acc += aj[p] * ak[p]
            parts[b, j, k] = acc
            parts[b, k, j] = acc


@njit(cache=True)
def _sum_blocks(parts):  # pragma: no cover - compiled
    """Sum of the per-block Gram matrices, in block order (thread-count independent)."""
    total = np.zeros(parts.shape[1:])
    for b in range(parts.shape[0]):
        total += parts[b]
    return total


@njit(cache=True, parallel=True, nogil=True, fastmath=FASTMATH)
def gram(X, div=AS_STORED):  # pragma: no cover - compiled
    """X·Xᵀ in float64 for X (n × d), float32 or float64, or integer DN read as
    :func:`block_values` with ``div``."""
    n, d = X.shape
    parts = _partial_grams(n, d)
    for b in prange(parts.shape[0]):
        p0, m, a = _block(b, d, n)
        Xv, q0 = block_values(X, div, p0, m)
        for j in range(n):
            xj = Xv[j, q0 : q0 + m]
            aj = a[j]
            for p in range(m):
                aj[p] = xj[p]
        _gram_block(a, m, parts, b)
    return _sum_blocks(parts)


@njit(inline="always")
def _shrink(t, tj, neg, clip_c, c_floor):  # pragma: no cover - compiled
    """The sparse step of one entry: soft threshold ``tj`` above and ``neg``·``tj`` below,
    clipped to [``c_floor``, 1] if ``clip_c``."""
    c = max(t - tj, 0.0) + min(t + tj * neg, 0.0)
    if clip_c:
        c = min(max(c, c_floor), 1.0)
    return c


@njit(inline="always")
def _weights_row(weights, ones, weighted, j, p0, m):  # pragma: no cover - compiled
    """The weights of row ``j``'s pixels ``p0`` … ``p0`` + ``m``: ``weights``' own, or for an
    unweighted solve ``ones`` (thr · 1 = thr, the same bits). So one per-pixel loop serves both,
    with no test inside it: a test there kept LLVM from vectorising the loop
    (docs/PERFORMANCE.md, "The solver's pass vectorised")."""
    return weights[j, p0 : p0 + m] if weighted else ones[:m]


@njit(inline="always")
def _first_entry(p, rows, tj, sparse):  # pragma: no cover - compiled
    """Entry ``p`` of :func:`first_sparse_step`: A of iteration 1 (into ``aj``) from its C,
    returned. The caller stores the C returned: called as a statement whose value went unused,
    this inlined helper gave NaN in the Gram matrix (numba 0.68, 2026-11-30); keep it so."""
    Dj, Lj, Yj, Cj, aj, inv_mu = rows
    base = Dj[p] + Yj[p] * inv_mu
    Cj[p] = _shrink(base - Lj[p], tj, sparse[2], sparse[0], sparse[1])
    aj[p] = base - Cj[p]
    return Cj[p]


@njit(inline="always")
def _haze_entry(p, rows, tj, sparse):  # pragma: no cover - compiled
    """Entry ``p`` of :func:`fused_iteration`'s pass: L, N, Y and Z (into ``aj``) of iteration
    k stored, the sparse step of k + 1 returned. ``rows``: a block's rows of date j and the
    step's scalars; ``sparse``: (clip_c, c_floor, neg)."""
    Dj, Cj, Nj, Yj, Lj, lowj, aj, n_factor, mu, inv_mu, inv_mu_next = rows
    Lj[p] = lowj[p]
    lij = Lj[p]  # re-read: continue from the stored (possibly float32) value
    resid = Dj[p] - lij - Cj[p]
    Nj[p] = n_factor * (resid + Yj[p] * inv_mu)
    nij = Nj[p]
    z = resid - nij
    Yj[p] += mu * z
    aj[p] = z  # Z, kept for the residual and the mask fix-up
    base = Dj[p] - nij + Yj[p] * inv_mu_next
    return _shrink(base - lij, tj, sparse[2], sparse[0], sparse[1])


@njit(inline="always")
def _plain_entry(p, rows, tj, sparse):  # pragma: no cover - compiled
    """:func:`_haze_entry` with N = 0 (:func:`fused_iteration_no_haze`)."""
    Dj, Cj, Yj, Lj, lowj, aj, mu, inv_mu_next = rows
    Lj[p] = lowj[p]
    lij = Lj[p]
    z = Dj[p] - lij - Cj[p]
    Yj[p] += mu * z
    aj[p] = z
    base = Dj[p] + Yj[p] * inv_mu_next
    return _shrink(base - lij, tj, sparse[2], sparse[0], sparse[1])


@njit(inline="always")
def _fill_unobserved(aj, Lj, obs, j, p0, m):  # pragma: no cover - compiled
    """Unobserved entries of date ``j``'s block row: the SVT sees the current fill L there."""
    for p in range(m):  # a select, not a branch, so that it vectorises
        aj[p] = aj[p] if obs[j, p0 + p] else Lj[p]


@njit(inline="always")
def _low_rank(a, W):  # pragma: no cover - compiled
    """W·A of a block's scratch ``a`` (n × m): its SVT, in float64."""
    n, m = a.shape
    low = np.zeros((n, m))
    for j in range(n):
        aj = a[j]
        for k in range(n):
            wkj = W[k, j]
            lowk = low[k]
            for p in range(m):
                lowk[p] += wkj * aj[p]
    return low


@njit(cache=True)
def _in_block_order(parts, sums):  # pragma: no cover - compiled
    """The per-block Gram matrices and ‖Z‖² parts summed in block order."""
    total = 0.0
    for b in range(sums.size):
        total += sums[b]
    return _sum_blocks(parts), total


@njit(cache=True, parallel=True, nogil=True, fastmath=FASTMATH)
def first_sparse_step(
    D, div, L, Y, C, obs, weights, masked, weighted, lam, inv_mu, clip_c, c_floor, neg
):  # pragma: no cover - compiled
    """C ← shrink(D − L + Y/μ, λ/μ) (clipped to [c_floor, 1] if ``clip_c``; negative values
    are shrunk by ``neg``·λ/μ); return Gram(A). N is zero before the first iteration, so it
    is not an argument."""
    n, d = D.shape
    parts = _partial_grams(n, d)
    ones = np.ones(BLOCK, weights.dtype)  # an unweighted solve's weights (_weights_row)
    for b in prange(parts.shape[0]):
        p0, m, a = _block(b, d, n)
        Dv, q0 = block_values(D, div, p0, m)
        for j in range(n):
            Dj, Lj = Dv[j, q0 : q0 + m], L[j, p0 : p0 + m]
            Yj, Cj, aj = Y[j, p0 : p0 + m], C[j, p0 : p0 + m], a[j]
            thr = lam * inv_mu
            rows, sparse = (Dj, Lj, Yj, Cj, aj, inv_mu), (clip_c, c_floor, neg)
            wj = _weights_row(weights, ones, weighted, j, p0, m)
            for p in range(m):
                Cj[p] = _first_entry(p, rows, thr * wj[p], sparse)
            if masked:
                # Unobserved: no constraint, no cloud; the SVT sees the current fill L.
                for p in range(m):
                    if not obs[j, p0 + p]:
                        Cj[p] = 0.0
                _fill_unobserved(aj, Lj, obs, j, p0, m)
        _gram_block(a, m, parts, b)
    return _sum_blocks(parts)


@njit(cache=True, parallel=True, nogil=True, fastmath=FASTMATH)
def fused_iteration(
    D,
    div,
    C,
    C_next,
    N,
    Y,
    L,
    obs,
    weights,
    W,
    masked,
    weighted,
    clip_c,
    c_floor,
    neg,
    lam,
    mu,
    n_factor,
    mu_next,
):  # pragma: no cover - compiled
    """Finish iteration k and start k + 1 in one pass (the haze methods, aATM and
    aATM-shadow; :func:`fused_iteration_no_haze` is the same pass with N = 0).

    With C = C_k and the SVT weights W of A_k = D − C_k − N + Y/μ: L ← W·A_k,
    N ← n_factor·(D − L − C + Y/μ), Y ← Y + μZ, then the sparse step of iteration k + 1 with
    ``mu_next`` into ``C_next`` and Gram(A_{k+1}); with ``clip_c`` the sparse part is clipped
    to [``c_floor``, 1] (0 for aATM's cloud, −1 for the signed cloud-minus-shadow part of the
    shadow model), and its negative values shrunk by ``neg``·λ/μ (1 but for the shadow
    model's weight on S).
    Returns (Gram(A_{k+1}), ‖Z‖²_F). C is left untouched so that it still pairs with L and N if
    iteration k is the last one.
    """
    n, d = D.shape
    inv_mu = 1.0 / mu
    inv_mu_next = 1.0 / mu_next
    parts = _partial_grams(n, d)
    ones = np.ones(BLOCK, weights.dtype)  # an unweighted solve's weights (_weights_row)
    sums = np.zeros(parts.shape[0])
    for b in prange(parts.shape[0]):
        p0, m, a = _block(b, d, n)
        Dv, q0 = block_values(D, div, p0, m)
        for j in range(n):
            Dj, Cj, Nj = Dv[j, q0 : q0 + m], C[j, p0 : p0 + m], N[j, p0 : p0 + m]
            Yj, aj = Y[j, p0 : p0 + m], a[j]
            for p in range(m):
                aj[p] = Dj[p] - Cj[p] - Nj[p] + Yj[p] * inv_mu
            if masked:
                _fill_unobserved(aj, L[j, p0 : p0 + m], obs, j, p0, m)
        low = _low_rank(a, W)
        s = 0.0
        thr = lam * inv_mu_next
        sparse = (clip_c, c_floor, neg)
        for j in range(n):
            Dj, Cj, Nj = Dv[j, q0 : q0 + m], C[j, p0 : p0 + m], N[j, p0 : p0 + m]
            Yj, Lj, Cn = Y[j, p0 : p0 + m], L[j, p0 : p0 + m], C_next[j, p0 : p0 + m]
            lowj, aj = low[j], a[j]
            rows = (Dj, Cj, Nj, Yj, Lj, lowj, aj, n_factor, mu, inv_mu, inv_mu_next)
            # Branch-free over pixels so that it vectorises (docs/PERFORMANCE.md, "The solver's
            # pass vectorised"); masks are applied afterwards.
            wj = _weights_row(weights, ones, weighted, j, p0, m)
            for p in range(m):
                Cn[p] = _haze_entry(p, rows, thr * wj[p], sparse)
            if masked:
                # Unobserved: no constraint (Z = 0; Y, N, C stay 0) and the fill is L.
                for p in range(m):  # selects, not a branch, so that it vectorises
                    seen = obs[j, p0 + p]
                    aj[p] = aj[p] if seen else 0.0
                    Yj[p] = Yj[p] if seen else 0.0
                    Nj[p] = Nj[p] if seen else 0.0
                    Cn[p] = Cn[p] if seen else 0.0
            for p in range(m):
                s += aj[p] * aj[p]
            for p in range(m):
                aj[p] = Dj[p] - Nj[p] + Yj[p] * inv_mu_next - Cn[p]
            if masked:
                _fill_unobserved(aj, Lj, obs, j, p0, m)
        _gram_block(a, m, parts, b)
        sums[b] = s
    return _in_block_order(parts, sums)


@njit(cache=True, parallel=True, nogil=True, fastmath=FASTMATH)
def fused_iteration_no_haze(
    D,
    div,
    C,
    C_next,
    Y,
    L,
    obs,
    weights,
    W,
    masked,
    weighted,
    clip_c,
    c_floor,
    neg,
    lam,
    mu,
    mu_next,
):  # pragma: no cover - compiled
    """:func:`fused_iteration` with N = 0 throughout (RPCA, NN-RPCA and weighted RPCA): the
    same arithmetic without reading or writing N, so a solve neither streams N through every
    iteration (8 % of an iteration's time) nor touches its pages (they stay the zero pages of
    ``np.zeros``: no memory until written). Results are bitwise those of
    :func:`fused_iteration` with ``n_factor`` = 0 (x − 0 = x)."""
    n, d = D.shape
    inv_mu = 1.0 / mu
    inv_mu_next = 1.0 / mu_next
    parts = _partial_grams(n, d)
    ones = np.ones(BLOCK, weights.dtype)  # an unweighted solve's weights (_weights_row)
    sums = np.zeros(parts.shape[0])
    for b in prange(parts.shape[0]):
        p0, m, a = _block(b, d, n)
        Dv, q0 = block_values(D, div, p0, m)
        for j in range(n):
            Dj, Cj, Yj, aj = Dv[j, q0 : q0 + m], C[j, p0 : p0 + m], Y[j, p0 : p0 + m], a[j]
            for p in range(m):
                aj[p] = Dj[p] - Cj[p] + Yj[p] * inv_mu
            if masked:
                _fill_unobserved(aj, L[j, p0 : p0 + m], obs, j, p0, m)
        low = _low_rank(a, W)
        s = 0.0
        thr = lam * inv_mu_next
        sparse = (clip_c, c_floor, neg)
        for j in range(n):
            Dj, Cj, Yj = Dv[j, q0 : q0 + m], C[j, p0 : p0 + m], Y[j, p0 : p0 + m]
            Lj, Cn, lowj, aj = L[j, p0 : p0 + m], C_next[j, p0 : p0 + m], low[j], a[j]
            rows = (Dj, Cj, Yj, Lj, lowj, aj, mu, inv_mu_next)
            wj = _weights_row(weights, ones, weighted, j, p0, m)
            for p in range(m):
                Cn[p] = _plain_entry(p, rows, thr * wj[p], sparse)
            if masked:
                for p in range(m):
                    seen = obs[j, p0 + p]
                    aj[p] = aj[p] if seen else 0.0
                    Yj[p] = Yj[p] if seen else 0.0
                    Cn[p] = Cn[p] if seen else 0.0
            for p in range(m):
                s += aj[p] * aj[p]
            for p in range(m):
                aj[p] = Dj[p] + Yj[p] * inv_mu_next - Cn[p]
            if masked:
                _fill_unobserved(aj, Lj, obs, j, p0, m)
        _gram_block(a, m, parts, b)
        sums[b] = s
    return _in_block_order(parts, sums)


def fused_step(*args):
    """One fused ALM pass, with :func:`fused_iteration`'s arguments: that kernel, or
    :func:`fused_iteration_no_haze` when ``n_factor`` is 0 (the methods without haze: N stays
    zero and is not touched)."""
    *head, n_factor, mu_next = args
    if n_factor == 0.0:
        without_n = [*head[:4], *head[5:], mu_next]  # N (the 5th) and n_factor left out
        return fused_iteration_no_haze(*without_n)
    return fused_iteration(*args)
