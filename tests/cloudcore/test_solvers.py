"""decompose(): exactness against the reference, precision, missing data, degenerate input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cloudcore
from cloudcore import ConvergenceWarning, decompose, recovery_error
from cloudcore.reference import literal_alm
from tests.cloudcore.conftest import GOLDEN, REFERENCE_METHOD


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_reproduces_reference_solutions(path):
    z = np.load(path)
    method = REFERENCE_METHOD[str(z["reference"])]
    res = decompose(
        z["D"],
        method,
        lam=float(z["lam"]),
        beta=float(z["beta"]),
        tol=float(z["tol"]),
        max_iter=int(z["max_iter"]),
    )
    assert res.converged
    # float64 against the reference code's float64 solutions (tests/data/golden). The two take
    # the SVT differently (a full SVD there; here the eigen-decomposition of the Gram matrix,
    # which resolves singular values far below σ₁ only to √u·σ₁, and those are thresholded
    # away): they agree to ~1e-11 (cloudcore/svt.py). 1e-8 is 10⁸ u, beyond what any CPU's
    # float64 rounding reaches, and one wrong step (λ, μ, the shrinkage) moves L by far more.
    assert rel(res.L, z["L"]) < 1e-8
    assert rel(res.C, z["C"]) < 1e-8
    if np.any(z["N"]):
        assert rel(res.N, z["N"]) < 1e-8
    else:
        assert not np.any(res.N)


def test_float32_recovers_as_well_as_float64(case_64x7):
    truth = case_64x7.truth.ravel()
    r64 = recovery_error(decompose(case_64x7.D, "aatm").ground, truth)
    res32 = decompose(case_64x7.D.astype(np.float32), "aatm")
    assert res32.L.dtype == np.float32
    assert abs(recovery_error(res32.ground, truth) - r64) < 0.01 * r64


@settings(
    max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    method=st.sampled_from(["aatm", "rpca", "nnrpca"]),
    d=st.integers(30, 300),
    n=st.integers(2, 9),
    seed=st.integers(0, 2**31),
    lam_scale=st.floats(0.3, 3.0),
)
def test_matches_literal_port_on_random_input(method, d, n, seed, lam_scale):
    rng = np.random.default_rng(seed)
    ground = np.outer(rng.random(d), 0.5 + 0.5 * rng.random(n))
    clouds = (rng.random((d, n)) < 0.15) * rng.random((d, n))
    D = np.clip(clouds + (1 - clouds) * ground, 0, 1)
    lam = lam_scale / np.sqrt(d)
    L, C, N, it = literal_alm(D, lam, method=method, beta=2.0, max_iter=200)
    res = decompose(D, method, lam=lam, beta=2.0, max_iter=200)
    assert res.iterations == it
    # float64, full SVD (the port) against the Gram route (cloudcore.svt): measured ≤ 3e-11 for
    # L and 6e-13 for C and N over 40 such cases; the bounds leave the Gram route's √u ≈ 1.5e-8
    # (singular values near the threshold) several times over, and are far from a wrong result.
    assert rel(res.L, L) < 1e-7
    assert np.allclose(res.C, C, atol=1e-7)
    assert np.allclose(res.N, N, atol=1e-7)


def test_result_independent_of_thread_count(case_64x7):
    one = decompose(case_64x7.D, "aatm", threads=1)
    two = decompose(case_64x7.D, "aatm", threads=2)
    assert np.array_equal(one.L, two.L) and np.array_equal(one.C, two.C)


@pytest.mark.parametrize("method", ["aatm", "rpca", "nnrpca", "atm"])
def test_every_method_removes_clouds(case_64x7, method):
    truth = case_64x7.truth.ravel()
    res = decompose(case_64x7.D, method)
    assert res.converged and res.residual < 1e-7
    assert recovery_error(res.ground, truth) < recovery_error(case_64x7.D, truth)


def test_aatm_beats_rpca_at_default_lambda(case_64x7):
    truth = case_64x7.truth.ravel()
    r_aatm = recovery_error(decompose(case_64x7.D, "aatm").ground, truth)
    r_rpca = recovery_error(decompose(case_64x7.D, "rpca").ground, truth)
    assert r_aatm < r_rpca


# --- missing data ---------------------------------------------------------------------------


def test_hidden_entries_are_filled_from_the_low_rank_part(case_64x7):
    rng = np.random.default_rng(3)
    D = case_64x7.D
    hidden = rng.random(D.shape) < 0.2
    truth = np.repeat(case_64x7.truth.ravel()[:, None], D.shape[1], axis=1)
    masked = decompose(np.where(hidden, np.nan, D), "aatm", mask=~hidden)
    full = decompose(D, "aatm")
    err_masked = rel(masked.ground[hidden], truth[hidden])
    err_full = rel(full.ground[hidden], truth[hidden])
    # As good on the hidden entries as a solve that saw them, and far from a blind fill.
    assert err_masked < 0.2
    assert err_masked < 1.25 * err_full
    assert np.all(masked.C[hidden] == 0) and np.all(masked.N[hidden] == 0)


def test_pixel_observed_on_no_date_is_nan(case_64x7):
    D = case_64x7.D.copy()
    mask = np.ones(D.shape, dtype=bool)
    mask[:10] = False  # a no-data border: these pixels are seen on no date
    mask[10:20, 0] = False  # and these on one date only
    res = decompose(np.where(mask, D, np.nan), "aatm", mask=mask)
    assert np.isnan(res.L[:10]).all() and np.isnan(res.C[:10]).all()
    assert np.isfinite(res.L[10:]).all()


def test_pixels_seen_on_no_date_keep_the_layout_of_every_result(case_64x7):
    """With rows seen on no date dropped and expanded back as NaN, each layer is still a (d, n)
    view of a dates × pixels array, as every other result is (the cap, a tile's stack and its
    blend work on it in place), and bit for bit the solve of the other rows."""
    D = case_64x7.D.copy()
    mask = np.ones(D.shape, dtype=bool)
    mask[:10] = False
    mask[10:20, 0] = False
    data = np.where(mask, D, np.nan)
    res = decompose(data, "aatm", lam=0.05, mask=mask)
    rest = decompose(data[10:], "aatm", lam=0.05, mask=mask[10:])
    for got, want in ((res.L, rest.L), (res.C, rest.C), (res.N, rest.N)):
        assert got.T.flags.c_contiguous
        assert np.isnan(got[:10]).all()
        assert np.array_equal(got[10:], want)
    # The defined answer for a D of zeros (nothing iterated) has the same layout.
    zero = decompose(np.where(mask, 0.0, np.nan), "aatm", lam=0.05, mask=mask)
    for got in (zero.L, zero.C, zero.N):
        assert got.T.flags.c_contiguous
        assert np.isnan(got[:10]).all() and (got[10:] == 0).all()


def test_nothing_observed_gives_nan_not_an_error():
    D = np.full((300, 5), np.nan)
    res = decompose(D, "aatm", mask=np.zeros(D.shape, dtype=bool))
    assert res.converged and res.iterations == 0
    assert np.isnan(res.L).all() and res.L.shape == (300, 5)


def test_mask_without_missing_entries_equals_no_mask(case_64x7):
    D = case_64x7.D
    a = decompose(D, "aatm", mask=np.ones(D.shape, dtype=bool))
    b = decompose(D, "aatm")
    assert np.array_equal(a.L, b.L)


# --- degenerate input -----------------------------------------------------------------------


def test_all_zero_input_has_a_defined_answer():
    res = decompose(np.zeros((100, 5)), "aatm")
    assert res.converged and res.iterations == 0
    assert not res.L.any() and not res.C.any() and not res.N.any()


def test_constant_input_is_all_ground():
    D = np.full((400, 6), 0.4)
    res = decompose(D, "aatm")
    assert res.converged
    assert np.allclose(res.L + res.N, D, atol=1e-5)
    assert np.abs(res.C).max() < 1e-6


@pytest.mark.parametrize(
    ("D", "kwargs", "message"),
    [
        (np.full((50, 1), 0.5), {}, "at least 2 dates"),
        (np.full((50,), 0.5), {}, "2-D"),
        (np.where(np.eye(50, 4) > 0, np.nan, 0.5), {}, "pass mask="),
        (np.full((50, 4), np.inf), {}, "NaN/inf"),
        (np.full((50, 4), 1.7), {}, "outside \\[0, 1\\]"),
        (np.full((50, 4), -0.2), {}, "outside \\[0, 1\\]"),
        (np.full((50, 4), 0.5), {"method": "pca"}, "unknown method"),
        (np.full((50, 4), 0.5), {"lam": -1.0}, "lam must be"),
        (np.full((50, 4), 0.5), {"beta": 0.0}, "beta must be"),
        (np.full((50, 4), 0.5), {"max_iter": 0}, "max_iter"),
        (np.full((50, 4), 0.5), {"rho": 1.0}, "rho must be > 1"),
        (np.full((50, 4), 0.5), {"rho": np.nan}, "rho must be > 1"),
        (np.full((50, 4), 0.5), {"mask": np.ones((50, 3), bool)}, "mask must be"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(D, kwargs, message):
    with pytest.raises(ValueError, match=message):
        decompose(D, **kwargs)


@pytest.mark.parametrize("method", ["aatm", "rpca", "atm"])
def test_rho_is_the_growth_a_study_would_set_and_only_for_its_call(case_64x7, method):
    """``decompose(rho=…)`` solves as the same call under a study's ``mu_growth`` does, bit for
    bit; it changes nothing for the next call (the paper's 1.5 stays cloudcore's default); and
    a larger ρ takes fewer iterations."""
    from cloudcore._growth import mu_growth

    D = case_64x7.D.astype(np.float32)
    paper = decompose(D, method, tol=1e-5)
    given = decompose(D, method, tol=1e-5, rho=2.0)
    with mu_growth(2.0):
        studied = decompose(D, method, tol=1e-5)
    assert given.iterations == studied.iterations < paper.iterations
    assert np.array_equal(given.L, studied.L) and np.array_equal(given.C, studied.C)
    again = decompose(D, method, tol=1e-5)
    assert again.iterations == paper.iterations and np.array_equal(again.L, paper.L)


def test_nan_at_an_observed_entry_is_refused():
    D = np.full((50, 4), 0.5)
    D[3, 1] = np.nan
    with pytest.raises(ValueError, match="marks as observed"):
        decompose(D, mask=np.ones(D.shape, dtype=bool))


def test_fewer_pixels_than_dates_solves_the_transpose(case_64x7):
    wide = np.ascontiguousarray(case_64x7.D[:40].T)  # d = 7 pixels < n = 40 dates
    lam = 0.2
    a = decompose(wide, "aatm", lam=lam)
    b = decompose(np.ascontiguousarray(wide.T), "aatm", lam=lam)
    assert a.L.shape == (7, 40)
    assert np.allclose(a.L, b.L.T, atol=1e-10)


def test_non_convergence_warns_and_is_reported(case_64x7):
    with pytest.warns(ConvergenceWarning, match="did not converge in 3 iterations"):
        res = decompose(case_64x7.D, "aatm", max_iter=3)
    assert not res.converged and res.iterations == 3 and res.residual > 1e-7


def test_warn_false_reports_non_convergence_without_a_warning(case_64x7):
    # For callers that solve in threads and record convergence themselves (the pipeline):
    # warnings.catch_warnings around the call is not thread-safe.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = decompose(case_64x7.D, "aatm", max_iter=3, warn=False)
        masked = decompose(
            case_64x7.D, "aatm", max_iter=3, mask=np.ones(case_64x7.D.shape, bool), warn=False
        )
    assert not res.converged and res.iterations == 3
    assert not masked.converged


def test_convergence_emits_no_warning(case_64x7):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decompose(case_64x7.D, "rpca")


def test_default_lambda_is_one_over_sqrt_d(case_64x7):
    res = decompose(case_64x7.D, "rpca")
    assert res.lam == pytest.approx(1 / np.sqrt(case_64x7.D.shape[0]))
    assert cloudcore.METHODS == ("aatm", "aatm-shadow", "rpca", "nnrpca", "atm")


def test_ground_in_place_is_the_ground_in_l_own_memory(case_64x7):
    res = decompose(case_64x7.D, "rpca", mask=case_64x7.D > 0.02)
    res.L[:3] += 2.0  # values out of [0, 1] to clip, and a NaN row kept
    res.L[3] -= 2.0
    res.L[4] = np.nan
    expected = res.ground
    out = res.ground_in_place()
    assert np.shares_memory(out, res.L)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(res.L, expected)
    assert np.nanmin(res.L) >= 0.0 and np.nanmax(res.L) <= 1.0 and np.isnan(res.L[4]).all()
