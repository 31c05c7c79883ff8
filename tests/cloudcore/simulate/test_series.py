"""Tests of the scattering model, image scaling and simulations (cloudcore.simulate.series)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cloudcore.simulate import (
    RGB2GRAY_WEIGHTS,
    SimulatedSeries,
    apply_clouds,
    paper_case,
    simulate_series,
    stack_frames,
    to_grey,
    unit_scale,
)
from tests.cloudcore.conftest import ODD, TYROL, rng

# ---------------------------------------------------------------------------------------------
# scattering model, grey conversion, scaling
# ---------------------------------------------------------------------------------------------


def test_apply_clouds_matches_the_formula_and_brightens():
    g = rng(19)
    truth = g.random(ODD)
    clouds = g.random((3, *ODD))
    observed = apply_clouds(truth, clouds)
    assert observed.shape == (3, *ODD)
    t, c = 1, (5, 7)
    assert observed[t][c] == pytest.approx(clouds[t][c] + (1 - clouds[t][c]) * truth[c])
    np.testing.assert_allclose(observed, clouds + (1 - clouds) * truth)
    assert np.all(observed >= truth - 1e-15) and observed.max() <= 1.0
    # opaque cloud shows the cloud, no cloud shows the ground
    np.testing.assert_array_equal(apply_clouds(truth, np.ones(ODD))[0], 1.0)
    np.testing.assert_array_equal(apply_clouds(truth, np.zeros(ODD))[0], truth)


@pytest.mark.parametrize(
    ("truth", "clouds", "name"),
    [
        (np.zeros((4, 4)), np.zeros((2, 4, 5)), "clouds"),
        (np.full((4, 4), 2.0), np.zeros((2, 4, 4)), "truth"),
        (np.zeros((4, 4)), np.full((2, 4, 4), -0.1), "clouds"),
        (np.zeros(4), np.zeros((2, 4)), "truth"),
    ],
)
def test_apply_clouds_rejects_bad_input(truth, clouds, name):
    with pytest.raises(ValueError, match=name):
        apply_clouds(truth, clouds)


def test_to_grey_uses_matlab_weights():
    rgb = np.zeros((2, 3, 3), dtype=np.uint8)
    rgb[0, 0] = (100, 0, 0)
    rgb[0, 1] = (0, 100, 0)
    rgb[0, 2] = (0, 0, 100)
    rgb[1] = 255
    grey = to_grey(rgb)
    assert grey.dtype == np.float64
    np.testing.assert_allclose(grey[0], [29.89, 58.70, 11.40])
    np.testing.assert_allclose(grey[1], 255 * sum(RGB2GRAY_WEIGHTS))
    rgba = np.concatenate([rgb, np.full((2, 3, 1), 7, np.uint8)], axis=-1)
    np.testing.assert_array_equal(to_grey(rgba), grey)  # alpha ignored
    np.testing.assert_array_equal(to_grey(grey), grey)  # grey passes through


def test_to_grey_rejects_band_first():
    with pytest.raises(ValueError, match="channel-last"):
        to_grey(np.zeros((3, 10, 10)))


def test_unit_scale_reference_rule():
    eight_bit = np.array([[0, 17], [200, 255]], dtype=np.uint8)
    np.testing.assert_allclose(unit_scale(eight_bit), eight_bit / 256)
    np.testing.assert_allclose(unit_scale(np.array([0, 256])), [0.0, 1.0])
    np.testing.assert_allclose(unit_scale(np.array([3, 1000])), [3 / 1024, 1000 / 1024])
    np.testing.assert_allclose(unit_scale(np.array([0.2, 0.7])), [0.2, 0.7])


def test_unit_scale_sensor_rule_and_errors():
    dn = np.array([0, 1000, 4095], dtype=np.uint16)
    np.testing.assert_allclose(unit_scale(dn, max_dn=4095), dn / 4095)
    with pytest.raises(ValueError, match="max_dn"):
        unit_scale(np.array([0, 5000]), max_dn=4095)
    with pytest.raises(ValueError, match="max_dn"):
        unit_scale(dn, max_dn=0)
    with pytest.raises(ValueError, match="max_dn"):
        unit_scale(np.zeros((3, 3)))  # all zero: the reference rule is undefined
    with pytest.raises(ValueError, match="negative"):
        unit_scale(np.array([-1.0, 3.0]))


# ---------------------------------------------------------------------------------------------
# whole simulations
# ---------------------------------------------------------------------------------------------


def test_simulate_series_bundles_truth_clouds_and_observations():
    truth = rng(21).random(ODD)
    sim = simulate_series(truth, 3, style="perlin", coverage=0.4, rng=rng(22))
    assert isinstance(sim, SimulatedSeries)
    assert sim.n == 3
    np.testing.assert_array_equal(sim.truth, truth)
    np.testing.assert_allclose(sim.observed, sim.clouds + (1 - sim.clouds) * truth)
    assert np.allclose((sim.clouds > 0).mean(axis=(1, 2)), 0.4, atol=0.02)
    np.testing.assert_array_equal(sim.D, stack_frames(sim.observed))
    assert sim.D.shape == (truth.size, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sim.truth = truth  # type: ignore[misc]
    with pytest.raises(ValueError, match="truth"):
        simulate_series(truth * 300, 2, rng=rng())


def test_paper_case_on_a_synthetic_sensor_image():
    dn = (rng(23).random((50, 70)) * 4000).astype(np.uint16)
    sim = paper_case(dn, 2, size=None, style="perlin", max_dn=4095, rng=rng(24))
    np.testing.assert_allclose(sim.truth, dn / 4095)
    sim = paper_case(dn, 2, size=32, rng=rng(24))
    assert sim.truth.shape == (32, 32) and sim.clouds.shape == (2, 32, 32)
    assert 0.0 <= sim.truth.min() and sim.truth.max() <= 1.0
    with pytest.raises(ValueError, match="size"):
        paper_case(dn, 2, size=0, rng=rng())


def test_paper_case_on_tyrol():
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with pytest.warns(NotGeoreferencedWarning), rasterio.open(TYROL) as src:
        rgba = np.moveaxis(src.read(), 0, -1)
    assert rgba.shape == (1000, 1000, 4) and rgba.dtype == np.uint8
    sim = paper_case(rgba, 3, size=256, rng=rng(25))
    assert sim.truth.shape == (256, 256)
    assert sim.observed.shape == sim.clouds.shape == (3, 256, 256)
    assert sim.D.shape == (256 * 256, 3)
    assert 0.0 <= sim.truth.min() and sim.truth.max() <= 1.0
    # resizing keeps the mean grey level of the scene (reference rule: divide 8-bit data by 256)
    assert sim.truth.mean() == pytest.approx(to_grey(rgba).mean() / 256, abs=0.005)
    assert np.all(sim.observed >= sim.truth - 1e-12) and sim.observed.max() <= 1.0
    # the clouds brighten the scene, by the mean cover of the reference recipe
    assert 0.05 < (sim.observed - sim.truth).mean() < 0.3
