"""Tests of gradient (Perlin) noise (cloudcore.simulate.noise)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudcore.simulate import perlin_noise
from tests.cloudcore.conftest import FAST, ODD, neighbour_corr, rng


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
