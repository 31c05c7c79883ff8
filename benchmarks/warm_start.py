"""What a warm start could save (issue #45, item 2): a tile started from its left neighbour's solve.

A row task solves its tiles left to right, so when a tile starts its left neighbour's solve is in
memory. What carries over: the neighbour's ground on the columns the two halos share (2 × halo
of the tile's width) and its right factors (the n × n eigenvectors of its ground's Gram matrix,
nearly the same for neighbouring tiles), which give a ground for the rest of the tile by
projecting D onto their leading r. The ALM's other state (the dual Y, the cloud C) belongs to
the neighbour's pixels and has nothing to say about the new ones.

The inexact ALM's iteration count is set by its step-size schedule: μ starts at 1.25/‖D‖₂ and
grows by ρ (the pipeline's ``solver.rho``) an iteration until ‖D − L − C − N‖_F/‖D‖_F < tol. A
warm start either keeps that schedule (μ₀ as cold) or starts it j steps later (μ₀ · ρʲ), which
is what a warm start must do to save iterations. Each start is solved with the pipeline's
default (aATM, 1.4 × λ̂*, tol 3e-5, ρ 2, float32, one thread; no mask, as a tile inside every
footprint) and its written values, DN = round(clip(L, 0, 1) · max_dn), are compared with the
cold start's (the default's solve, what the pipeline writes today: the issue's bar for a lever,
≥ 99.9 % of the DN identical and none more than 1 DN apart) and with a cold solve to cloudcore's
tolerance (1e-7, floored at 1e-6 in float32); r is against the simulation's truth. With
``--rhos`` the cold start is also solved with other growths ρ of μ
(:func:`cloudcore._growth.mu_growth`).

The tiles are the paper's simulation of the demo image (``cloudcore.simulate.paper_case``), two
neighbouring halos of one (size + core)² scene. The cold start is checked bit for bit against
:func:`cloudcore.decompose` before the starts are solved.

Usage::

    python benchmarks/warm_start.py [--size 1280] [--core 1024] [--dates 7] [--seed 0]
    python benchmarks/warm_start.py --rhos 2 2.5
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

import cloudcore
from cloudcore._growth import check_growth, growth, mu_growth
from cloudcore._problem import prepare, spectral_norm
from cloudcore.simulate import paper_case
from cloudcore.solvers import FLOAT32_TOL_FLOOR, run_alm, sparse_rule
from pipeline.config import SolverConfig
from pipeline.inputs.synthetic import load_demo_truth
from pipeline.outputs.products import encode_clear
from pipeline.solve.tile import solver_lambda


def solve(
    D: np.ndarray, lam: float, beta: float, tol: float, L0: np.ndarray | None, advance: int
) -> tuple[np.ndarray, int]:
    """aATM's fused ALM (:func:`cloudcore.solvers.run_alm`) on the internal (dates × pixels)
    matrix D from the ground ``L0`` (None: zero), μ₀ advanced ``advance`` steps of the schedule;
    returns L and the iterations. With neither, the cold solve of an unmasked float32 D."""
    problem = prepare(D.T, None)  # the internal layout is D's own
    start = None
    if L0 is not None or advance:
        start = (np.zeros_like(D) if L0 is None else L0, advance)
    L, _, _, iterations, _ = run_alm(
        problem, lam, spectral_norm(problem.D), sparse=sparse_rule("aatm"), beta=beta, tol=tol,
        max_iter=1000, start=start,
    )  # fmt: skip
    return L, iterations


def right_factors(L: np.ndarray) -> np.ndarray:
    """The dates' eigenvectors of L Lᵀ (n × n, float64), leading one last."""
    L64 = L.astype(np.float64)
    return np.asarray(np.linalg.eigh(L64 @ L64.T)[1])


def starts(
    D: np.ndarray, L_left: np.ndarray, side: int, overlap: int
) -> dict[str, Callable[[], np.ndarray | None]]:
    """The grounds a tile could start from, given its left neighbour's ground ``L_left``."""
    U = right_factors(L_left)
    n = D.shape[0]

    def projected(rank: int) -> np.ndarray:
        P = U[:, -rank:] @ U[:, -rank:].T
        return (P @ D.astype(np.float64)).astype(D.dtype)

    def shared(rank: int) -> np.ndarray:
        L0 = projected(rank).reshape(n, side, side)
        L0[:, :, :overlap] = L_left.reshape(n, side, side)[:, :, side - overlap :]
        return L0.reshape(n, -1)

    return {
        "zero (cold)": lambda: None,
        "D onto the neighbour's leading factor": lambda: projected(1),
        "D onto its leading 3 factors": lambda: projected(3),
        "neighbour's ground on the overlap, leading factor elsewhere": lambda: shared(1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1280, help="tile halo side, px")
    parser.add_argument("--core", type=int, default=1024, help="tile core side, px")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-dn", type=float, default=1023.0, help="DN of 1.0 (GF-4: 1023)")
    parser.add_argument("--advance", type=int, nargs="+", default=[0, 2, 4, 6])
    parser.add_argument("--rhos", type=check_growth, nargs="*", default=[], help="cold, other ρ")
    args = parser.parse_args()
    # The pipeline's growth of μ for every solve but the --rhos rows (run_alm and decompose
    # read it when given none).
    with mu_growth(SolverConfig().rho):
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    side, core, n = args.size, args.core, args.dates
    case = paper_case(load_demo_truth(), n, size=side + core, rng=np.random.default_rng(args.seed))
    solver = SolverConfig()
    lam = solver_lambda(solver, side * side, n)

    def halo(stack: np.ndarray, col: int) -> np.ndarray:
        return np.ascontiguousarray(stack[..., :side, col : col + side], dtype=np.float32)

    left, right = (halo(case.observed, c).reshape(n, -1) for c in (0, core))
    truth = halo(case.truth, core).reshape(-1)
    L_left, _ = solve(left, lam, solver.beta, solver.tol, None, 0)
    cold, _ = solve(right, lam, solver.beta, solver.tol, None, 0)
    if not np.array_equal(cold, cloudcore.decompose(right.T, "aatm", lam=lam, tol=solver.tol).L.T):
        raise SystemExit("the cold start is not cloudcore.decompose's solve")
    reference, ref_iterations = solve(right, lam, solver.beta, FLOAT32_TOL_FLOOR, None, 0)

    def written(L: np.ndarray) -> np.ndarray:
        return encode_clear(L, "uint16", args.max_dn).astype(np.int32)

    bars = {"cold": written(cold), f"cold to {FLOAT32_TOL_FLOOR:g}": written(reference)}
    print(
        f"two {side}² × {n}-date halos {core} px apart, aATM λ = {lam:.3g}, tol {solver.tol:g}, "
        f"float32, 1 thread; the solve to {FLOAT32_TOL_FLOOR:g}: {ref_iterations} iterations"
    )
    head = ["start", "μ₀", "ρ", "iterations", "seconds"]
    for bar in bars:
        head += [f"DN identical to {bar}", "largest DN difference"]
    print("| " + " | ".join([*head, "r"]) + " |\n|" + "---|" * (len(head) + 1))

    def row(label: str, mu0: str, rho: float, L0: np.ndarray | None, advance: int) -> None:
        began = time.perf_counter()
        L, iterations = solve(right, lam, solver.beta, solver.tol, L0, advance)
        seconds = time.perf_counter() - began
        cells = [label, mu0, f"{rho:g}", str(iterations), f"{seconds:.2f}"]
        for dn in bars.values():
            diff = np.abs(written(L) - dn)
            cells += [f"{100 * np.mean(diff == 0):.2f} %", str(diff.max())]
        r = np.linalg.norm(L - truth) / (np.linalg.norm(truth) * math.sqrt(n))
        print("| " + " | ".join([*cells, f"{r:.4f}"]) + " |", flush=True)

    for label, start in starts(right, L_left, side, side - core).items():
        for advance in args.advance:
            mu0 = "cold" if advance == 0 else f"cold · ρ^{advance}"
            row(label, mu0, growth(), start(), advance)
    for rho in args.rhos:
        with mu_growth(rho):
            row("zero (cold)", "cold", rho, None, 0)


if __name__ == "__main__":
    main()
