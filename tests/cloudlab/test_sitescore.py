"""How the held-out benchmark composes a candidate's target (cloudlab.sitescore)."""

from __future__ import annotations

import dataclasses

import numpy as np

from cloudcore.masks import SHADOW as MASK_SHADOW
from cloudcore.masks import MaskRule
from cloudlab.candidates import PostStep
from cloudlab.sitescore import Solved, written_ground


def test_between_raises_the_target_s_ground_by_its_pixels_kept_neighbours() -> None:
    """With every entry kept (thresholds no anomaly reaches), the target's ground is raised by
    each pixel's residual D − L on the dates before and after it, weighted by time; a date not
    observed is no evidence, and the result is clipped to [0, 1]."""
    rng = np.random.default_rng(5)
    bands, frame, days = 2, (3, 4), np.array([0.0, 2.0, 3.0, 7.0])
    pixels, n = frame[0] * frame[1], days.size
    L = rng.uniform(0.2, 0.6, (bands, pixels, n))
    D = np.clip(L + rng.normal(0.0, 0.05, L.shape), 0.0, 1.0)
    D[:, 0, 1] = np.nan  # pixel 0 not observed on date 1: the next kept date after is 3
    D[:, 5, :] = 0.999  # raised beyond 1: clipped
    observed = np.isfinite(D).all(axis=0)
    solved = Solved(D, observed, L, frame)
    rule = MaskRule(cloud=1e6, haze=1e6, shadow=1e6, white_cloud=0.0, shadow_near=0.0)
    step = dataclasses.replace(PostStep(rule, keep_clear=True), between=True)
    target = 2
    out = written_ground(D, days, target, solved, step)
    plain = dataclasses.replace(step, between=False)
    assert np.array_equal(written_ground(D, days, target, solved, plain), L[:, :, target])
    residual = D - np.clip(L, 0.0, 1.0)
    # Date 2 (day 3) lies between day 2 (1 before) and day 7 (4 after): 4/5 and 1/5.
    expected = L[:, :, target] + 0.8 * residual[:, :, 1] + 0.2 * residual[:, :, 3]
    expected[:, 0] = L[:, 0, target] + residual[:, 0, 0] * 4 / 7 + residual[:, 0, 3] * 3 / 7
    expected = np.clip(expected, 0.0, 1.0)
    assert np.allclose(out, expected, atol=1e-12)
    assert (out[:, 5] <= 1.0).all() and not np.allclose(out, np.clip(L[:, :, target], 0, 1))


def test_shadow_floor_raises_only_the_ground_written_under_a_flagged_shadow() -> None:
    """A shadow taken into its date's ground (L dark there, D darker still): where the mask
    calls the target shadow the ground written is raised to the pixel's lower quartile over the
    dates; every other pixel's ground is written as it was."""
    rng = np.random.default_rng(7)
    bands, frame, days = 2, (3, 4), np.arange(6.0)
    pixels, n, target = frame[0] * frame[1], days.size, 2
    L = rng.uniform(0.3, 0.5, (bands, pixels, n))
    D = L + rng.normal(0.0, 0.005, L.shape)
    L[:, 7, target] = 0.1  # the shadow in the ground
    D[:, 7, target] = 0.02  # and darker still in the observation: the mask sees it
    solved = Solved(D, np.ones((pixels, n), bool), L, frame)
    rule = MaskRule(cloud=1e6, haze=1e6, shadow=3.0, white_cloud=0.0, shadow_near=0.0)
    plain = PostStep(rule, keep_clear=True)
    floored = dataclasses.replace(plain, shadow_floor=0.25)
    shadow = solved.codes(rule, solved.seen)[target].reshape(-1) == MASK_SHADOW
    assert shadow[7] and shadow.sum() == 1
    out = written_ground(D, days, target, solved, floored)
    expected = L[:, :, target].copy()
    expected[:, 7] = np.quantile(L[:, 7, :], 0.25, axis=1)  # above 0.1: the deficit added
    assert np.allclose(out, expected, atol=1e-12)
    assert np.array_equal(written_ground(D, days, target, solved, plain), L[:, :, target])
    assert floored.name == plain.name + "+sfloor0.25"


def test_shadow_floor_adds_the_ground_s_deficit_to_the_interpolated_fill() -> None:
    """With the pixel's own departure interpolated (the default's ``between``), the floor adds
    the ground's deficit under the flagged shadow to that fill, and nothing where the ground is
    already above the quartile or the pixel is not shadow; the solve's ground is not changed."""
    rng = np.random.default_rng(8)
    bands, frame, days = 2, (3, 4), np.arange(6.0)
    pixels, n, target = frame[0] * frame[1], days.size, 2
    L = rng.uniform(0.3, 0.5, (bands, pixels, n))
    D = L + rng.normal(0.0, 0.005, L.shape)
    L[:, 7, target], D[:, 7, target] = 0.1, 0.02  # a shadow taken into the ground
    D[:, 9, target] = L[:, 9, target] - 0.1  # a shadow the ground did not take in
    L[:, 9, target] = L[:, 9].max(axis=1)  # its ground above the pixel's quartile
    solved = Solved(D, np.ones((pixels, n), bool), L, frame)
    rule = MaskRule(cloud=1e6, haze=1e6, shadow=3.0, white_cloud=0.0, shadow_near=0.0)
    between = dataclasses.replace(PostStep(rule, keep_clear=True), between=True)
    shadow = solved.codes(rule, solved.seen)[target].reshape(-1) == MASK_SHADOW
    assert shadow[7] and shadow[9]
    before = solved.ground.copy()
    fill = written_ground(D, days, target, solved, between)
    out = written_ground(D, days, target, solved, dataclasses.replace(between, shadow_floor=0.25))
    deficit = np.quantile(solved.ground[:, 7, :], 0.25, axis=1) - solved.ground[:, 7, target]
    assert (deficit > 0).all()
    assert np.allclose(out[:, 7], np.clip(fill[:, 7] + deficit, 0.0, 1.0), atol=1e-12)
    assert np.array_equal(out[:, ~shadow], fill[:, ~shadow])
    assert np.array_equal(out[:, 9], fill[:, 9])  # no deficit: unchanged
    assert np.array_equal(solved.ground, before)
