"""ATM (Alg. 1): the inner loop lowers its objective, the outer loop meets the constraint."""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore import decompose, recovery_error
from cloudcore._schedule import initial_state
from cloudcore.atm import atm_lowrank
from cloudcore.svt import svt


def _inner_objective(D, C, L, Y, mu):
    """f of Alg. 1 (with Y/μ): μ/2‖D − C − (1 − C)∘L + Y/μ‖² + ‖L‖_*."""
    _, nuclear = svt(np.ascontiguousarray(L), 0.0)
    return 0.5 * mu * np.linalg.norm(D - C - (1 - C) * L + Y / mu) ** 2 + nuclear


def test_inner_loop_lowers_the_objective(case_64x7):
    D = np.ascontiguousarray(case_64x7.D.T)  # the solvers' wide layout: dates × pixels
    Y, mu = initial_state(D, 1 / np.sqrt(D.shape[1]), float(np.linalg.norm(D, 2)))
    rng = np.random.default_rng(0)
    C = np.clip(rng.random(D.shape) - 0.8, 0, 1)  # a plausible sparse cloud layer
    L0 = np.clip(D - C, 0, 1)
    observed = np.ones(D.shape, dtype=bool)
    for scale in (1.0, 10.0, 100.0):
        L1 = atm_lowrank(D, C, L0, Y, mu * scale, observed)
        assert _inner_objective(D, C, L1, Y, mu * scale) < _inner_objective(D, C, L0, Y, mu * scale)
        assert L1.min() >= 0 and L1.max() <= 1  # feasibility projection


def test_constraint_residual_reaches_tol(case_64x7):
    res = decompose(case_64x7.D, "atm", tol=1e-7)
    assert res.converged and res.residual < 1e-7
    D = case_64x7.D
    assert np.linalg.norm(D - res.C - (1 - res.C) * res.L) / np.linalg.norm(D) < 1e-6
    assert res.C.min() >= 0 and res.C.max() <= 1 and res.L.min() >= 0 and res.L.max() <= 1
    assert not res.N.any()


@pytest.mark.slow
def test_atm_beats_rpca_at_their_best_lambda_with_15_dates(case_128x15):
    """The paper's finding (Fig. ATMvsRPCAsim15): with n = 15, ATM at its best λ beats RPCA."""
    d = case_128x15.D.shape[0]
    truth = case_128x15.truth.ravel()
    grid = np.array([0.35, 0.5, 0.7, 1.0]) / np.sqrt(d)

    def best(method: str) -> float:
        return min(
            recovery_error(decompose(case_128x15.D, method, lam=lam).ground, truth) for lam in grid
        )

    assert best("atm") < best("rpca")
