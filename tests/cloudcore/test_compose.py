"""cloudcore.compose: the observation where clear, the scattering model inverted under haze, the
ground elsewhere."""

import numpy as np
import pytest

from cloudcore.compose import MAX_OPACITY, compose, haze_opacity
from cloudcore.masks import CLEAR, CLOUD, HAZE, NODATA, SHADOW


def _scene(seed=0, bands=3, dates=2, size=12):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.05, 0.5, (bands, dates, size, size))
    return truth, truth + rng.normal(0, 0.01, truth.shape)  # the ground: a model, not the truth


def test_clear_entries_are_the_observation_bit_for_bit():
    truth, ground = _scene()
    codes = np.full(truth.shape[1:], CLEAR, np.uint8)
    codes[0, :4] = CLOUD
    out = compose(truth, ground, codes, haze="invert")
    clear = np.broadcast_to(codes == CLEAR, truth.shape)
    assert np.array_equal(out[clear], truth[clear])
    assert np.array_equal(out[~clear], ground[~clear])  # cloud: the ground


def test_unobserved_band_gets_the_ground_whatever_the_code():
    truth, ground = _scene()
    obs = truth.copy()
    obs[1, 0, 3, 3] = np.nan
    codes = np.full(truth.shape[1:], CLEAR, np.uint8)
    codes[0, 3, 3] = NODATA
    codes[1, 5, 5] = SHADOW
    out = compose(obs, ground, codes)
    assert out[1, 0, 3, 3] == ground[1, 0, 3, 3]
    assert out[0, 0, 3, 3] == ground[0, 0, 3, 3]  # no data: the ground in every band
    assert np.array_equal(out[:, 1, 5, 5], ground[:, 1, 5, 5])


def test_uniform_grey_haze_is_inverted_to_the_ground_it_hides():
    # D = α + (1 − α)·L with one α for every band (a grey cloud): inverting gives L back, with
    # the observation's texture, where the ground model is only approximately right.
    truth, ground = _scene(seed=1)
    alpha = 0.3
    hazy = alpha + (1 - alpha) * truth
    codes = np.full(truth.shape[1:], HAZE, np.uint8)
    out = compose(hazy, ground, codes, haze="invert", window=5)
    # α from the noisy ground is off by about the ground's error: the inversion's error is of
    # that order, and far below the haze's own (0.3 · (1 − L)).
    assert np.abs(out - truth).max() < 0.05
    assert np.abs(hazy - truth).min() > 0.1
    assert np.abs(out - truth).mean() < np.abs(ground - truth).mean() * 1.5


def test_haze_fills_ground_and_observed():
    truth, ground = _scene(seed=2)
    codes = np.full(truth.shape[1:], HAZE, np.uint8)
    assert np.array_equal(compose(truth, ground, codes, haze="ground"), ground)
    assert np.array_equal(compose(truth, ground, codes, haze="observed"), truth)
    with pytest.raises(ValueError, match="haze must be one of"):
        compose(truth, ground, codes, haze="guess")  # type: ignore[arg-type]


def test_opacity_is_shared_bounded_and_zero_outside():
    truth, _ = _scene(seed=3)
    hazy = 0.95 + 0.05 * truth  # opacity 0.95: clipped at MAX_OPACITY
    where = np.zeros(truth.shape[1:], bool)
    where[0, 2:6, 2:6] = True
    alpha = haze_opacity(hazy, truth, where, window=1)
    assert alpha.shape == where.shape
    assert np.all(alpha[where] == MAX_OPACITY)
    assert np.all(alpha[~where] == 0)


def test_shapes_must_agree():
    truth, ground = _scene()
    with pytest.raises(ValueError, match="differ"):
        compose(truth, ground[:, :1], np.zeros(truth.shape[1:], np.uint8))


def test_with_times_a_filled_entry_gets_its_pixel_s_departure_on_its_kept_dates():
    """``times`` (the pipeline's ``mask.interpolate``): a cloud entry is the ground plus the
    pixel's residual D − L on its kept dates before and after, weighted by time; a kept entry
    stays the observation; an unobserved one the ground."""
    rng = np.random.default_rng(2)
    ground = rng.uniform(0.2, 0.5, (2, 4, 3, 3))
    obs = np.clip(ground + rng.normal(0.0, 0.05, ground.shape), 0.0, 1.0)
    obs[1, 3, 0, 0] = np.nan  # band 1 did not observe pixel (0, 0) on date 3
    codes = np.zeros((4, 3, 3), np.uint8)
    codes[1] = CLOUD  # date 1 clouded everywhere; dates 0 and 2 seen, at days 0, 1, 4
    times = np.array([0.0, 1.0, 4.0, 9.0])
    out = compose(obs, ground, codes, haze="ground", times=times)
    residual = obs - ground
    expected = ground[:, 1] + 0.75 * residual[:, 0] + 0.25 * residual[:, 2]
    assert np.allclose(out[:, 1], np.clip(expected, 0.0, 1.0))
    assert np.array_equal(out[:, [0, 2]], obs[:, [0, 2]])
    assert out[1, 3, 0, 0] == ground[1, 3, 0, 0]
    plain = compose(obs, ground, codes, haze="ground")
    assert not np.allclose(plain[:, 1], out[:, 1])
