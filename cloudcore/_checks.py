"""Argument checks shared by the whole package: one place, one message style.

Every check raises ``ValueError`` with a one-line message that names the argument, what it must
be and what was given; ``where`` (the public function's name) prefixes the message when given, so
that an error raised deep inside a simulation still says which call was wrong. Checks that accept
a value return it normalised (``float``, ``int``, a tuple) for the caller to use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _at(where: str) -> str:
    """The message prefix naming the public function (empty when there is none)."""
    return f"{where}: " if where else ""


def check_rng(rng: object, where: str = "") -> np.random.Generator:
    """Require a ``numpy.random.Generator`` (no seeds, no legacy global state)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"{_at(where)}rng must be a numpy.random.Generator, got {type(rng).__name__}; "
            "pass e.g. rng=np.random.default_rng(seed)"
        )
    return rng


def check_shape(shape: Sequence[int], where: str = "") -> tuple[int, int]:
    """Require a ``(height, width)`` pair of positive integers."""
    message = (
        f"{_at(where)}shape must be a pair (height, width) of positive integers, got {shape!r}"
    )
    try:
        h, w = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if h < 1 or w < 1 or (h, w) != tuple(shape):
        raise ValueError(message)
    return h, w


def check_count(value: object, name: str, where: str = "") -> int:
    """Require an integer ≥ 1 (booleans and floats with integral values are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{_at(where)}{name} must be an integer ≥ 1, got {value!r}")
    return int(value)


def check_range(value: float, name: str, lo: float, hi: float, where: str = "") -> float:
    """Require a number in the closed interval ``[lo, hi]``."""
    value = float(value)
    if not lo <= value <= hi:
        raise ValueError(f"{_at(where)}{name} must lie in [{lo:g}, {hi:g}], got {value:g}")
    return value


def check_positive(value: float, name: str, where: str = "") -> float:
    """Require a finite number > 0 (a weight, a penalty, a tolerance, a scale)."""
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{_at(where)}{name} must be a finite number > 0, got {value:g}")
    return value


def check_pair(value: object, name: str, where: str = "") -> tuple[float, float]:
    """Require a pair of finite numbers ``(y, x)``."""
    try:
        a, b = (float(v) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(
            f"{_at(where)}{name} must be a pair of numbers (y, x), got {value!r}"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"{_at(where)}{name} must be finite, got {value!r}")
    return a, b


def check_unit_interval(a: np.ndarray, name: str, where: str = "") -> None:
    """Require an array of finite values in [0, 1] (an empty array passes)."""
    if a.size and not (np.all(np.isfinite(a)) and a.min() >= 0.0 and a.max() <= 1.0):
        raise ValueError(
            f"{_at(where)}{name} must hold finite values in [0, 1] (got range "
            f"[{np.nanmin(a):g}, {np.nanmax(a):g}]); clip or rescale it (unit_scale for DN)"
        )


def check_stopping(tol: float, max_iter: int, where: str = "") -> None:
    """Require a stopping rule the iterations can use: ``tol`` > 0 and ``max_iter`` ≥ 1."""
    check_positive(tol, "tol", where)
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"{_at(where)}max_iter must be a positive integer, got {max_iter}")


def check_pixels(d: int, where: str = "") -> None:
    """Require a pixel count d ≥ 1 (λ rules divide by √d)."""
    if d < 1:
        raise ValueError(f"{_at(where)}d must be a positive number of pixels, got {d}")
