"""The recovery metric r."""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore import recovery_error
from cloudcore.metrics import spectral_angle


def test_r_stacks_all_frames():
    truth = np.array([[1.0, 0.0], [0.0, 1.0]])
    frames = np.stack([truth, truth + 0.5])
    # ‖[0, 0.5·1]‖ over both frames together / ‖[I, I]‖
    expected = np.linalg.norm(np.full((2, 2), 0.5)) / np.linalg.norm(np.stack([truth, truth]))
    assert recovery_error(frames, truth) == pytest.approx(expected)


def test_r_accepts_matrix_layout_and_ignores_nan_rows():
    truth = np.array([0.2, 0.4, 0.6])
    rec = np.repeat(truth[:, None], 3, axis=1)
    rec[0] = np.nan
    assert recovery_error(rec, truth) == 0.0


def test_r_rejects_mismatched_shapes_and_zero_truth():
    with pytest.raises(ValueError, match="does not match"):
        recovery_error(np.zeros((3, 4, 4)), np.zeros((5, 5)))
    with pytest.raises(ValueError, match="all zero"):
        recovery_error(np.ones((4, 2)), np.zeros(4))


def test_spectral_angle_scores_colour_not_brightness():
    truth = np.array([[0.1, 0.2, 1.0, 0.3], [0.1, 0.0, 0.0, 0.3], [0.2, 0.0, 0.0, 0.3]])
    output = np.array([[0.3, 0.0, 1.0, 0.3], [0.3, 0.2, 1.0, 0.3], [0.6, 0.0, 0.0, np.nan]])
    angle = spectral_angle(output, truth)
    # Three times as bright, the same colour: 0. Orthogonal bands: 90. 45° in one plane. NaN.
    # A cosine a few float64 ulps off 1 is an angle of sqrt(2 · 8 · eps) rad near 0 (arccos is
    # steep there): the tolerance, in degrees.
    atol = np.degrees(np.sqrt(2 * 8 * np.finfo(np.float64).eps))
    np.testing.assert_allclose(angle[:3], [0.0, 90.0, 45.0], atol=atol)
    assert np.isnan(angle[3])
    assert np.isnan(spectral_angle(np.zeros((3, 1)), np.ones((3, 1)))[0])


def test_spectral_angle_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="differ"):
        spectral_angle(np.zeros((3, 4)), np.zeros((4, 4)))
