"""κ of the shadow model (docs/CONVENTIONS.md §9): r of aATM and aATM-shadow on the paper's
simulation, without and with a shadow (one date darkened to 40 % of the ground on a quarter of
the scene), for κ = 1, 2, 4, 8. About 10 s.

Usage::

    python benchmarks/shadow_weight.py
"""

from __future__ import annotations

import argparse

import numpy as np

import cloudcore
from cloudcore.simulate import paper_case
from pipeline.inputs.synthetic import load_demo_truth


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # only --help
    truth_rgb = load_demo_truth()
    print("case     | aATM   | aATM, shadow | κ: r without / with the shadow")
    for size, n, seed in ((64, 7, 7), (128, 15, 2), (256, 7, 0)):
        case = paper_case(truth_rgb, n, size=size, rng=np.random.default_rng(seed))
        D = case.D
        truth = np.repeat(case.truth.reshape(-1, 1), n, axis=1)
        lam = cloudcore.lambda_star(*D.shape)
        shaded = D.copy()
        square = np.zeros((size, size), bool)
        square[size // 4 : size // 2, size // 4 : size // 2] = True
        in_square = square.ravel()
        shaded[in_square, 2] = case.truth.ravel()[in_square] * 0.4

        def r(
            data: np.ndarray, method: str, lam: float = lam, truth: np.ndarray = truth, **kw: float
        ) -> float:
            res = cloudcore.decompose(data, method, lam=lam, **kw)
            return cloudcore.recovery_error(res.ground, truth)

        row = [f"{size}²×{n:<3}", f"{r(D, 'aatm'):.4f}", f"{r(shaded, 'aatm'):.4f}      "]
        for k in (1, 2, 4, 8):
            a = r(D, "aatm-shadow", shadow_weight=k)
            b = r(shaded, "aatm-shadow", shadow_weight=k)
            row.append(f"κ={k}: {a:.4f} / {b:.4f}")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
