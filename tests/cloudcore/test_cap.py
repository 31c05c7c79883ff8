"""The ground capped at each pixel's median date (:func:`cloudcore.cap_ground`).

A date overcast over a whole matrix is taken into the low-rank ground by every ALM solver here
(a cloud spread over a column is cheaper in the nuclear norm than in ℓ1); the cap puts it back
into the cloud layer, where the mask finds it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cloudcore
from cloudcore.cap import cap_ground
from cloudcore.masks import CLEAR, CLOUD, MaskRule, classify_result

D_PIX, N_DATES, OVERCAST = 4096, 9, 4


def _overcast_series(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A rank-2 ground (d × n) that changes between dates, and the series with date
    :data:`OVERCAST` under a cloud deck on every pixel (reflectance 0.55–0.65)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(0.05, 0.3, (D_PIX, 2))
    v = np.stack([np.ones(N_DATES), 0.2 * np.sin(np.arange(N_DATES))])
    ground = np.clip(u @ v + rng.normal(0, 0.004, (D_PIX, N_DATES)), 0.0, 1.0)
    D = ground.copy()
    D[:, OVERCAST] = rng.uniform(0.55, 0.65, D_PIX)
    return ground.astype(np.float32), D.astype(np.float32)


def test_an_overcast_date_is_taken_into_the_ground_and_the_cap_gives_it_back() -> None:
    ground, D = _overcast_series()
    result = cloudcore.decompose(D, "aatm", lam=1.4 * cloudcore.lambda_star(*D.shape), tol=3e-5)
    # The failure the cap is for: the fit's ground on the overcast date takes much of the cloud
    # deck (0.55–0.65 over a ground of about 0.15), and the mask, which reads D − L, calls part
    # of the date clear.
    assert np.median(result.L[:, OVERCAST] - ground[:, OVERCAST]) > 0.2
    rule = MaskRule(white=0.0)
    before = classify_result([result], (64, 64), rule)
    assert (before[OVERCAST] == CLEAR).mean() > 0.1

    L, C = result.L.copy(), result.C.copy()
    cap_ground(L, C)
    # The ground of the overcast date is now the pixel's median date, near the true ground...
    assert np.abs(L[:, OVERCAST] - ground[:, OVERCAST]).mean() < 0.1
    # ...the clear dates' ground is unchanged where it was at or below the median...
    median = np.median(result.L, axis=1, keepdims=True)
    below = result.L <= median
    assert np.array_equal(L[below], result.L[below])
    # ...and D = L + C + N still holds: the excess went into C.
    assert np.allclose(L + C + result.N, result.L + result.C + result.N, atol=1e-6)
    capped = cloudcore.Decomposition(**{**result.__dict__, "L": L, "C": C})
    after = classify_result([capped], (64, 64), rule)
    assert (after[OVERCAST] == CLOUD).mean() > 0.99
    # The other dates' clouds (the noise's few false ones) barely change.
    others = np.arange(N_DATES) != OVERCAST
    assert (after[others] == CLOUD).mean() <= (before[others] == CLOUD).mean() + 0.01


def _reference(L: np.ndarray, C: np.ndarray, observed: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The cap in NumPy: ``numpy.nanmedian`` over the dates, applied where observed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the pixel seen on no date
        median = np.nanmedian(L, axis=1, keepdims=True)
    median[np.isfinite(L).sum(axis=1) < 3] = np.nan  # fewer than three dates: left as it is
    excess = np.nan_to_num(np.maximum(L - median, 0), nan=0.0)
    if observed is not None:
        excess = np.where(observed, excess, 0)  # an entry not observed keeps its ground
    return np.where(excess > 0, median, L), C + excess


@pytest.mark.parametrize("n", [6, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_is_numpys_median_on_any_layout(n: int, dtype: type) -> None:
    rng = np.random.default_rng(n)
    d = 5000
    L = rng.random((d, n)).astype(dtype)
    L[10] = np.nan  # a pixel seen on no date
    L[11, 2:] = np.nan  # one with a ground on two dates: their mean is no cap
    L[:, 2] = np.where(rng.random(d) < 0.3, np.nan, L[:, 2])  # a date partly without a ground
    C = rng.random((d, n)).astype(dtype)
    observed = rng.random((d, n)) < 0.8
    want_L, want_C = _reference(L, C, observed)
    # The solvers' layout (a transposed view of dates × pixels, capped where it is) and a
    # C-contiguous (pixels, dates) array (capped through a copy).
    for layout in (lambda x: np.ascontiguousarray(x.T).T, np.ascontiguousarray):
        got_L, got_C, obs = layout(L.copy()), layout(C.copy()), layout(observed)
        base = got_L.base
        cap_ground(got_L, got_C, obs)
        assert got_L.base is base  # in place
        # The median of an even count is (a + b)/2 in the arrays' precision, as NumPy's.
        np.testing.assert_array_equal(got_L, want_L)
        np.testing.assert_array_equal(got_C, want_C)
        np.testing.assert_array_equal(got_L[11], L[11])
        np.testing.assert_array_equal(got_L[~observed], L[~observed])  # not observed: as solved
    # Without a mask every entry takes its excess (and one thread gives the same bits).
    got_L, got_C = L.copy(), C.copy()
    cap_ground(got_L, got_C, threads=1)
    np.testing.assert_array_equal(got_C, _reference(L, C, None)[1])


def test_shapes_must_agree() -> None:
    with pytest.raises(ValueError, match="one shape"):
        cap_ground(np.zeros((4, 3)), np.zeros((4, 2)))


def _floored(L: np.ndarray, below: np.ndarray, observed: np.ndarray, q: float) -> tuple:
    """The floor in NumPy: ``numpy.nanquantile`` (linear) over the dates, in float64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the pixel seen on no date
        floor = np.nanquantile(L.astype(np.float64), q, axis=1, keepdims=True)
    floor[np.isfinite(L).sum(axis=1) < 3] = np.nan
    floor = floor.astype(L.dtype)
    deficit = np.where(observed, np.nan_to_num(np.maximum(floor - L, 0), nan=0.0), 0)
    return np.where(deficit > 0, floor, L), below - deficit


@pytest.mark.parametrize("q", [0.25, 0.5])
@pytest.mark.parametrize("n", [6, 7])
def test_the_floor_is_numpys_quantile_and_its_deficit_leaves_the_residual(q: float, n: int) -> None:
    rng = np.random.default_rng(n)
    d = 5000
    L = rng.random((d, n)).astype(np.float32)
    L[10] = np.nan
    L[11, 2:] = np.nan  # a ground on two dates: no floor either
    C, N = rng.random((d, n)).astype(np.float32), rng.normal(0, 0.01, (d, n)).astype(np.float32)
    observed = rng.random((d, n)) < 0.8
    capped_L, capped_C = _reference(L, C, observed)
    # The floor is the quantile of the solve's ground, before the cap.
    floor_L, want_N = _floored(L, N, observed, q)
    want_L = np.where(floor_L > L, np.maximum(capped_L, floor_L), capped_L)
    for layout in (lambda x: np.ascontiguousarray(x.T).T, np.ascontiguousarray):
        got = [layout(x.copy()) for x in (L, C, N)]
        cap_ground(got[0], got[1], layout(observed), floor=q, below=got[2])
        # The floor is NumPy's quantile in float64, stored in float32: the same bits.
        np.testing.assert_array_equal(got[0], want_L)
        np.testing.assert_array_equal(got[1], capped_C)  # the cap's excess as without a floor
        np.testing.assert_allclose(got[2], want_N, rtol=0, atol=2 * np.finfo(np.float32).eps)
        np.testing.assert_array_equal(got[0][11], L[11])
    # The whole residual in one layer (below is C): D = L + C still holds.
    got_L, got_C = L.copy(), C.copy()
    cap_ground(got_L, got_C, observed, floor=q)
    sums = np.where(observed & np.isfinite(L), got_L + got_C, np.nan)
    want = np.where(observed & np.isfinite(L), L + C, np.nan)
    np.testing.assert_allclose(sums, want, rtol=0, atol=4 * np.finfo(np.float32).eps)
    # With q = 0.5 the ground is each pixel's median on every date observed; elsewhere the
    # solve's own.
    if q == 0.5:
        rows = np.isfinite(L).sum(axis=1) >= 3
        seen = np.where(observed, got_L, np.nan)[rows]
        spread = np.nanmax(seen, axis=1) - np.nanmin(seen, axis=1)
        assert np.nanmax(spread) <= 2 * np.finfo(np.float32).eps
        np.testing.assert_array_equal(got_L[~observed], L[~observed])


def test_a_shadowed_date_leaves_the_ground_with_the_floor() -> None:
    """A shadow (one date darkened to 40 % on half the pixels) is taken into aATM's ground, whose
    cloud layer is non-negative; the floor gives it back to the residual, where the mask finds
    it."""
    ground, D = _overcast_series(seed=3)
    D = ground.copy()
    patch = np.zeros(D_PIX, bool)
    patch[: D_PIX // 2] = True
    D[patch, OVERCAST] *= 0.4
    result = cloudcore.decompose(D, "aatm", lam=1.4 * cloudcore.lambda_star(*D.shape), tol=3e-5)
    # The floor alone: without the shadow dark in every band, which finds it another way.
    rule = MaskRule(white=0.0, shadow_flat=0.0)
    shadow_code = 3
    before = classify_result([result], (64, 64), rule)[OVERCAST].reshape(-1)
    # That rule (on by default) reads the observation against the median ground, which the
    # shadow did not take; it is within reach of the other half, which the unfloored ground's
    # dip makes look brightened (cloud).
    dark_in_every_band = classify_result([result], (64, 64), MaskRule(white=0.0))[OVERCAST]
    assert (dark_in_every_band.reshape(-1)[patch] == shadow_code).mean() > 0.5
    L, C, N = result.L.copy(), result.C.copy(), result.N.copy()
    cap_ground(L, C, floor=0.25, below=N)
    floored = cloudcore.Decomposition(**{**result.__dict__, "L": L, "C": C, "N": N})
    after = classify_result([floored], (64, 64), rule)[OVERCAST].reshape(-1)
    # Without the floor the ground took it: almost none of it is called shadow (0.05 %);
    # with it 70 % is (the rest of the patch is left with a ground between the dates).
    assert (before[patch] == shadow_code).mean() < 0.05
    assert (after[patch] == shadow_code).mean() > 0.5
    # The shadow's ground is back near the truth, and the clear pixels stay clear.
    assert np.abs(L[patch, OVERCAST] - ground[patch, OVERCAST]).mean() < 0.02
    assert (after[~patch] == CLEAR).mean() > 0.95


@pytest.mark.parametrize("q", [0.1, 0.25, 0.4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_floor_is_numpys_quantile_bit_for_bit(q: float, dtype: type) -> None:
    """Every floor equals ``numpy.nanquantile`` of the float64 ground stored in the arrays'
    precision: the kernel interpolates as NumPy's ``_lerp`` does, in float64."""
    rng = np.random.default_rng(7)
    for n in (5, 6, 7):
        L = rng.random((20000, n)).astype(dtype)
        # No NaN here, so NumPy's vectorised quantile: nanquantile computes each row with it,
        # one Python call a row (2 s for these 20000 rows, against 4 ms).
        want = np.quantile(L.astype(np.float64), q, axis=1).astype(dtype)
        got = L.copy()
        cap_ground(got, np.zeros_like(L), floor=q)
        # The floor is the least of a pixel's grounds after it (the cap lowers none below it).
        np.testing.assert_array_equal(got.min(axis=1), want)


def test_the_floor_is_a_lower_quantile_and_below_is_c_or_apart() -> None:
    with pytest.raises(ValueError, match="quantile"):
        cap_ground(np.zeros((4, 3)), np.zeros((4, 3)), floor=0.75)
    C = np.zeros((4, 3))
    with pytest.raises(ValueError, match="does not overlap"):
        cap_ground(np.zeros((4, 3)), C, floor=0.25, below=C[:, :])
