"""Tests of cloud fields and cloud time series (cloudcore.simulate.clouds)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudcore.simulate import cloud_field, cloud_series, reference_clouds
from tests.cloudcore.conftest import FAST, ODD, neighbour_corr, rng


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
    """CONVENTIONS §4 recipe written independently, with FITPACK's interpolating bicubic spline
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
    # CONVENTIONS §4: mean cloud cover about 0.17-0.22; measured here ≈ 0.185 (seed spread ≈ 0.03)
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
