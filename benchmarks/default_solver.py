"""The default solver on the paper's simulated clouds: r of the candidate solvers on the
simulation of CONVENTIONS §4 (static ground, shadowless semi-transparent clouds), the same
cases as ``benchmarks/shadow_weight.py`` plus two, beside the temporal median. The real-cloud
scores that chose the default are ``python -m cloudlab experiment configs/real-clouds.yaml``
(docs/REAL-CLOUDS.md). About 30 s.

Usage::

    python benchmarks/default_solver.py
"""

from __future__ import annotations

import argparse

import numpy as np

import cloudcore
from cloudcore.simulate import paper_case
from pipeline.inputs.synthetic import load_demo_truth

#: (label, method, λ rule, refined): the paper's default and the pipeline's.
SOLVERS = (
    ("aatm/star", "aatm", "star", False),
    ("aatm/star+refine", "aatm", "star", True),
    ("rpca/auto", "rpca", "auto", False),
    ("rpca/auto+refine (default)", "rpca", "auto", True),
)
CASES = ((64, 7, 7), (128, 7, 1), (128, 15, 2), (256, 7, 0), (256, 15, 3))


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # only --help
    truth_rgb = load_demo_truth()
    scores: dict[str, list[float]] = {}
    for size, n, seed in CASES:
        case = paper_case(truth_rgb, n, size=size, rng=np.random.default_rng(seed))
        D = case.D
        d = D.shape[0]
        truth = np.repeat(case.truth.reshape(-1, 1), n, axis=1)
        for label, method, rule, refined in SOLVERS:
            lam = cloudcore.lambda_star(d, n) if rule == "star" else cloudcore.lambda_default(d)
            result = cloudcore.decompose(D, method, lam=lam)
            if refined:
                result = cloudcore.refine(D, result, (size, size))
            scores.setdefault(label, []).append(cloudcore.recovery_error(result.ground, truth))
        median = np.repeat(np.median(D, axis=1)[:, None], n, axis=1)
        scores.setdefault("temporal median", []).append(cloudcore.recovery_error(median, truth))
    head = " | ".join(f"{s}²×{n}" for s, n, _ in CASES)
    print(f"| solver | {head} | mean |")
    print("|---" * (len(CASES) + 2) + "|")
    for label, values in scores.items():
        cells = " | ".join(f"{v:.4f}" for v in values)
        print(f"| {label} | {cells} | {np.mean(values):.4f} |")


if __name__ == "__main__":
    main()
