"""Tests of the solvers' matrix layout (cloudcore.frames)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudcore.frames import stack_frames, unstack_frames
from tests.cloudcore.conftest import FAST, ODD, rng


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
