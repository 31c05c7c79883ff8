"""cloudcore._memory: zero arrays that cost no resident memory until written."""

from __future__ import annotations

import sys

import numpy as np
import psutil
import pytest

# An internal helper of the solvers (cloudcore._memory, private to the package), imported by the
# module's path: what it promises (no resident pages until written) shows in no public result.
from cloudcore._memory import lazy_zeros_like


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lazy_zeros_match_zeros_like_in_shape_dtype_and_order(dtype) -> None:
    wide = np.ones((3, 50), dtype)
    for like in (wide, wide.T):  # C order, and a transposed view (Fortran order)
        zeros = lazy_zeros_like(like)
        expected = np.zeros_like(like)
        assert zeros.shape == expected.shape and zeros.dtype == expected.dtype
        assert zeros.flags.c_contiguous == expected.flags.c_contiguous
        assert zeros.flags.f_contiguous == expected.flags.f_contiguous
        assert not zeros.any() and zeros.flags.writeable


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's calloc and RSS")
def test_lazy_zeros_are_not_resident_until_written() -> None:
    me = psutil.Process()
    like = np.empty((8, 2**21), np.float32)  # 64 MiB
    before = me.memory_info().rss
    lazy = lazy_zeros_like(like)
    untouched = me.memory_info().rss - before
    eager = np.zeros_like(like)  # the same size, every page written: the check can tell
    written = me.memory_info().rss - before - untouched
    assert untouched < 8 << 20 < 48 << 20 < written
    lazy[0] = 1.0  # an eighth of it, written: now resident
    assert me.memory_info().rss - before - untouched - written >= 6 << 20
    del eager
