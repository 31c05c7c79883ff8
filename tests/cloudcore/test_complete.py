"""The MC post-step: mask rule and weighted completion."""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore import cloud_mask, complete, decompose, recovery_error


def test_mask_drops_specks_and_grows_blobs():
    h = w = 40
    C = np.zeros((h, w, 2))
    C[5, 5, 0] = 1.0  # a lone speck: removed by the opening
    C[20:30, 20:30, 1] = 1.0  # a cloud: kept and dilated
    mask = cloud_mask(C.reshape(h * w, 2), (h, w), gamma=0.8, radius=3)
    frames = mask.reshape(h, w, 2)
    assert not frames[..., 0].any()
    assert frames[20:30, 20:30, 1].all()
    assert frames[..., 1].sum() > 100  # grown beyond the 10 × 10 block
    assert not frames[0, 0, 1]


def test_mask_checks_the_image_shape():
    with pytest.raises(ValueError, match="does not hold frames"):
        cloud_mask(np.zeros((10, 2)), (4, 4))


def test_completion_satisfies_the_constraint_and_recovers(case_64x7):
    D = case_64x7.D
    first = decompose(D, "rpca")
    res = complete(D, first.C, (64, 64))
    assert res.converged
    assert np.linalg.norm(D - res.L - res.C) / np.linalg.norm(D) < 1e-6
    truth = case_64x7.truth.ravel()
    assert recovery_error(res.ground, truth) < recovery_error(D, truth)
    assert res.lam == pytest.approx(0.1 / 64)


def test_completion_in_float32(case_64x7):
    D = case_64x7.D.astype(np.float32)
    res = complete(D, decompose(D, "aatm").C, (64, 64))
    assert res.L.dtype == np.float32 and res.converged


def test_rho_is_the_growth_a_study_would_set_and_a_bad_one_is_refused(case_64x7):
    """``complete(rho=…)`` solves as the same call under a study's ``mu_growth`` does, bit for
    bit, in fewer iterations than the paper's 1.5; ρ ≤ 1 is refused before any work."""
    from cloudcore._growth import mu_growth

    D = case_64x7.D.astype(np.float32)
    C = decompose(D, "rpca").C
    paper = complete(D, C, (64, 64), tol=1e-5)
    given = complete(D, C, (64, 64), tol=1e-5, rho=2.0)
    with mu_growth(2.0):
        studied = complete(D, C, (64, 64), tol=1e-5)
    assert given.iterations == studied.iterations < paper.iterations
    assert np.array_equal(given.L, studied.L) and np.array_equal(given.C, studied.C)
    with pytest.raises(ValueError, match="rho must be > 1"):
        complete(D, C, (64, 64), rho=1.0)
