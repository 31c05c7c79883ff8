"""The shared argument checks: accepted values come back normalised, messages name the call."""

from __future__ import annotations

import numpy as np
import pytest

# The checks are shared by every public function (cloudcore._checks, private to the package);
# their messages are tested here once, where they live, by the module's path: each public caller
# reaches only some of them, with its own arguments.
from cloudcore._checks import (
    check_count,
    check_pair,
    check_pixels,
    check_positive,
    check_range,
    check_rng,
    check_shape,
    check_stopping,
    check_unit_interval,
)


def test_accepted_values_are_normalised():
    assert check_positive(2, "beta") == 2.0
    assert check_count(np.int64(3), "n", "f") == 3
    assert check_shape((np.int64(4), 5), "f") == (4, 5)
    assert check_range(1, "coverage", 0.0, 1.0, "f") == 1.0
    assert check_pair([1, -2], "wind", "f") == (1.0, -2.0)
    g = np.random.default_rng(0)
    assert check_rng(g, "f") is g


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_positive(-1.0, "beta"), "^beta must be a finite number > 0"),
        (lambda: check_positive(np.inf, "lam", "f"), "^f: lam must be"),
        (lambda: check_count(True, "octaves", "f"), "^f: octaves must be an integer ≥ 1"),
        (lambda: check_count(2.0, "n", "f"), "^f: n must be an integer"),
        (lambda: check_shape((3, 0), "f"), "^f: shape must be a pair"),
        (lambda: check_shape((3.5, 2), "f"), "^f: shape must be a pair"),
        (
            lambda: check_range(2.0, "growth", 0.0, 1.0, "f"),
            r"^f: growth must lie in \[0, 1\]",
        ),
        (lambda: check_pair((1.0,), "wind", "f"), "^f: wind must be a pair"),
        (lambda: check_pair((1.0, np.nan), "wind", "f"), "^f: wind must be finite"),
        (lambda: check_rng(42, "f"), "^f: rng must be a numpy.random.Generator, got int"),
        (lambda: check_stopping(0.0, 10), "^tol must be"),
        (lambda: check_stopping(1e-7, 2.5), "^max_iter must be a positive integer"),
        (lambda: check_pixels(0), "^d must be a positive number of pixels"),
        (
            lambda: check_unit_interval(np.array([0.5, 1.5]), "truth", "f"),
            r"^f: truth must hold finite values in \[0, 1\]",
        ),
    ],
)
def test_refusals_name_the_argument_and_the_call(call, message):
    with pytest.raises(ValueError, match=message):
        call()
