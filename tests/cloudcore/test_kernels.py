"""The fused ALM kernels: the RPCA family's pass without N is the haze pass with N = 0; D held as
16-bit DN is read as the float32 quotient it came from."""

import numpy as np
import pytest

from cloudcore import decompose

# The kernels are an internal layer (cloudcore._kernels, private to the package): their contract,
# the same bits from the pass with and without N, can only be checked on them directly, so this
# test imports their public functions by the module's path rather than making them public API.
from cloudcore._kernels import (
    AS_STORED,
    BLOCK,
    first_sparse_step,
    fused_iteration,
    fused_step,
    gram,
)

SPARSE_RULES = [(True, 0.0, 1.0), (False, 0.0, 1.0), (True, -1.0, 2.0)]  # aATM, RPCA, shadow


def _run(fused, D, obs, weights, masked, weighted, sparse, n_factor, div=AS_STORED):
    """Six ALM passes from the same start; every array and every returned value. ``D`` holds
    the values, or with ``div`` the uint16 DN whose float32 quotient by ``div`` they are."""
    values = D if D.dtype.kind == "f" else D.astype(np.float32) / div
    Y = (values / 3).astype(values.dtype)
    L, N = np.zeros_like(values), np.zeros_like(values)
    C = [np.zeros_like(values), np.empty_like(values)]
    gram = first_sparse_step(D, div, L, Y, C[0], obs, weights, masked, weighted, 0.1, 2.0, *sparse)
    returned = [gram]
    mu = 0.5
    for _ in range(6):
        evals, evecs = np.linalg.eigh(gram)
        W = (evecs * (evals > 1.0)) @ evecs.T * 0.9  # any symmetric weights will do
        gram, z2 = fused(
            D,
            div,
            C[0],
            C[1],
            N,
            Y,
            L,
            obs,
            weights,
            W,
            masked,
            weighted,
            *sparse,
            0.1,
            mu,
            n_factor,
            1.5 * mu,
        )
        returned += [gram, np.array(z2)]
        C.reverse()
        mu *= 1.5
    return [L, C[0], N, Y, *returned]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", SPARSE_RULES)
def test_the_pass_without_haze_has_the_bits_of_the_haze_pass_with_n_zero(
    dtype, masked, weighted, sparse
):
    rng = np.random.default_rng(7)
    n, d = 7, 3 * BLOCK + 5  # several blocks, the last one short
    D = rng.random((n, d)).astype(dtype)
    obs = rng.random((n, d)) > 0.2 if masked else np.ones((1, 1), bool)
    if masked:
        D[~obs] = 0.0
    weights = (rng.random((n, d)) + 0.5).astype(dtype) if weighted else np.zeros((1, 1), dtype)
    args = (D, obs, weights, masked, weighted, sparse, 0.0)
    with_n = _run(fused_iteration, *args)
    without = _run(fused_step, *args)  # n_factor 0: the pass without N
    for a, b in zip(with_n, without, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_fused_step_takes_the_haze_pass_when_n_factor_is_set():
    rng = np.random.default_rng(3)
    D = rng.random((5, 1000)).astype(np.float32)
    args = (D, np.ones((1, 1), bool), np.zeros((1, 1), np.float32), False, False, SPARSE_RULES[0])
    haze = _run(fused_step, *args, 0.4)
    assert np.abs(haze[2]).max() > 0  # N moved
    assert all(
        np.array_equal(a, b) for a, b in zip(haze, _run(fused_iteration, *args, 0.4), strict=True)
    )


def test_rpca_leaves_its_zero_haze_untouched():
    """N of the RPCA family is never written: still zero after a masked solve and its refit."""
    rng = np.random.default_rng(5)
    D = rng.random((4096, 6)).astype(np.float32)
    mask = rng.random(D.shape) > 0.1
    result = decompose(D, "rpca", mask=mask, max_iter=30)
    assert np.array_equal(result.N, np.zeros_like(result.N))


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("n_factor", [0.0, 0.4])  # the pass without haze and the haze pass
@pytest.mark.parametrize("sparse", SPARSE_RULES)
def test_d_held_as_dn_gives_the_bits_of_its_float32_quotient(masked, n_factor, sparse):
    """Scene scope's compact D (cloudcore.scene.Block with max_dn): the kernels divide each DN
    back as staging did (float32(DN) / float32(max_dn)), so every array and every reduction is
    bit for bit that of the float32 values."""
    rng = np.random.default_rng(11)
    n, d, max_dn = 7, 2 * BLOCK + 9, 1023.0
    dn = rng.integers(0, int(max_dn) + 1, size=(n, d)).astype(np.uint16)
    obs = rng.random((n, d)) > 0.2 if masked else np.ones((1, 1), bool)
    if masked:
        dn[~obs] = 0
    values = dn.astype(np.float32) / np.float32(max_dn)  # what staging writes
    weights = np.zeros((1, 1), np.float32)
    args = (obs, weights, masked, False, sparse, n_factor)
    as_values = _run(fused_step, values, *args)
    as_dn = _run(fused_step, dn, *args, div=np.float32(max_dn))
    for a, b in zip(as_values, as_dn, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(gram(values), gram(dn, np.float32(max_dn)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_factor", [0.0, 0.4])
@pytest.mark.parametrize("sparse", SPARSE_RULES)
def test_the_masked_and_weighted_paths_reduce_to_the_plain_pass(dtype, n_factor, sparse):
    """A mask that observes every entry and weights of one change nothing: the masked path's
    fix-ups are selects that keep every computed value, and λ/μ · 1 is λ/μ, so each path gives
    the plain pass's bits. (Their tests sit outside the per-pixel loops, which then vectorise:
    docs/PERFORMANCE.md, "The solver's pass vectorised".)"""
    rng = np.random.default_rng(13)
    n, d = 7, 2 * BLOCK + 3
    D = rng.random((n, d)).astype(dtype)
    plain = _run(
        fused_step,
        D,
        np.ones((1, 1), bool),
        np.zeros((1, 1), dtype),
        False,
        False,
        sparse,
        n_factor,
    )
    every = np.ones((n, d), bool)
    ones = np.ones((n, d), dtype)
    for obs, weights, masked, weighted in [
        (every, np.zeros((1, 1), dtype), True, False),
        (np.ones((1, 1), bool), ones, False, True),
        (every, ones, True, True),
    ]:
        other = _run(fused_step, D, obs, weights, masked, weighted, sparse, n_factor)
        for a, b in zip(plain, other, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
