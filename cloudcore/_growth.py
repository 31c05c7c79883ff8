"""The ALM's growth of μ per iteration (ρ): the paper's 1.5, which a study may change for a while.

The solvers read it once per solve (:func:`cloudcore.solvers.alm_schedule` and ATM's loop; a
warm start of :func:`cloudcore.solvers.run_alm`, which only a benchmark makes, reads it too).
It is no option of the pipeline: a larger ρ takes fewer iterations but is a different solve,
and held out it was not adopted (docs/REAL-CLOUDS.md, "The ALM's growth ρ"). The benchmarks and
``python -m cloudlab heldout --rho`` change it through :func:`mu_growth` or, in a worker process
for its whole life, :func:`set_mu_growth`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PAPER_RHO", "check_growth", "growth", "mu_growth", "set_mu_growth"]

#: The paper's growth of μ per iteration (docs/CONVENTIONS.md).
PAPER_RHO = 1.5
_rho = PAPER_RHO


def growth() -> float:
    """The growth of μ per iteration the solvers use now."""
    return _rho


def check_growth(rho: float | str) -> float:
    """``rho`` (a number or its text) as a float if it is a finite number > 1 (μ must grow),
    else ``ValueError``."""
    value = float(rho)
    if not (value > 1.0 and math.isfinite(value)):
        raise ValueError(f"rho must be > 1 and finite (μ grows by it each iteration): {rho}")
    return value


def set_mu_growth(rho: float | None) -> None:
    """Set the growth for the rest of this process (None: the paper's :data:`PAPER_RHO`)."""
    global _rho
    _rho = PAPER_RHO if rho is None else check_growth(rho)


@contextmanager
def mu_growth(rho: float | None) -> Iterator[None]:
    """Solve with growth ``rho`` inside the ``with`` block (None: the paper's); the growth
    before it is restored after, whatever happens."""
    before = _rho
    set_mu_growth(rho)
    try:
        yield
    finally:
        set_mu_growth(before)
