"""The cloud / haze / shadow mask from the sparse layers (cloudcore.masks)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import cloudcore
from cloudcore.mask_scores import Shade
from cloudcore.masks import (
    CLEAR,
    CLOUD,
    HAZE,
    NODATA,
    SHADOW,
    BandMean,
    MaskRule,
    Whiteness,
    classify,
    classify_scores,
    darkening_level,
    result_scale,
    whiteness_tests,
)


def _rule(**fields: Any) -> MaskRule:
    """A rule as given, without the shadow dark in every band (on by default): the scores of
    these tests have no observations for it to read."""
    return MaskRule(**{"shadow_flat": 0.0, **fields})


def test_anomaly_scale_is_the_robust_spread_of_observed_entries() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(0, 0.01, 200_000)
    r[:140_000] += rng.uniform(0.05, 0.5, 140_000)  # 70 % clouds do not move it
    assert abs(cloudcore.anomaly_scale(r) - 0.01) < 0.0015
    observed = np.ones_like(r, dtype=bool)
    observed[190_000:] = False
    r[190_000:] = -5.0
    assert abs(cloudcore.anomaly_scale(r, observed) - 0.01) < 0.0015
    assert cloudcore.anomaly_scale(np.full(4, np.nan)) == 0.0


def test_the_quartile_scale_holds_where_shadows_are_most_of_what_lies_below() -> None:
    """With a ground at the middle of the dates (a shadow layer of κ = 1) half the clear entries
    and every shadow lie below it: with 60 % of those entries shadows the median is read off
    the shadows, the lower quartile still off the clear entries (the 62.5 % point of their
    half-normal: Φ⁻¹(0.8125) / Φ⁻¹(0.625) = 2.78 σ); with no shadow both are σ."""
    rng = np.random.default_rng(1)
    clear = rng.normal(0, 0.01, 80_000)  # 40 000 below the ground
    clouds = rng.uniform(0.05, 0.5, 50_000)
    alone = np.concatenate([clear, clouds])
    assert abs(cloudcore.anomaly_scale(alone, statistic="quartile") - 0.01) < 0.0015
    assert abs(cloudcore.anomaly_scale(alone) - 0.01) < 0.0015
    r = np.concatenate([alone, -rng.uniform(0.05, 0.3, 60_000)])
    assert abs(cloudcore.anomaly_scale(r, statistic="quartile") - 0.0278) < 0.002
    assert cloudcore.anomaly_scale(r) > 0.05 * 1.4826  # at least the shallowest shadow
    assert cloudcore.anomaly_scale(np.full(4, np.nan), statistic="quartile") == 0.0
    with pytest.raises(ValueError, match="statistic 'mean'"):
        cloudcore.anomaly_scale(r, statistic="mean")


def test_classes_by_threshold_with_bands_averaged_and_specks_opened() -> None:
    rule = _rule(cloud=8, haze=4, shadow=8, radius=1, white=0.0, white_cloud=0.0)  # alone
    bright = np.zeros((2, 1, 9, 9))
    bright[:, 0, 1:5, 1:5] = 10.0  # a 4 × 4 cloud in both bands
    bright[0, 0, 6:9, 6:9] = 10.0  # one band only: mean 5 → haze
    bright[:, 0, 4, 7] = 20.0  # a one-pixel speck: opened away, left as haze
    dark = np.zeros_like(bright)
    dark[:, 0, 6:9, 0:3] = 9.0  # 3 × 3 shadow survives the 3 × 3 opening
    observed = np.ones((1, 9, 9), bool)
    observed[0, 0, 8] = False
    codes = classify(bright, dark, np.array([1.0, 1.0]), observed, rule)
    assert codes.dtype == np.uint8 and codes.shape == (1, 9, 9)
    assert (codes[0, 1:5, 1:5] == CLOUD).all()
    assert (codes[0, 6:9, 6:9][observed[0, 6:9, 6:9]] == HAZE).all()
    assert codes[0, 4, 7] == HAZE
    assert (codes[0, 6:8, 0:3] == SHADOW).all()
    assert codes[0, 0, 8] == NODATA
    assert codes[0, 0, 0] == CLEAR
    # The scale is per band: band 0 twice as noisy halves its say.
    halved = classify(bright, None, np.array([2.0, 1.0]), observed, rule)
    assert (halved[0, 1:5, 1:5] == HAZE).all()  # (5 + 10) / 2 = 7.5 < 8
    assert (halved[0, 6:8, 0:3] == CLEAR).all()  # no shadow layer, no shadow class


def test_band_by_band_scores_classify_exactly_as_all_bands_at_once() -> None:
    """The pipeline's mask task adds one band at a time (BandMean) to hold one band's layers:
    its codes must be the codes of classify on the stacked bands, bit for bit."""
    rng = np.random.default_rng(3)
    bright = rng.gamma(1.0, 0.03, (3, 4, 40, 50)).astype(np.float32)
    dark = rng.gamma(1.0, 0.02, bright.shape).astype(np.float32)
    bright[:, :, 5:15, 5:15] += 0.5  # a cloud and a shadow that survive the opening
    dark[:, :, 20:30, 20:30] += 0.5
    unseen = rng.random(bright.shape) < 0.2
    bright[unseen] = np.nan
    dark[unseen] = np.nan
    scales = np.array([0.01, 0.03, 0.02])
    observed = ~unseen.all(axis=0)
    rule = _rule(cloud=6, haze=4, shadow=3, radius=1)  # every class can occur
    whole = classify(bright, dark, scales, observed, rule, short_band=0)
    sums = [BandMean(bright.shape[1:]), BandMean(bright.shape[1:])]
    white = Whiteness(bright.shape[1:])  # the default whiteness test, streamed the same way
    for b, sigma in enumerate(scales):
        sums[0].add(bright[b], sigma)
        sums[1].add(dark[b], sigma)
        white.add(bright[b], short=b == 0)
    tests = whiteness_tests(white, rule, sums[0].count)
    streamed = classify_scores(sums[0].mean(), sums[1].mean(), observed, rule, *tests)
    assert rule.white == 0.25 and rule.white_cloud == 3 and np.array_equal(streamed, whole)
    assert len(np.unique(whole)) == 5  # every class occurs: the comparison means something


def test_result_scale_is_the_anomaly_scale_of_c_plus_n_minus_s() -> None:
    """The solve's σ samples the layers' rows before it sums them: the same σ as summing first,
    for a matrix large enough to be sampled (2²¹ entries) and one that is not."""
    rng = np.random.default_rng(4)
    for d in (300_000, 20_000):
        C, N, S = (rng.gamma(0.3, 0.02, (d, 7)).astype(np.float32) for _ in range(3))
        observed = rng.random((d, 7)) < 0.9
        result = cloudcore.Decomposition(
            L=np.zeros_like(C), C=C, N=N, S=S, iterations=1, converged=True, residual=0.0,
            lam=0.01, method="rpca",
        )  # fmt: skip
        assert result_scale(result, observed) == cloudcore.anomaly_scale(C + N - S, observed)
        assert result_scale(result, observed) > 0


def test_classify_result_finds_simulated_clouds(case_64x7: cloudcore.SimulatedSeries) -> None:
    res = cloudcore.decompose(case_64x7.D, lam=cloudcore.lambda_star(*case_64x7.D.shape))
    # With a haze class (the default has none: its haze threshold is the cloud's), so that the
    # semi-transparent simulated clouds between 4σ and 6σ are flagged too.
    rule = _rule(cloud=6, haze=4, shadow=3, radius=1)
    codes = cloudcore.classify_result(res, (64, 64), rule)
    thick = case_64x7.clouds > 0.3
    clear = case_64x7.clouds < 0.01
    assert (codes[thick] != CLEAR).mean() > 0.95
    assert (codes[clear] != CLOUD).mean() > 0.95
    assert (codes[thick] == CLOUD).mean() > 5 * (codes[clear] == CLOUD).mean()


def test_band_mean_sums_the_plain_float32_quotients() -> None:
    """BandMean sums in one compiled pass: the same float32 bits as the plain expression
    ``where(finite, x, 0).astype(float32) / float32(σ)``, summed band by band, for float32 and
    float64 anomalies, infinities, negative zeros and a σ of 0 (floored at the smallest
    float32)."""
    rng = np.random.default_rng(5)
    bands = rng.normal(0.0, 0.05, (3, 7, 30, 40))
    bands[rng.random(bands.shape) < 0.2] = np.nan
    bands[rng.random(bands.shape) < 0.02] = np.inf
    bands[rng.random(bands.shape) < 0.02] = -0.0
    tiny = float(np.finfo(np.float32).tiny)
    for dtype in (np.float32, np.float64):
        mean = BandMean(bands.shape[1:])
        total = np.zeros(bands.shape[1:], np.float32)
        for x, sigma in zip(bands.astype(dtype), (0.013, 0.0, 0.041), strict=True):
            mean.add(x, sigma)
            scale = np.float32(max(sigma, tiny))
            total += np.where(np.isfinite(x), x, 0.0).astype(np.float32) / scale
        assert np.array_equal(mean.total.view(np.uint32), total.view(np.uint32))
        assert np.array_equal(mean.count, np.isfinite(bands).sum(axis=0))
        assert mean.total.dtype == np.float32
        # The mean in the sums' own array (the mask pass's) is the same bits as a new one.
        expected = mean.mean()
        in_place = mean.mean(in_place=True)
        assert in_place is mean.total
        assert np.array_equal(in_place.view(np.uint32), expected.view(np.uint32))


def test_grow_widens_cloud_and_shadow_by_its_radius_within_observed_entries() -> None:
    bright = np.zeros((1, 9, 9), np.float32)
    dark = np.zeros((1, 9, 9), np.float32)
    bright[0, 2:5, 2:5] = 10.0  # a 3 × 3 cloud (survives the radius-1 opening)
    dark[0, 5:8, 5:8] = 10.0  # a 3 × 3 shadow touching the cloud's corner
    observed = np.ones((1, 9, 9), bool)
    observed[0, 0, :] = False
    rule = _rule(cloud=6, haze=4, shadow=3, radius=1, white=0.0, white_cloud=0.0)
    plain = cloudcore.classify_scores(bright, dark, observed, rule)
    grown = cloudcore.classify_scores(bright, dark, observed, replace(rule, grow=1))
    assert (plain == CLOUD).sum() == 9 and (plain == SHADOW).sum() == 9
    assert (grown[0, 1:6, 1:6] == CLOUD).all() and (grown == CLOUD).sum() == 25
    # The shadow grew too, but not over the cloud: a pixel is one or the other.
    assert (grown[0, 4:9, 4:9] != CLEAR).all()
    assert grown[0, 5, 5] == CLOUD and (grown[0, 6:9, 6:9] == SHADOW).all()
    assert (grown[0, 0] == NODATA).all()  # growth never reaches unobserved entries


def test_a_shadow_extends_into_darkened_neighbours_up_to_its_reach() -> None:
    """Hysteresis: a shadow (dark ≥ 3σ) extends along a chain of pixels darkened by ≥ 1.5σ, one
    pixel a step, at most ``edge_reach`` pixels; not into a pixel less dark, nor into cloud; a
    pixel as dark as the chain but touching no shadow stays clear."""
    dark = np.zeros((1, 5, 12), np.float32)
    bright = np.zeros_like(dark)
    dark[0, 2, 0] = 5.0  # the shadow
    dark[0, 2, 1:8] = 2.0  # a chain of edge pixels to its right, 7 long
    dark[0, 0, 10:12] = 2.0  # as dark, but no shadow next to it
    bright[0, 3, 0] = 8.0  # a cloud under the shadow
    dark[0, 3, 1] = 2.0  # an edge pixel diagonal to the shadow
    observed = np.ones(dark.shape, bool)
    rule = _rule(
        cloud=6,
        shadow=3,
        white=0,
        white_cloud=0,
        shadow_edge=1.5,
        edge_reach=3,
        shadow_near=0,
    )
    codes = classify_scores(bright, dark, observed, rule)
    assert (codes[0, 2, 0:4] == SHADOW).all()  # the shadow and three steps along the chain
    assert (codes[0, 2, 4:8] == CLEAR).all()  # beyond its reach
    assert codes[0, 3, 1] == SHADOW  # a diagonal neighbour is a neighbour
    assert codes[0, 3, 0] == CLOUD  # cloud stays cloud
    assert (codes[0, 0, 10:12] == CLEAR).all()  # dark alone is not a shadow
    # Without the edge, only the shadow; with a lower threshold the chain is not reached.
    assert (
        classify_scores(bright, dark, observed, replace(rule, shadow_edge=0)) == SHADOW
    ).sum() == 1
    assert (
        classify_scores(bright, dark, observed, replace(rule, shadow_edge=2.5)) == SHADOW
    ).sum() == 1
    # Farther reach, farther edge; the rule's context counts it.
    far = replace(rule, edge_reach=10)
    assert (classify_scores(bright, dark, observed, far)[0, 2, 0:8] == SHADOW).all()
    assert (rule.context, far.context, replace(rule, shadow_edge=0).context) == (3, 10, 0)
    assert replace(rule, radius=1, grow=2).context == 2 + 3 + 2


def test_a_darkening_beside_a_cloud_of_its_date_is_shadow() -> None:
    """``shadow_near``: an entry darker than its date around it by at least that many σ within
    ``near_reach`` pixels (a square) of a cloud of the same date is shadow; as dark farther
    away, on a date without that cloud, less dark, or on a date as dark everywhere, it stays
    clear."""
    bright = np.zeros((2, 9, 30), np.float32)
    dark = np.zeros_like(bright)
    bright[0, 4, 2] = 8.0  # a cloud on date 0
    dark[0, 4, 3:30] = 2.0  # a darkening to its right, 27 long
    dark[0, 0, 6] = 2.0  # diagonal, 4 rows up and 4 columns right: within a square of 4
    dark[1, 4, 3:30] = 2.0  # the same darkening on date 1, which has no cloud
    dark[0, 8, 2] = 1.0  # beside the cloud but less dark
    observed = np.ones(dark.shape, bool)
    rule = _rule(cloud=6, shadow=3, white=0, white_cloud=0, shadow_near=1.5, near_reach=4)
    codes = classify_scores(bright, dark, observed, rule)
    assert codes[0, 4, 2] == CLOUD
    assert (codes[0, 4, 3:7] == SHADOW).all() and (codes[0, 4, 7:] == CLEAR).all()
    assert codes[0, 0, 6] == SHADOW
    assert (codes[1] == CLEAR).all()
    assert codes[0, 8, 2] == CLEAR
    # A date darker as a whole is not a shadow: darkened by 2σ everywhere but its cloud, no
    # pixel beside the cloud is darker than the date around it.
    darker = np.where(bright > 0, 0.0, 2.0).astype(np.float32)
    assert not (classify_scores(bright, darker, observed, rule) == SHADOW).any()
    assert (classify_scores(bright, darker, observed, replace(rule, shadow=1.9)) == SHADOW).any()
    # Off, or a higher threshold: none; the rule's context counts the reach.
    for other in (replace(rule, shadow_near=0), replace(rule, shadow_near=2.5)):
        assert not (classify_scores(bright, dark, observed, other) == SHADOW).any()
    assert (rule.context, replace(rule, shadow_near=0).context) == (4, 0)
    assert replace(rule, shadow_edge=1.5, edge_reach=3, grow=1).context == 4 + 1


def test_classify_result_reads_shadows_below_the_ground_without_a_shadow_layer() -> None:
    # RPCA has no S: the mask reads the residual below the ground, L − D = −C, as darkening.
    rng = np.random.default_rng(5)
    ground = rng.uniform(0.2, 0.3, (64, 6))
    residual = rng.normal(0, 0.002, ground.shape)
    residual[:16, 2] -= 0.15  # a dark 2 × 8 block on date 2 (pixels 0..15 of an 8 × 8 frame)
    result = cloudcore.Decomposition(
        L=ground,
        C=residual,
        N=np.zeros_like(ground),
        S=None,
        iterations=1,
        residual=0.0,
        converged=True,
        lam=0.1,
        method="rpca",
    )
    rule = _rule(cloud=6, haze=4, shadow=5, radius=0)
    codes = cloudcore.classify_result(result, (8, 8), rule)
    assert (codes[2, :2, :] == SHADOW).all()
    assert (codes[[0, 1, 3, 4, 5]] != SHADOW).all()


def test_whiteness_calls_a_brightening_of_the_long_bands_alone_clear() -> None:
    """A cloud brightens every band alike, haze the short band most; the ground's own change
    (greening, bare soil) brightens the long bands. With ``white`` only the first two are cloud
    or haze; where the short band has no value the colour cannot be told and the test passes."""
    rule = _rule(cloud=6, haze=3, shadow=6, white=0.3, white_cloud=0.0)
    # Three bands, shortest first; four pixels in one row: white cloud, bluish haze, a change of
    # the long bands (the short one brightens by 0.25 of the most), and no short-band value.
    bright = np.array(
        [
            [[[0.10, 0.06, 0.03, np.nan]]],
            [[[0.10, 0.03, 0.06, 0.10]]],
            [[[0.10, 0.01, 0.12, 0.10]]],
        ]
    )
    sigma = np.full(3, 0.01)
    observed = np.ones((1, 1, 4), bool)
    plain = classify(bright, None, sigma, observed, replace(rule, white=0.0))
    assert plain[0, 0].tolist() == [CLOUD, HAZE, CLOUD, CLOUD]
    tested = classify(bright, None, sigma, observed, rule, short_band=0)
    # The bands' order says nothing of their wavelengths: with several bands, name the short one.
    with pytest.raises(ValueError, match="needs short_band"):
        classify(bright, None, sigma, observed, rule)
    assert tested[0, 0].tolist() == [CLOUD, HAZE, CLEAR, CLOUD]
    # The short band is named by index: with the last band as the shortest, the bluish haze
    # looks like a change of the long bands.
    assert classify(bright, None, sigma, observed, rule, short_band=2)[0, 0, 1] == CLEAR
    # From the bands' means the test needs the whiteness itself.
    white = Whiteness((1, 1, 4))
    for b, band in enumerate(bright):
        white.add(band, short=b == 0)
    assert white.passes(0.3)[0, 0].tolist() == [True, True, False, True]
    scores = np.nanmean(bright / 0.01, axis=0)
    assert np.array_equal(classify_scores(scores, None, observed, rule, white.passes(0.3)), tested)
    with pytest.raises(ValueError, match=r"white=0\.3"):
        classify_scores(scores, None, observed, rule)


def test_every_band_calls_a_brightening_that_leaves_a_band_dark_clear() -> None:
    """``every_band``: a cloud brightens every band (D − L = C(1 − L) in each), a spring melt or
    a field laid bare brightens the short bands and leaves a long one flat or darker. With the
    test a brightening counts only where every band with a value brightened by at least that
    share of the most any band did; without the whiteness test (``white`` 0) it acts alone."""
    rule = _rule(cloud=6, haze=6, shadow=6, white=0.0, white_cloud=0.0, every_band=0.3)
    # Three bands, shortest first; four pixels brightened by 6.7–9σ on the mean: a cloud
    # (lowest/peak 0.6), the short band brightened and the long ones flat (0.0), one band darker
    # (−0.14), and a cloud seen in two bands only (0.8).
    bright = np.array(
        [
            [[[0.10, 0.20, 0.14, 0.10]]],
            [[[0.08, 0.00, 0.08, np.nan]]],
            [[[0.06, 0.00, -0.02, 0.08]]],
        ]
    )
    sigma = np.full(3, 0.01)
    observed = np.ones((1, 1, 4), bool)
    plain = classify(bright, None, sigma, observed, replace(rule, every_band=0.0))
    assert plain[0, 0].tolist() == [CLOUD, CLOUD, CLOUD, CLOUD]
    tested = classify(bright, None, sigma, observed, rule, short_band=0)
    assert tested[0, 0].tolist() == [CLOUD, CLEAR, CLEAR, CLOUD]
    # The same from the bands' means and the Whiteness; it must have kept the lowest band.
    white = Whiteness((1, 1, 4), lowest=True)
    for b, band in enumerate(bright):
        white.add(band, short=b == 0)
    assert white.passes(0.0, 0.3)[0, 0].tolist() == [True, False, False, True]
    scores = np.nanmean(bright / 0.01, axis=0)
    assert np.array_equal(
        classify_scores(scores, None, observed, rule, white.passes(0, 0.3)), tested
    )
    with pytest.raises(ValueError, match="lowest=True"):
        Whiteness((1, 1, 4)).passes(0.0, 0.3)
    with pytest.raises(ValueError, match=r"every_band=0\.3"):
        classify_scores(scores, None, observed, rule)


def test_a_flat_brightening_is_cloud_from_the_lower_threshold() -> None:
    """``white_cloud``: a brightening as flat across the bands as a cloud's (the shortest band
    at least ``white_cloud_ratio`` of the largest) is cloud from 3σ; one that is not, or whose
    colour cannot be told (no short-band value, or one band alone), needs the cloud threshold."""
    rule = _rule(cloud=6, haze=6, shadow=6, white=0.25, white_cloud=3.0)
    # Three bands, shortest first; five pixels brightened by a mean of 4σ: flat, coloured
    # (short/max 0.5), flat but without a short-band value, bluish (the short band the most);
    # and one flat at 2σ.
    bright = np.array(
        [
            [[[0.04, 0.02, np.nan, 0.06, 0.02]]],
            [[[0.04, 0.04, 0.04, 0.04, 0.02]]],
            [[[0.04, 0.04, 0.04, 0.02, 0.02]]],
        ]
    )
    sigma = np.full(3, 0.01)
    observed = np.ones((1, 1, 5), bool)
    codes = classify(bright, None, sigma, observed, rule, short_band=0)
    assert codes[0, 0].tolist() == [CLOUD, CLEAR, CLEAR, CLOUD, CLEAR]
    assert (classify(bright, None, sigma, observed, replace(rule, white_cloud=0.0), 0) == 0).all()
    # A looser ratio takes the coloured one too (short/max 0.5, a mean of 3.3σ).
    loose = classify(bright, None, sigma, observed, replace(rule, white_cloud_ratio=0.4), 0)
    assert loose[0, 0].tolist() == [CLOUD, CLOUD, CLEAR, CLOUD, CLEAR]
    # One band alone has no colour: nothing is a white cloud there.
    alone = classify(bright[1:2], None, sigma[:1], observed, rule)
    assert (alone == CLEAR).all()
    # From the bands' means the rule needs the flat test too.
    with pytest.raises(ValueError, match="white_cloud=3 needs the bands' whiteness"):
        classify_scores(np.full((1, 1, 5), 4.0), None, observed, rule, np.ones((1, 1, 5), bool))


def test_a_white_cloud_passes_the_whiteness_test_too() -> None:
    """With a whiteness test stricter than the white clouds' ratio, a brightening between the
    two is neither a white cloud from 3σ nor a cloud from 6σ: the mask never calls a pixel cloud
    at 4σ and clear at 7σ."""
    rule = _rule(
        cloud=6,
        haze=6,
        shadow=6,
        white=0.8,
        white_cloud=3.0,
        white_cloud_ratio=0.7,
    )
    long = np.array([0.05, 0.08])
    short = 0.75 * long  # short/max 0.75: flat at 0.7, not white at 0.8
    bright = np.array([[[short]], [[long]], [[long]]])  # means of 4.6σ and 7.3σ
    sigma = np.full(3, 0.01)
    codes = classify(bright, None, sigma, np.ones((1, 1, 2), bool), rule, short_band=0)
    assert codes[0, 0].tolist() == [CLEAR, CLEAR]
    looser = classify(bright, None, sigma, np.ones((1, 1, 2), bool), replace(rule, white=0.7), 0)
    assert looser[0, 0].tolist() == [CLOUD, CLOUD]


def test_the_darkening_level_is_the_window_mean_and_the_same_in_any_crop() -> None:
    from scipy.ndimage import correlate1d

    rng = np.random.default_rng(0)
    dark = rng.normal(0, 2, (3, 40, 57)).astype(np.float32)
    dark[0, :5] = np.nan  # unobserved rows, not counted
    counted = np.isfinite(dark) & (rng.random(dark.shape) > 0.2)
    reach = 5
    got = darkening_level(dark, counted, reach)
    ones = np.ones(2 * reach + 1)
    total = np.where(counted, dark, 0.0).astype(np.float64)
    count = counted.astype(np.float64)
    for axis in (-1, -2):
        total = correlate1d(total, ones, axis=axis, mode="constant")
        count = correlate1d(count, ones, axis=axis, mode="constant")
    expected = np.maximum(np.divide(total, count, out=np.zeros_like(total), where=count > 0), 0)
    # Each value is summed rounded to 2^-16 (an error of at most 2^-17 in the mean), and the
    # level is returned in float32 (2^-24 relative).
    np.testing.assert_allclose(got, expected, rtol=2.0**-24, atol=2.0**-17)
    assert got.dtype == np.float32 and (got > 0).any() and (got == 0).any()
    # Only the dates asked for: theirs the same, the others' 0.
    some = darkening_level(dark, counted, reach, np.array([False, True, False]))
    assert np.array_equal(some[1], got[1]) and not some[[0, 2]].any()
    # Exact sums: a crop with the reach as its margin gives the same bits in its interior.
    crop = darkening_level(dark[:, 10:30, 20:50], counted[:, 10:30, 20:50], reach)
    inner = (slice(None), slice(reach, -reach), slice(reach, -reach))
    assert np.array_equal(crop[inner], got[:, 10 + reach : 30 - reach, 20 + reach : 50 - reach])


def test_a_date_brighter_everywhere_is_not_cloud_where_it_is_no_brighter_than_around_it() -> None:
    """``bright_level``: the mean brightening of the entries of its date within that many px
    brightened by less than ``level_below`` σ is taken out before the thresholds. A date
    brightened by 7σ across the frame is clear with it and cloud without; a compact cloud
    stands out of its date's level and stays cloud; the level of entries not counted (a cloud's
    own, unobserved ones) is not taken; and a core classified with ``context`` around it gives
    the whole frame's codes."""
    rng = np.random.default_rng(3)
    bright = rng.uniform(0.0, 1.0, (2, 40, 50)).astype(np.float32)
    bright[0] += 7.0  # date 0 brighter across the frame (a hazier day)
    bright[1, 10:16, 10:16] = 20.0  # a cloud on date 1
    observed = np.ones(bright.shape, bool)
    observed[1, 30:, :] = False
    bright[~observed] = np.nan
    rule = _rule(cloud=6, haze=6, shadow=3, white=0, white_cloud=0, shadow_near=0)
    level = replace(rule, bright_level=8, level_below=9.0)
    without, with_level = (classify_scores(bright, None, observed, r) for r in (rule, level))
    assert (without[0] == CLOUD).all() and not (with_level[0] == CLOUD).any()
    assert (with_level[1, 10:16, 10:16] == CLOUD).all()
    assert (with_level[1] == CLOUD).sum() == 36 and (with_level[1, 30:] == NODATA).all()
    # Counted only under level_below: at 3σ the 7σ date counts nothing and stays cloud.
    under3 = classify_scores(bright, None, observed, replace(level, level_below=3.0))
    assert (under3[0] == CLOUD).all()
    # The context counts the square; a crop with it as its margin has the frame's codes.
    edge = replace(level, shadow_near=1.5, near_reach=4)
    assert (level.context, edge.context) == (8, 12)
    dark = rng.normal(0.0, 1.0, bright.shape).astype(np.float32)
    whole = classify_scores(bright, dark, observed, edge)
    m, crop = edge.context, (slice(None), slice(4, 36), slice(5, 45))
    part = classify_scores(bright[crop], dark[crop], observed[crop], edge)
    assert np.array_equal(part[:, m:-m, m:-m], whole[:, 4 + m : 36 - m, 5 + m : 45 - m])


def _persist_scene() -> tuple[np.ndarray, np.ndarray, MaskRule]:
    """Four dates, one day apart, 40 × 60 px, brightening A/σ: a bright field (rows 5–9, cols
    5–9) on dates 1, 2 and 3, brightened 10σ on date 2 and 8σ on 1 and 3 (ground that stays); a
    cloud (rows 20–27, cols 20–27) on date 2 alone; a cloud on date 2 (cols 40–47) whose
    neighbours are cloudy all round it (a deck, rows 15–35, cols 35–55, at 9σ)."""
    bright = np.zeros((4, 40, 60), np.float32)
    bright[1:4, 5:10, 5:10] = 8.0
    bright[2, 5:10, 5:10] = 10.0
    bright[2, 20:28, 20:28] = 12.0
    bright[[1, 3], 15:35, 35:55] = 9.0
    bright[2, 20:28, 40:48] = 12.0
    observed = np.ones(bright.shape, bool)
    rule = _rule(
        cloud=6,
        haze=6,
        shadow=3,
        white=0,
        white_cloud=0,
        shadow_near=0,
        persist=0.3,
    )
    return bright, observed, rule


def test_ground_that_stays_is_clear_and_a_cloud_or_a_deck_is_not() -> None:
    """``persist``: a flagged brightening that keeps at least that fraction of itself in place
    on the neighbouring days, with the pixels around it not cloud-bright there, is clear; a
    cloud of one day and a cloud under a deck on the neighbours stay cloud; without
    neighbours, off, or asked for a larger fraction than is kept, the field is cloud."""
    from cloudcore.masks import neighbour_scores, other_day_neighbours

    bright, observed, rule = _persist_scene()
    nb = neighbour_scores(bright, observed, other_day_neighbours(np.arange(4.0)))
    codes = classify_scores(bright, None, observed, rule, neighbours=nb)
    assert (codes[2, 5:10, 5:10] == CLEAR).all()  # the field: 8 ≥ 0.3 · 10 on days 1 and 3
    assert (codes[2, 20:28, 20:28] == CLOUD).all()  # a cloud of its day
    assert (codes[2, 20:28, 40:48] == CLOUD).all()  # under a deck on both neighbours
    # Date 1's field has a neighbour before it (date 0) without the field: cloud; date 3's is
    # the last date, its one neighbour (2) has it: clear.
    assert (codes[1, 5:10, 5:10] == CLOUD).all() and (codes[3, 5:10, 5:10] == CLEAR).all()
    # Asked to keep more than 0.8 of itself (8 of 10): cloud. Off: cloud. No neighbours: cloud.
    assert (
        classify_scores(bright, None, observed, replace(rule, persist=0.9), neighbours=nb)[
            2, 5:10, 5:10
        ]
        == CLOUD
    ).all()
    assert (
        classify_scores(bright, None, observed, replace(rule, persist=0))[2, 5:10, 5:10] == CLOUD
    ).all()
    alone = neighbour_scores(bright, observed, np.full((4, 2), -1))
    every = np.where(bright >= 6, CLOUD, CLEAR)
    assert np.array_equal(classify_scores(bright, None, observed, rule, neighbours=alone), every)
    # A neighbour that did not observe the field is no evidence of it: cloud.
    unseen = observed.copy()
    unseen[3, 5:10, 5:10] = False
    blind = neighbour_scores(bright, unseen, other_day_neighbours(np.arange(4.0)))
    assert (
        classify_scores(bright, None, observed, rule, neighbours=blind)[2, 5:10, 5:10] == CLOUD
    ).all()
    # No neighbours given: a series of one day, the rule changes nothing.
    assert np.array_equal(classify_scores(bright, None, observed, rule), every)


def test_ground_that_stays_is_the_same_in_any_crop_with_its_context() -> None:
    """The shares are exact window means: a crop with ``rule.context`` around it gives the
    whole frame's codes, and the context counts the reach."""
    from cloudcore.masks import neighbour_scores, other_day_neighbours

    rng = np.random.default_rng(5)
    bright, observed, rule = _persist_scene()
    bright = bright + rng.uniform(0.0, 4.0, bright.shape).astype(np.float32)
    rule = replace(rule, persist_reach=6, shadow_near=1.5, near_reach=4)
    assert rule.context == 6 + 4 and replace(rule, persist=0).context == 4
    days = other_day_neighbours(np.arange(4.0))
    dark = rng.normal(0.0, 1.0, bright.shape).astype(np.float32)
    whole = classify_scores(
        bright, dark, observed, rule, neighbours=neighbour_scores(bright, observed, days)
    )
    assert (whole == CLEAR).any() and (whole == CLOUD).any()
    m, crop = rule.context, (slice(None), slice(3, 37), slice(2, 50))
    part = classify_scores(
        bright[crop],
        dark[crop],
        observed[crop],
        rule,
        neighbours=neighbour_scores(bright[crop], observed[crop], days),
    )
    assert np.array_equal(part[:, m:-m, m:-m], whole[:, 3 + m : 37 - m, 2 + m : 50 - m])


def test_the_neighbours_are_the_nearest_acquisitions_of_other_days() -> None:
    """GF-4 stares: acquisitions of the same day (minutes apart) are not each other's
    neighbours; the nearest at least 12 h before and after are, of equal ones the later."""
    from cloudcore.masks import other_day_neighbours

    t = np.array(
        [
            "2020-06-01T01:00",
            "2020-06-01T01:20",
            "2020-06-02T02:00",
            "2020-06-02T02:00",
            "2020-06-04T01:00",
        ],
        dtype="datetime64[s]",
    )
    got = other_day_neighbours(t)
    assert got.tolist() == [[-1, 3], [-1, 3], [1, 4], [1, 4], [3, -1]]
    assert other_day_neighbours(np.array([0.0, 1.0, 2.0])).tolist() == [[-1, 1], [0, 2], [1, -1]]


def test_ground_that_stays_cannot_tell_a_cloud_that_stays_and_is_off_by_default() -> None:
    """Why ``persist`` is off by default: a cloud that drifts 1 px a day over the same pixels
    (a deck held by the terrain, fog, a slow system) is, to the rule, ground that stays; the
    real-cloud references hold such clouds (docs/REAL-CLOUDS.md, "Ground that stays")."""
    from cloudcore.masks import neighbour_scores, other_day_neighbours

    bright = np.zeros((3, 30, 30), np.float32)
    for t in range(3):
        bright[t, 10 + t : 18 + t, 10 + t : 18 + t] = 12.0 - t
    observed = np.ones(bright.shape, bool)
    assert MaskRule().persist == 0.0
    rule = _rule(cloud=6, haze=6, white=0, white_cloud=0, shadow_near=0, persist=0.3)
    nb = neighbour_scores(bright, observed, other_day_neighbours(np.arange(3.0)))
    codes = classify_scores(bright, None, observed, rule, neighbours=nb)
    assert (codes[1, 11:19, 11:19] == CLEAR).all()
    assert (
        classify_scores(bright, None, observed, _rule(white=0, white_cloud=0))[1, 11:19, 11:19]
        == CLOUD
    ).all()


def _flat_dark_scene() -> tuple[np.ndarray, ...]:
    """Two bands, five dates, 20 × 80 px: on date 2 a cloud (cols 5–9), beside it a shadow dark
    in both bands (half its ground) that the ground took in (D − L = 0 there, as a low-rank
    fit that follows a date shadowed over much of the frame), a patch as dark but 50 px from
    the cloud, and one beside it dark in the first band only (0.9 of the ground in the second).
    Returns the bands' observations, grounds, brightening and darkening (L − D), each
    ``(bands, dates, rows, cols)``, and observed ``(dates, rows, cols)``."""
    rng = np.random.default_rng(11)
    level = np.array([0.3, 0.4], np.float32)[:, None, None, None]
    D = level + rng.normal(0.0, 0.002, (2, 5, 20, 80)).astype(np.float32)
    L = np.broadcast_to(level, D.shape).copy()
    D[:, 2, 5:10, 5:10] += 0.3  # the cloud
    for cols, factors in (
        (slice(12, 17), (0.5, 0.5)),  # the shadow, 2–7 px from the cloud
        (slice(60, 65), (0.5, 0.5)),  # as dark, 50 px away
        (slice(20, 25), (0.5, 0.9)),  # beside it, dark in one band only
    ):
        for b, f in enumerate(factors):
            D[b, 2, 5:10, cols] = level[b, 0, 0, 0] * f
            L[b, 2, 5:10, cols] = D[b, 2, 5:10, cols]  # taken into the ground
    bright = D - L
    return D, L, bright, -bright, np.ones(D.shape[1:], bool)


def test_a_shadow_dark_in_every_band_beside_a_cloud_is_shadow() -> None:
    """Darkened below the pixel's median ground in every band, within the reach of a cloud of
    its date: shadow, though the ground took it in; not far from every cloud, not where one
    band is barely darker; off, none of them."""
    D, L, bright, dark, observed = _flat_dark_scene()
    rule = MaskRule(shadow_flat=3.0, flat_reach=32, white=0.0, white_cloud=0.0, shadow_near=0.0)
    scales = np.array([0.01, 0.01])
    R = D - L
    codes = classify(bright, dark, scales, observed, rule, observations=D, residuals=R)
    assert (codes[2, 5:10, 5:10] == CLOUD).all()
    assert (codes[2, 5:10, 12:17] == SHADOW).all()
    assert (codes[2, 5:10, 60:65] == CLEAR).all() and (codes[2, 5:10, 20:25] == CLEAR).all()
    assert (codes[[0, 1, 3, 4]] == CLEAR).all()
    off = classify(bright, dark, scales, observed, replace(rule, shadow_flat=0.0))
    assert not (off == SHADOW).any()
    # A longer reach takes the far patch too; a looser ratio the one dark in one band.
    far = classify(
        bright, dark, scales, observed, replace(rule, flat_reach=60), observations=D, residuals=R
    )
    assert (far[2, 5:10, 60:65] == SHADOW).all()
    loose = classify(
        bright, dark, scales, observed, replace(rule, flat_ratio=0.95), observations=D, residuals=R
    )
    assert (loose[2, 5:10, 20:25] == SHADOW).all()
    with pytest.raises(ValueError, match="shadow_flat=3 needs the bands' observations"):
        classify(bright, dark, scales, observed, rule)


def test_a_pixel_with_too_few_grounds_or_none_above_zero_is_never_dark_in_every_band() -> None:
    """The median ground stands for the pixel only with three dates or more, and a ratio to a
    ground at or below zero means nothing."""
    shade = Shade((4, 1, 3), 0.8)
    D = np.full((4, 1, 3), 0.1, np.float32)
    L = np.full((4, 1, 3), 0.4, np.float32)
    L[:2, 0, 1] = np.nan  # two dates with a ground
    L[:, 0, 2] = 0.0
    shade.add(D, D - L, 0.01)
    dark = shade.dark(3.0)
    assert dark[:, 0, 0].all() and not dark[:, 0, 1:].any()
    np.testing.assert_allclose(shade.below.mean()[:, 0, 0], 30.0, rtol=1e-6)


def test_a_shadow_dark_in_every_band_is_the_same_in_any_crop_with_its_context() -> None:
    """A crop with ``rule.context`` around it gives the whole frame's codes: the context counts
    the reach from the grown clouds."""
    D, L, bright, dark, observed = _flat_dark_scene()
    rule = MaskRule(
        shadow_flat=3.0, flat_reach=6, grow=1, white=0.0, white_cloud=0.0, shadow_near=0.0
    )
    assert rule.context == 6 + 1 and replace(rule, shadow_flat=0.0).context == 1
    scales = np.array([0.01, 0.01])
    whole = classify(bright, dark, scales, observed, rule, observations=D, residuals=D - L)
    assert (whole == SHADOW).any()
    m, crop = rule.context, (slice(None), slice(None), slice(0, 20), slice(3, 40))
    part = classify(
        bright[crop],
        dark[crop],
        scales,
        observed[crop[1:]],
        rule,
        observations=D[crop],
        residuals=(D - L)[crop],
    )
    assert np.array_equal(part[:, :, m:-m], whole[:, :, 3 + m : 40 - m])


@pytest.mark.parametrize("dates", [5, 6, 7, 8])
def test_the_shade_sums_are_numpys_nanmedian_and_band_mean_bit_for_bit(dates: int) -> None:
    """The compiled pass equals the NumPy expressions it stands for: the median of the finite
    grounds D − R (three at least, above 0), the darkening below it added as
    :class:`BandMean` adds, and every band's D / median at most the ratio (the largest of them,
    ``numpy.fmax``, at most it); two bands, odd and even counts, NaN in both inputs."""
    import warnings

    from cloudcore.mask_scores import BandMean

    rng = np.random.default_rng(dates)
    bands = []
    for _ in range(2):
        D = rng.uniform(0.0, 0.5, (dates, 30, 40)).astype(np.float32)
        R = rng.uniform(-0.3, 0.3, (dates, 30, 40)).astype(np.float32)
        D[rng.random(D.shape) < 0.2] = np.nan
        R[rng.random(R.shape) < 0.3] = np.nan
        bands.append((D, R, rng.uniform(0.01, 0.03)))
    shade = Shade(bands[0][0].shape, 0.8)
    for D, R, sigma in bands:
        shade.add(D, R, sigma)
    below = BandMean(shade.state.shape)
    brightest = np.full(shade.state.shape, np.nan, np.float32)
    for D, R, sigma in bands:
        ground = D - R
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # pixels with no ground
            median = np.nanmedian(ground, axis=0)
        enough = np.isfinite(ground).sum(axis=0) >= 3
        median = np.where(enough & (median > 0), median, np.float32(np.nan)).astype(np.float32)
        below.add(np.maximum(median - D, np.float32(0.0)), sigma)
        np.fmax(brightest, D / median, out=brightest)
        assert np.isnan(median).any() and np.isfinite(median).any()
    assert np.array_equal(shade.below.total, below.total)
    assert np.array_equal(shade.below.count, below.count)
    state = np.where(np.isnan(brightest), 0, np.where(brightest > np.float32(0.8), 2, 1))
    assert np.array_equal(shade.state, state) and set(np.unique(state)) == {0, 1, 2}
