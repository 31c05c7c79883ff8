"""The ALM's growth of μ per iteration (ρ): the paper's 1.5, which a study may change for a while.

The solvers take ρ as an argument (``rho`` of :func:`cloudcore.decompose`,
:func:`cloudcore.refine` and :func:`cloudcore.scene.solve_blocks`); left out, they use
:func:`growth`: the paper's 1.5, or what a study set here for a while. The pipeline passes its
own (``solver.rho``, 2 by default: docs/REAL-CLOUDS.md, "The ALM's growth ρ"). The benchmarks
and ``python -m cloudlab heldout --rho`` set a study's ρ through :func:`mu_growth` or, in a
worker process for its whole life, :func:`set_mu_growth`; the lab's scored solves
(:func:`cloudlab.sitescore.solve_specs`, :mod:`cloudlab.realclouds`) read it back with
:func:`study_growth` and pass it on. The setting is one per process, not per thread: a study
sets it while nothing else solves (the pipeline never reads it: it passes its own ρ).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "PAPER_RHO",
    "check_growth",
    "growth",
    "mu_growth",
    "resolve_growth",
    "set_mu_growth",
    "study_growth",
]

#: The paper's growth of μ per iteration (docs/CONVENTIONS.md).
PAPER_RHO = 1.5
_study: float | None = None  # a study's ρ, while one is set


def growth() -> float:
    """The growth of μ per iteration a solver uses when it is given none: a study's, else the
    paper's."""
    return PAPER_RHO if _study is None else _study


def resolve_growth(rho: float | None) -> float:
    """The growth a solver given ``rho`` uses: ``rho`` checked (:func:`check_growth`), or
    :func:`growth` when it is None."""
    return growth() if rho is None else check_growth(rho)


def study_growth() -> float | None:
    """The growth a study set (:func:`mu_growth`, :func:`set_mu_growth`), None if none is set."""
    return _study


def check_growth(rho: float | str) -> float:
    """``rho`` (a number or its text) as a float if it is a finite number > 1 (μ must grow),
    else ``ValueError``."""
    value = float(rho)
    if not (value > 1.0 and math.isfinite(value)):
        raise ValueError(f"rho must be > 1 and finite (μ grows by it each iteration): {rho}")
    return value


def set_mu_growth(rho: float | None) -> None:
    """Set a study's growth for the rest of this process (None: no study's, the solvers' own)."""
    global _study
    _study = None if rho is None else check_growth(rho)


@contextmanager
def mu_growth(rho: float | None) -> Iterator[None]:
    """Solve with a study's growth ``rho`` inside the ``with`` block (None: no study's); the
    setting before it is restored after, whatever happens."""
    before = _study
    set_mu_growth(rho)
    try:
        yield
    finally:
        set_mu_growth(before)
