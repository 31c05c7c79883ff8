"""cloudcore.refine: the masked re-solve finds bright and dark blocks and fills them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cloudcore
from cloudcore.anomaly import SCALE_SAMPLE, sample_entries
from cloudcore.refine import RefineRule, flag_outliers, robust_scale

H = W = 40
N = 9


def _series(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank-2 ground that changes over time, with noise; thick clouds on dates 1, 2 and 6 and
    shadows on dates 4 and 5, each over a sixth to a quarter of the image (as in real cloudy
    seasons, docs/REAL-CLOUDS.md)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W] / H
    a = (0.3 + 0.1 * np.sin(6 * x) * np.cos(4 * y)).ravel()
    b = (0.1 * np.cos(5 * x + 3 * y)).ravel()
    truth = np.outer(a, 1 + 0.1 * np.arange(N) / N) + np.outer(b, np.linspace(-1, 1, N))
    D = truth + rng.normal(0, 0.01, truth.shape)
    anomalies = np.zeros_like(D, bool)
    for date, (r0, r1, c0, c1), change in [
        (1, (0, 20, 0, 20), 0.4),
        (2, (20, 40, 10, 30), 0.5),
        (6, (0, 20, 20, 40), 0.3),
        (4, (20, 38, 0, 18), -0.6),
        (5, (2, 18, 12, 28), -0.5),
    ]:
        block = np.zeros((H, W), bool)
        block[r0:r1, c0:c1] = True
        rows = block.ravel()
        D[rows, date] = D[rows, date] + change if change > 0 else D[rows, date] * (1 + change)
        anomalies[rows, date] = True
    return np.clip(D, 0, 1), truth, anomalies


def test_refine_fills_clouds_and_shadows_better_than_one_solve() -> None:
    D, truth, anomalies = _series()
    first = cloudcore.decompose(D, "rpca", lam=cloudcore.lambda_default(D.shape[0]))
    refined = cloudcore.refine(D, first, (H, W))
    r_first = cloudcore.recovery_error(first.ground[anomalies], truth[anomalies])
    r_refined = cloudcore.recovery_error(refined.ground[anomalies], truth[anomalies])
    assert r_refined < 0.5 * r_first, (r_refined, r_first)
    assert r_refined < 0.03, r_refined
    # the cloud is above the ground (C), the shadow below it (S)
    cloud, shadow = anomalies[:, 2], anomalies[:, 4]
    assert refined.C[cloud, 2].mean() > 0.3 and refined.S[cloud, 2].max() == 0
    assert refined.S[shadow, 4].mean() > 0.1 and refined.C[shadow, 4].max() == 0
    assert refined.method == "rpca+refine"
    assert refined.iterations > first.iterations
    np.testing.assert_allclose(refined.L + refined.C - refined.S + refined.N, D, atol=1e-12)


def test_rho_reaches_every_re_solve() -> None:
    """``refine(rho=…)`` re-solves with that growth of μ: as under a study's ``mu_growth``,
    bit for bit, and in fewer iterations than with the paper's 1.5."""
    from cloudcore._growth import mu_growth

    D, _, _ = _series()
    first = cloudcore.decompose(D, "rpca", lam=cloudcore.lambda_default(D.shape[0]))
    paper = cloudcore.refine(D, first, (H, W))
    faster = cloudcore.refine(D, first, (H, W), rho=3.0)
    with mu_growth(3.0):
        studied = cloudcore.refine(D, first, (H, W))
    assert faster.iterations == studied.iterations < paper.iterations
    assert np.array_equal(faster.L, studied.L)


def test_flags_cover_the_anomalies_and_little_else() -> None:
    D, _, anomalies = _series(1)
    first = cloudcore.decompose(D, "rpca", lam=cloudcore.lambda_default(D.shape[0]))
    observed = np.ones_like(D, bool)
    flags = flag_outliers(D - first.L, observed, (H, W))
    recall = (flags & anomalies).sum() / anomalies.sum()
    false_share = (flags & ~anomalies).sum() / (~anomalies).sum()
    # the 1-pixel dilation rim around each block is most of the false share
    assert recall > 0.95 and false_share < 0.04, (recall, false_share)


def test_unobserved_entries_and_unpinned_pixels() -> None:
    D, _, _ = _series(2)
    mask = np.ones_like(D, bool)
    mask[:40, 3] = False  # a strip missing on one date
    D[~mask] = np.nan
    first = cloudcore.decompose(D, "rpca", mask=mask)
    # A pixel far brighter than its ground on every date is flagged everywhere: the re-solve
    # has nothing to pin it, so the first ground is kept there (not NaN).
    D2 = D.copy()
    D2[100] = np.where(mask[100], 1.0, np.nan)
    first2 = cloudcore.decompose(D2, "rpca", mask=mask)
    refined = cloudcore.refine(D2, first2, (H, W), mask=mask)
    assert np.isfinite(refined.L).all()
    assert (refined.C[~mask] == 0).all() and (refined.S[~mask] == 0).all()
    refined32 = cloudcore.refine(D.astype(np.float32), first, (H, W), mask=mask)
    assert refined32.L.dtype == np.float32 and refined32.C.dtype == np.float32
    # A pixel observed on no date is NaN in every layer, as decompose leaves it.
    mask[7] = False
    D3 = np.where(mask, D, np.nan)
    refined = cloudcore.refine(D3, cloudcore.decompose(D3, "rpca", mask=mask), (H, W), mask=mask)
    for layer in (refined.L, refined.C, refined.N, refined.S):
        assert np.isnan(layer[7]).all() and np.isfinite(np.delete(layer, 7, axis=0)).all()


def test_scale_samples_every_date_of_a_large_tile() -> None:
    # 2¹⁹ pixels × 8 dates: a stride of 4 over the flattened entries would keep dates 0 and 4
    # only, which are 0 here.
    d, n = 1 << 19, 8
    residual = np.random.default_rng(0).normal(0, 1, (d, n)).astype(np.float32)
    residual[:, [0, 4]] = 0.0
    sample = sample_entries(residual)
    assert sample.size <= 2 * SCALE_SAMPLE and (sample != 0).mean() > 0.7
    assert robust_scale(residual, np.ones((d, n), bool)) > 0


def test_robust_scale_ignores_outliers() -> None:
    rng = np.random.default_rng(3)
    r = rng.normal(0, 0.01, 10000)
    r[:3000] += 0.5  # 30 % outliers move the MAD little
    assert 0.009 < robust_scale(r, np.ones_like(r, bool)) < 0.02
    assert robust_scale(r, np.zeros_like(r, bool)) == 0.0


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 0}, {"lam_scale": -1}, {"radius": -1}, {"rounds": 0}]
)
def test_rule_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="refine"):
        RefineRule(**kwargs)  # type: ignore[arg-type]


def test_shape_errors_name_the_problem() -> None:
    D, _, _ = _series()
    first = cloudcore.decompose(D, "rpca")
    with pytest.raises(ValueError, match="shape"):
        cloudcore.refine(D[:, :5], first, (H, W))
    with pytest.raises(ValueError, match="images of shape"):
        cloudcore.refine(D, first, (H, W + 1))


@pytest.mark.parametrize("radius", [0, 1, 2])
def test_flags_are_the_opening_then_the_dilation(radius: int) -> None:
    """The flags written into two arrays are scipy's opening and dilation, composed."""
    from scipy import ndimage

    D, _, _ = _series(2)
    observed = np.random.default_rng(1).random(D.shape) < 0.9
    residual = np.where(observed, D - np.median(D, axis=1, keepdims=True), np.nan)
    rule = RefineRule(radius=radius)
    got = flag_outliers(residual, observed, (H, W), rule)
    sigma = robust_scale(residual, observed)
    big = (np.abs(residual) >= rule.threshold * sigma) & observed
    frames = big.T.reshape(N, H, W)
    if radius:
        square = np.zeros((3, 3, 3), bool)
        square[1] = True
        grow = np.zeros((3, 2 * radius + 1, 2 * radius + 1), bool)
        grow[1] = True
        frames = ndimage.binary_dilation(ndimage.binary_opening(frames, square), grow)
    assert got.any() and not got.all()
    assert np.array_equal(got, frames.reshape(N, -1).T & observed)


def test_an_unconverged_re_solve_warns_once_or_not_at_all() -> None:
    D, _, _ = _series()
    first = cloudcore.decompose(D, "rpca")
    with pytest.warns(cloudcore.ConvergenceWarning) as caught:
        stopped = cloudcore.refine(D, first, (H, W), max_iter=2)
    assert len(caught) == 1 and "refine" in str(caught[0].message)
    assert not stopped.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = cloudcore.refine(D, first, (H, W), max_iter=2, warn=False)
    assert not quiet.converged
    np.testing.assert_array_equal(quiet.L, stopped.L)
