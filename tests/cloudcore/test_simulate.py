"""Tests of the cloud simulation (cloudcore.simulate)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudcore.simulate import (
    RGB2GRAY_WEIGHTS,
    SimulatedSeries,
    apply_clouds,
    cloud_field,
    cloud_series,
    paper_case,
    perlin_noise,
    reference_clouds,
    simulate_series,
    stack_frames,
    to_grey,
    unit_scale,
    unstack_frames,
)

DATA_DIR = Path(__file__).parents[3] / "shared" / "data"
TYROL = DATA_DIR / "tyrol-w1_1k.tif"

ODD = (37, 53)
FAST = settings(max_examples=25, deadline=None, derandomize=True)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def neighbour_corr(a: np.ndarray) -> float:
    """The smaller of the lag-1 correlations along rows and along columns."""
    across = np.corrcoef(a[:, :-1].ravel(), a[:, 1:].ravel())[0, 1]
    down = np.corrcoef(a[:-1].ravel(), a[1:].ravel())[0, 1]
    return float(min(across, down))


def shift_correlation(a: np.ndarray, b: np.ndarray, reach: int) -> np.ndarray:
    """Pearson correlation of a(y, x) with b(y + dy, x + dx) for |dy|, |dx| ≤ reach."""
    h, w = a.shape
    out = np.empty((2 * reach + 1, 2 * reach + 1))
    for i, dy in enumerate(range(-reach, reach + 1)):
        for j, dx in enumerate(range(-reach, reach + 1)):
            pa = a[max(0, -dy) : h - max(0, dy), max(0, -dx) : w - max(0, dx)]
            pb = b[max(0, dy) : h - max(0, -dy), max(0, dx) : w - max(0, -dx)]
            out[i, j] = np.corrcoef(pa.ravel(), pb.ravel())[0, 1]
    return out


# ---------------------------------------------------------------------------------------------
# perlin_noise
# ---------------------------------------------------------------------------------------------


def test_perlin_shape_dtype_and_range_for_odd_shape():
    noise = perlin_noise(ODD, rng=rng())
    assert noise.shape == ODD
    assert noise.dtype == np.float64
    assert np.all(np.isfinite(noise))
    assert np.abs(noise).max() <= 1.0
    assert noise.std() > 0.05  # not a constant


def test_perlin_is_deterministic_per_seed_and_differs_between_seeds():
    a = perlin_noise(ODD, rng=rng(7))
    np.testing.assert_array_equal(a, perlin_noise(ODD, rng=rng(7)))
    assert np.abs(a - perlin_noise(ODD, rng=rng(8))).max() > 0.1


def test_perlin_mean_near_zero_and_smooth():
    fields = [perlin_noise((128, 128), rng=rng(s)) for s in range(6)]
    assert abs(np.mean([f.mean() for f in fields])) < 0.05
    for f in fields:
        # white noise would give ≈ 0; gradient noise with ≥ 2 px per finest cell is far above 0.9
        assert neighbour_corr(f) > 0.9


def test_perlin_octave_lattices_do_not_all_meet_at_the_origin():
    # Perlin noise is 0 on its lattice points; aligned octaves would pin pixel (0, 0) to 0
    assert all(perlin_noise((4, 4), rng=rng(s))[0, 0] != 0.0 for s in range(5))


def test_perlin_cells_set_feature_size():
    coarse = perlin_noise((128, 128), cells=2, octaves=1, rng=rng(1))
    fine = perlin_noise((128, 128), cells=32, octaves=1, rng=rng(1))
    assert neighbour_corr(coarse) > neighbour_corr(fine) + 0.05


def test_perlin_anisotropic_cells():
    # many cells down, few across: the field varies faster down the columns
    noise = perlin_noise((128, 128), cells=(32, 2), octaves=1, rng=rng(2))
    across = np.corrcoef(noise[:, :-1].ravel(), noise[:, 1:].ravel())[0, 1]
    down = np.corrcoef(noise[:-1].ravel(), noise[1:].ravel())[0, 1]
    assert across > down + 0.05


@pytest.mark.parametrize("k", [1, 5, 17])
def test_perlin_offset_shifts_the_field_exactly(k):
    base = perlin_noise(ODD, rng=rng(3))
    across = perlin_noise(ODD, offset=(0, k), rng=rng(3))
    np.testing.assert_allclose(across[:, :-k], base[:, k:], rtol=0, atol=1e-12)
    down = perlin_noise(ODD, offset=(k, 0), rng=rng(3))
    np.testing.assert_allclose(down[:-k], base[k:], rtol=0, atol=1e-12)
    back = perlin_noise(ODD, offset=(-k, -k), rng=rng(3))
    np.testing.assert_allclose(back[k:, k:], base[:-k, :-k], rtol=0, atol=1e-12)


def test_perlin_fractional_offsets_sample_one_field():
    part = perlin_noise(ODD, offset=(0.3, 0.25), rng=rng(4))
    more = perlin_noise(ODD, offset=(2.3, 3.25), rng=rng(4))
    np.testing.assert_allclose(more[:-2, :-3], part[2:, 3:], rtol=0, atol=1e-9)
    # and a fractional shift along either axis is a genuinely different sampling of the field
    base = perlin_noise(ODD, rng=rng(4))
    assert np.abs(perlin_noise(ODD, offset=(0.3, 0), rng=rng(4)) - base).max() > 1e-3
    assert np.abs(perlin_noise(ODD, offset=(0, 0.3), rng=rng(4)) - base).max() > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"shape": (0, 5)}, "shape"),
        ({"shape": (5,)}, "shape"),
        ({"cells": 0}, "cells"),
        ({"cells": (4, -1)}, "cells"),
        ({"octaves": 0}, "octaves"),
        ({"octaves": 2.5}, "octaves"),
        ({"persistence": -0.5}, "persistence"),
        ({"lacunarity": 0}, "lacunarity"),
        ({"offset": (1.0, np.nan)}, "offset"),
        ({"rng": 42}, "rng"),
    ],
)
def test_perlin_rejects_bad_arguments(kwargs, name):
    args = {"shape": (8, 8), "rng": rng()} | kwargs
    with pytest.raises(ValueError, match=name):
        perlin_noise(**args)


@FAST
@given(
    h=st.integers(1, 40),
    w=st.integers(1, 40),
    cells=st.floats(0.3, 20.0),
    octaves=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_perlin_any_shape_is_finite_and_bounded(h, w, cells, octaves, seed):
    noise = perlin_noise((h, w), cells=cells, octaves=octaves, rng=rng(seed))
    assert noise.shape == (h, w)
    assert np.all(np.isfinite(noise))
    assert np.abs(noise).max() <= 1.0


# ---------------------------------------------------------------------------------------------
# cloud_field
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("coverage", [0.1, 0.3, 0.6, 0.9])
def test_cloud_field_coverage_near_target(coverage):
    field = cloud_field((128, 128), coverage=coverage, rng=rng(5))
    assert abs((field > 0).mean() - coverage) < 0.005
    # "non-negligible" cloud: above 1 % of the peak opacity
    assert abs((field > 0.01 * 0.8).mean() - coverage) < 0.03


def test_cloud_field_coverage_is_monotonic():
    coverages = [0.05, 0.2, 0.4, 0.6, 0.8, 0.95]
    fields = [cloud_field((96, 96), coverage=c, rng=rng(6)) for c in coverages]
    covered = [(f > 0.01).mean() for f in fields]
    assert all(a < b for a, b in itertools.pairwise(covered))
    # with one seed, the opacity grows with coverage pixel by pixel
    for a, b in itertools.pairwise(fields):
        assert np.all(a <= b + 1e-12)


@pytest.mark.parametrize("thickness", [0.2, 0.5, 1.0])
def test_cloud_field_thickness_is_the_peak(thickness):
    field = cloud_field(ODD, coverage=0.5, thickness=thickness, rng=rng(9))
    assert field.shape == ODD
    assert field.min() == 0.0
    assert field.max() == pytest.approx(thickness)


def test_cloud_field_softness_widens_the_edges():
    crisp = cloud_field((96, 96), coverage=0.5, softness=0.05, rng=rng(10))
    soft = cloud_field((96, 96), coverage=0.5, softness=1.0, rng=rng(10))
    assert (crisp >= 0.8 - 1e-12).mean() > 0.3
    assert (soft >= 0.8 - 1e-12).mean() < 0.01
    np.testing.assert_array_equal(crisp > 0, soft > 0)  # same clouds, different profiles


def test_cloud_field_extremes():
    assert not cloud_field(ODD, coverage=0.0, rng=rng()).any()
    full = cloud_field(ODD, coverage=1.0, thickness=0.4, rng=rng())
    assert (full > 0).mean() > 0.99
    assert not cloud_field(ODD, thickness=0.0, rng=rng()).any()


def test_cloud_field_thin_haze_broken_and_heavy_are_reachable():
    shape = (128, 128)
    haze = cloud_field(shape, coverage=1.0, thickness=0.5, softness=1.0, cells=2, rng=rng(1))
    broken = cloud_field(shape, coverage=0.3, thickness=0.8, softness=0.1, cells=6, rng=rng(1))
    heavy = cloud_field(shape, coverage=0.85, thickness=1.0, softness=0.3, rng=rng(1))
    assert (haze > 0.02).mean() > 0.9 and haze.max() <= 0.5
    assert 0.2 < (broken > 0.01).mean() < 0.35 and (broken >= 0.8 - 1e-12).mean() > 0.1
    assert heavy.mean() > 0.6


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"coverage": 1.5}, "coverage"),
        ({"coverage": -0.1}, "coverage"),
        ({"thickness": 2.0}, "thickness"),
        ({"softness": 0.0}, "softness"),
        ({"cells": -3}, "cells"),
    ],
)
def test_cloud_field_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cloud_field((16, 16), rng=rng(), **kwargs)


@FAST
@given(
    low=st.floats(0.0, 1.0),
    high=st.floats(0.0, 1.0),
    thickness=st.floats(0.05, 1.0),
    softness=st.floats(0.01, 1.0),
    seed=st.integers(0, 1000),
)
def test_cloud_field_opacity_monotonic_in_coverage(low, high, thickness, softness, seed):
    low, high = sorted((low, high))
    kw = {"thickness": thickness, "softness": softness, "cells": 3, "octaves": 3}
    a = cloud_field((24, 24), coverage=low, rng=rng(seed), **kw)
    b = cloud_field((24, 24), coverage=high, rng=rng(seed), **kw)
    assert np.all(a <= b + 1e-12)
    assert 0.0 <= a.min() and b.max() <= thickness + 1e-12


# ---------------------------------------------------------------------------------------------
# reference_clouds
# ---------------------------------------------------------------------------------------------


def test_reference_clouds_shape_range_and_determinism():
    field = reference_clouds(ODD, rng=rng(11))
    assert field.shape == ODD
    assert field.min() >= 0.0 and field.max() <= 1.0
    np.testing.assert_array_equal(field, reference_clouds(ODD, rng=rng(11)))
    assert np.abs(field - reference_clouds(ODD, rng=rng(12))).max() > 0.1


def _recipe_by_hand(shape: tuple[int, int], seed: int) -> np.ndarray:
    """SPEC-NOTES §4 recipe written independently, with FITPACK's interpolating bicubic spline
    (s=0, which has the not-a-knot end conditions of MATLAB's interp2 'spline')."""
    from scipy.interpolate import RectBivariateSpline
    from skimage.exposure import equalize_adapthist
    from skimage.transform import resize

    g = rng(seed)
    grid = np.arange(64.0)
    acc = np.zeros((64, 64))
    for i in range(1, 6):
        spline = RectBivariateSpline(grid, grid, g.standard_normal((64, 64)), kx=3, ky=3, s=0)
        fine = grid / 2 ** (i - 1)
        acc += i * spline(fine, fine)
    acc = (acc - acc.min()) / np.ptp(acc)
    big = np.clip(resize(acc, shape, order=3, mode="symmetric"), 0, 1) ** 4
    kernel = (shape[0] // 8, shape[1] // 8)
    return np.clip(equalize_adapthist(big, kernel_size=kernel, clip_limit=0.01, nbins=256), 0, 1)


def test_reference_clouds_follow_the_recipe():
    np.testing.assert_allclose(
        reference_clouds((96, 80), rng=rng(30)), _recipe_by_hand((96, 80), 30), atol=1e-3
    )


def test_reference_clouds_mean_cover_matches_the_spec():
    # SPEC-NOTES §4: mean cloud cover about 0.17-0.22; measured here ≈ 0.185 (seed spread ≈ 0.03)
    covers = [reference_clouds((256, 256), rng=rng(s)).mean() for s in range(6)]
    assert 0.15 < np.mean(covers) < 0.24


def test_reference_clouds_are_smooth_and_mostly_thin():
    field = reference_clouds((256, 256), rng=rng(13))
    assert neighbour_corr(field) > 0.95
    # the gamma of 4 leaves most pixels as thin haze, with few thick cloud cores
    assert np.median(field) < field.mean() < 0.5
    assert field.max() > 0.9


# ---------------------------------------------------------------------------------------------
# cloud_series
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["reference", "perlin", "moving"])
def test_cloud_series_shape_range_determinism(style):
    series = cloud_series(ODD, 4, style=style, rng=rng(14))
    assert series.shape == (4, *ODD)
    assert series.min() >= 0.0 and series.max() <= 1.0
    np.testing.assert_array_equal(series, cloud_series(ODD, 4, style=style, rng=rng(14)))
    assert np.abs(series - cloud_series(ODD, 4, style=style, rng=rng(15))).max() > 0.1
    # every date differs from the previous one
    assert all(np.abs(series[t + 1] - series[t]).max() > 0.01 for t in range(3))


def test_cloud_series_perlin_forwards_field_settings():
    series = cloud_series((64, 64), 3, style="perlin", coverage=0.5, thickness=0.6, rng=rng(16))
    np.testing.assert_allclose(series.max(axis=(1, 2)), 0.6)
    assert np.allclose((series > 0).mean(axis=(1, 2)), 0.5, atol=0.01)
    fine = cloud_series((64, 64), 3, style="perlin", cells=16, rng=rng(16))
    coarse = cloud_series((64, 64), 3, style="perlin", cells=1, rng=rng(16))
    assert not np.array_equal(fine, coarse)


@pytest.mark.parametrize("wind", [(3.0, 5.0), (-2.0, 4.0)])
def test_moving_clouds_drift_with_the_wind(wind):
    series = cloud_series((128, 128), 4, style="moving", wind=wind, rng=rng(17))
    for t in range(3):
        corr = shift_correlation(series[t], series[t + 1], reach=7)
        dy, dx = np.unravel_index(np.argmax(corr), corr.shape)
        assert (dy - 7, dx - 7) == wind
        assert corr.max() > 0.8


def test_moving_clouds_keep_coverage_and_evolve_with_growth():
    shape, n = (128, 128), 5
    still = cloud_series(shape, n, style="moving", wind=(0, 0), growth=0.0, rng=rng(18))
    # no wind, no growth: the same clouds on every date
    np.testing.assert_allclose(still, np.broadcast_to(still[0], still.shape), atol=1e-12)
    slow = cloud_series(shape, n, style="moving", wind=(0, 0), growth=0.1, rng=rng(18))
    fast = cloud_series(shape, n, style="moving", wind=(0, 0), growth=0.6, rng=rng(18))

    def first_last(s: np.ndarray) -> float:
        return float(np.corrcoef(s[0].ravel(), s[-1].ravel())[0, 1])

    assert first_last(fast) < first_last(slow) < 1.0 - 1e-6
    np.testing.assert_allclose((fast > 0).mean(axis=(1, 2)), 0.3, atol=0.01)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"style": "fog"}, "style"),
        ({"n": 0}, "n"),
        ({"style": "reference", "cells": 3}, "cells"),
        ({"style": "perlin", "colour": 3}, "colour"),
        ({"style": "moving", "growth": 1.5}, "growth"),
        ({"style": "moving", "wind": (1.0,)}, "wind"),
        ({"style": "moving", "octaves": 0}, "octaves"),
        ({"style": "perlin", "coverage": 2}, "coverage"),
    ],
)
def test_cloud_series_rejects_bad_arguments(kwargs, name):
    args = {"n": 2, "rng": rng()} | kwargs
    with pytest.raises(ValueError, match=name):
        cloud_series((16, 16), **args)


# ---------------------------------------------------------------------------------------------
# scattering model, grey conversion, scaling, d × n layout
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


def test_stack_frames_layout_and_round_trip():
    frames = rng(20).random((4, *ODD))
    D = stack_frames(frames)
    assert D.shape == (ODD[0] * ODD[1], 4)
    assert D.flags.c_contiguous
    y, x = 5, 11
    np.testing.assert_array_equal(D[y * ODD[1] + x], frames[:, y, x])
    np.testing.assert_array_equal(D[:, 2], frames[2].ravel())
    np.testing.assert_array_equal(unstack_frames(D, ODD), frames)
    with pytest.raises(ValueError, match="rows"):
        unstack_frames(D, (ODD[1], ODD[1]))


@FAST
@given(n=st.integers(1, 5), h=st.integers(1, 9), w=st.integers(1, 9))
def test_stack_unstack_round_trip_any_shape(n, h, w):
    frames = np.arange(n * h * w, dtype=np.float64).reshape(n, h, w)
    D = stack_frames(frames)
    assert D.shape == (h * w, n)
    np.testing.assert_array_equal(unstack_frames(D, (h, w)), frames)


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


@pytest.mark.skipif(not TYROL.exists(), reason=f"shared test image not found at {TYROL}")
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
