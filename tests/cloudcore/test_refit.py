"""Masked solves fill without bias (issue #14): the refit of partly observed dates.

On the paper's real image with simulated clouds, one date's footprint ends a third of the way
in. The ALM alone returns that date far too dark, in the strip it did not see and on the pixels
it saw; the refit (:mod:`cloudcore.refit`) brings both within 5 % of the truth.
"""

from __future__ import annotations

import numpy as np
import pytest

import cloudcore
import cloudcore.refit
from cloudcore.simulate import SimulatedSeries, paper_case

SHORT = 3  # the date whose footprint ends early


@pytest.fixture(scope="module")
def footprint_case(tyrol_rgb: np.ndarray) -> tuple[SimulatedSeries, np.ndarray, np.ndarray]:
    """tyrol-w1 at 256², 7 dates, reference clouds; date 3 sees only the left third."""
    sim = paper_case(tyrol_rgb, 7, size=256, rng=np.random.default_rng(0))
    n, h, w = sim.observed.shape
    mask = np.ones((n, h, w), bool)
    mask[SHORT, :, w // 3 :] = False
    D = sim.observed.reshape(n, -1).T.copy()
    M = mask.reshape(n, -1).T.copy()
    D[~M] = np.nan
    return sim, D, M


def _solve(D: np.ndarray, M: np.ndarray, *, refit: bool = True) -> cloudcore.Decomposition:
    lam = cloudcore.lambda_star(D.shape[0], D.shape[1])
    return cloudcore.decompose(D, "aatm", lam=lam, mask=M, refit=refit)


@pytest.fixture(scope="module")
def solved(footprint_case) -> tuple[cloudcore.Decomposition, cloudcore.Decomposition]:
    """The footprint case solved without the refit and with it (once for the module)."""
    _, D, M = footprint_case
    return _solve(D, M, refit=False), _solve(D, M)


def test_partly_observed_date_is_unbiased_on_real_ground(footprint_case, solved) -> None:
    sim, _, M = footprint_case
    truth = sim.truth.ravel()
    unseen, seen = ~M[:, SHORT], M[:, SHORT]
    raw, fixed = (x.ground[:, SHORT] for x in solved)
    # Without the refit the date comes back dark, where it was not seen and where it was.
    assert raw[unseen].mean() < 0.6 * truth[unseen].mean()
    assert raw[seen].mean() < 0.8 * truth[seen].mean()
    # With it, both are within 5 % of the truth's mean, and the fill tracks the ground.
    assert fixed[unseen].mean() == pytest.approx(truth[unseen].mean(), rel=0.05)
    assert fixed[seen].mean() == pytest.approx(truth[seen].mean(), rel=0.05)
    assert np.corrcoef(fixed[unseen], truth[unseen])[0, 1] > 0.9
    assert cloudcore.recovery_error(fixed[unseen], truth[unseen]) < 0.15


def test_refit_keeps_the_other_dates_and_the_constraint(footprint_case, solved) -> None:
    _, D, M = footprint_case
    raw, fixed = solved
    others = [t for t in range(D.shape[1]) if t != SHORT]
    # Fully observed dates keep the ALM's output bit for bit.
    np.testing.assert_array_equal(fixed.L[:, others], raw.L[:, others])
    np.testing.assert_array_equal(fixed.C[:, others], raw.C[:, others])
    # The refitted date still satisfies D = L + C + N where observed, with C in [0, 1] ...
    o = M[:, SHORT]
    total = fixed.L[o, SHORT] + fixed.C[o, SHORT] + fixed.N[o, SHORT]
    np.testing.assert_allclose(total, D[o, SHORT], atol=1e-12)
    assert fixed.C[o, SHORT].min() >= 0 and fixed.C[o, SHORT].max() <= 1
    # ... and has no cloud or haze where it was not observed.
    assert not fixed.C[~o, SHORT].any() and not fixed.N[~o, SHORT].any()


def test_unmasked_and_all_observed_solves_are_unchanged(footprint_case) -> None:
    sim, _, _ = footprint_case
    D = sim.observed.reshape(sim.observed.shape[0], -1).T[:4096].copy()
    plain = cloudcore.decompose(D, "aatm")
    masked = cloudcore.decompose(D, "aatm", mask=np.ones(D.shape, bool))
    np.testing.assert_array_equal(plain.L, masked.L)


@pytest.mark.parametrize("method", ["aatm", "rpca", "nnrpca", "atm"])
def test_date_observed_nowhere_is_nan(footprint_case, method: str) -> None:
    sim, _, _ = footprint_case
    D = sim.observed.reshape(sim.observed.shape[0], -1).T[:2048].copy()
    M = np.ones(D.shape, bool)
    M[:, 2] = False
    D[:, 2] = np.nan
    res = cloudcore.decompose(D, method, mask=M, max_iter=200)
    for x in (res.L, res.C, res.N, res.ground):
        assert np.isnan(x[:, 2]).all()
        assert np.isfinite(np.delete(x, 2, axis=1)).all()


# The refit and the refinement write into arrays they own instead of allocating one per step
# (under the pipeline's 8 MiB mmap threshold every such array was paged in afresh). These check
# that they compute what the plain expressions compute, bit for bit.


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 18])
@pytest.mark.parametrize("most", [1, 5, 40, 10_000])
def test_strided_rows_are_every_sth_observed_row(block: int, most: int) -> None:
    rng = np.random.default_rng(block + most)
    for share in (0.0, 0.03, 0.5, 1.0):
        observed = rng.random(1000) < share
        count = int(observed.sum())
        step = max(-(-count // most), 1)
        expected = np.flatnonzero(observed)[::step]
        got = cloudcore.refit.strided_rows(observed, most, block)
        assert got.size <= most
        assert np.array_equal(got, expected)


def _split_on_observed(r, low, method, lam, beta, kappa):
    """The re-split as the refit wrote it before it worked in place (on the observed entries)."""
    if method == "aatm":
        c = np.clip(r - lam / beta, 0.0, 1.0)
        return c, r - c
    if method == "aatm-shadow":
        t = lam / beta
        e = np.clip(np.maximum(r - t, 0.0) + np.minimum(r + kappa * t, 0.0), -1.0, 1.0)
        return e, r - e
    if method == "atm":
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(low < 1.0, r / (1.0 - low), 0.0)
        return np.clip(c, 0.0, 1.0), None
    return r, None


@pytest.mark.parametrize("method", cloudcore.METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_set_column_in_place_matches_the_split_on_observed_entries(method, dtype) -> None:
    rng = np.random.default_rng(3)
    d = 5000
    observed = rng.random(d) < 0.7
    data = np.where(observed, rng.random(d), 0.0).astype(dtype)
    column = rng.normal(0.5, 0.4, d)  # float64, some above 1 (ATM's guard) and below 0
    column[:3] = 1.0
    low, cloud, haze = (np.full(d, 9.0, dtype) for _ in range(3))
    basis, coef = column[:, None], np.ones(1)  # basis @ coef = column, exactly
    cloudcore.refit.set_column(
        basis, coef, data, observed, low, cloud, haze, method, 0.02, 1.5, 0.7, np.empty((3, d))
    )
    c, n = _split_on_observed(
        data[observed] - column[observed], column[observed], method, 0.02, 1.5, 0.7
    )
    want_cloud = np.zeros(d, dtype)
    want_cloud[observed] = c
    assert np.array_equal(low, column.astype(dtype))
    assert np.array_equal(cloud, want_cloud)
    if n is None:
        assert (haze == 9.0).all()  # left as it was
    else:
        want_haze = np.zeros(d, dtype)
        want_haze[observed] = n
        assert np.array_equal(haze, want_haze)


def _pinball(residual: np.ndarray, q: float) -> float:
    return float(np.sum(np.where(residual > 0, q * residual, (q - 1.0) * residual)))


@pytest.mark.parametrize(("k", "q"), [(1, 0.17), (3, 0.17), (3, 0.5), (5, 0.8)])
def test_fit_column_reaches_the_quantile_regression_optimum(k: int, q: float) -> None:
    """The compiled IRLS minimises the pinball loss: its loss is the exact optimum's (a linear
    program, solved by HiGHS) up to what its weight floor leaves, IRLS_FLOOR per row."""
    from scipy import sparse
    from scipy.optimize import linprog

    rng = np.random.default_rng(k)
    rows = 4000
    U = np.linalg.qr(rng.normal(size=(rows, k)))[0]
    truth = rng.uniform(0.2, 1.0, k)
    # A ground plus noise, and clouds that only brighten a fifth of the rows.
    y = U @ truth + rng.normal(0, 1e-3, rows) + (rng.random(rows) < 0.2) * rng.uniform(0, 0.5, rows)
    coef = cloudcore.refit.fit_column(U, y, q)
    # min q·1ᵀu + (1 − q)·1ᵀv  subject to  U c + u − v = y,  u, v ≥ 0  (c free)
    cost = np.concatenate([np.zeros(k), np.full(rows, q), np.full(rows, 1.0 - q)])
    equal = sparse.hstack([sparse.csr_array(U), sparse.eye_array(rows), -sparse.eye_array(rows)])
    bounds = [(None, None)] * k + [(0, None)] * (2 * rows)
    exact = linprog(cost, A_eq=equal, b_eq=y, bounds=bounds, method="highs").x[:k]
    best = _pinball(y - U @ exact, q)
    assert _pinball(y - U @ coef, q) <= best + rows * cloudcore.refit.IRLS_FLOOR
    assert np.abs(coef - exact).max() < 1e-3 * np.abs(exact).max()
