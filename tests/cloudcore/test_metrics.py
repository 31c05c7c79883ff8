"""The recovery metric r."""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore import recovery_error


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
