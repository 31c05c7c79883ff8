"""λ rules and the feasible range of λ."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudcore import decompose, lambda_bounds, lambda_default, lambda_star


def test_default_is_one_over_sqrt_d():
    assert lambda_default(2**20) == pytest.approx(1 / 1024)
    with pytest.raises(ValueError, match="positive"):
        lambda_default(0)


def test_lambda_star_follows_the_paper_fit():
    d = 2**20
    expected = (-0.5682 * math.log(math.log(7)) + 1.0747) / 1024
    assert lambda_star(d, 7) == pytest.approx(expected)
    # n = 7, 1024²: about 0.79 of the default, inside the paper's Goldilocks zone
    assert 0.6e-3 < lambda_star(d, 7) < 0.9e-3


def test_lambda_star_is_floored_at_the_lower_bound():
    d, n = 4096, 10**8  # the fit goes negative for huge n
    assert lambda_star(d, n) == pytest.approx(1 / math.sqrt(d * n))
    with pytest.raises(ValueError, match="n >= 2"):
        lambda_star(d, 1)


def test_bounds_match_their_definitions(case_64x7):
    D = case_64x7.D
    d, n = D.shape
    bounds = lambda_bounds(D)
    assert bounds.lower == pytest.approx(1 / math.sqrt(d * n))
    u, _, vt = np.linalg.svd(D, full_matrices=False)
    assert bounds.upper == pytest.approx(np.abs(u @ vt).max(), rel=1e-9)
    assert bounds.upper_asymptotic == pytest.approx(
        2 * math.sqrt(3) / (math.sqrt(d) - math.sqrt(n))
    )
    assert bounds.lower < lambda_default(d) < bounds.upper


def test_above_the_upper_bound_the_cloud_vanishes(case_64x7):
    D = case_64x7.D
    res = decompose(D, "rpca", lam=1.05 * lambda_bounds(D).upper)
    assert np.abs(res.C).max() < 1e-4
    assert np.allclose(res.L, D, atol=1e-4)


def test_below_the_lower_bound_the_ground_vanishes(case_64x7):
    D = case_64x7.D
    res = decompose(D, "rpca", lam=0.5 * lambda_bounds(D).lower)
    assert np.linalg.norm(res.L) < 1e-3 * np.linalg.norm(D)


def test_bounds_reject_bad_shapes():
    with pytest.raises(ValueError, match="d > n"):
        lambda_bounds(np.ones((3, 5)))
    with pytest.raises(ValueError, match="all zero"):
        lambda_bounds(np.zeros((10, 3)))
