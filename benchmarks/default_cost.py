"""What the default costs per tile: 264e0ee's default solve (rpca 1/√d, refined, tol 1e-7), the
next one (aATM with λ̂*, not refined, tol 1e-7) and today's (aATM 1.4 × λ̂*, tol 3e-5, the ground
capped at each pixel's median date), today's without the cap and with the floor, and RPCA 1/√d
capped (what a scene chooses on two real-cloud sites, ``benchmarks/scene_solve.py``) and
``aatm-shadow`` κ 1 at λ̂* capped (a second ground for the default's mask), on one
tile halo as the pipeline solves it (:func:`pipeline.solve.tile.solve_matrix`, then
:func:`~pipeline.solve.tile.written_layers`: the ground clipped and, with ``solver.cap_ground``,
capped; float32, one thread), alternated, best of the runs.

The matrix is a tile of the paper's simulation of the demo image (7 dates), so the numbers are
comparable with docs/PERFORMANCE.md; the mask pass (keep_clear) is not in it (it reads the
solved layers once per row of tiles, and was already on the run path as the mask product).

Usage::

    python benchmarks/default_cost.py [--size 1280] [--dates 7] [--runs 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from pipeline_run import SETTINGS as BASELINE_SETTINGS  # this folder's benchmark

from cloudcore.simulate import paper_case
from pipeline.config import SolverConfig
from pipeline.inputs.synthetic import load_demo_truth
from pipeline.solve.tile import solve_matrix, solver_lambda, written_layers

SETTINGS = {
    "264e0ee (rpca auto, refined)": BASELINE_SETTINGS["264e0ee"]["solver"],
    "λ̂* (aatm star, tol 1e-7)": {
        "method": "aatm",
        "lam": "star",
        "lam_scale": 1.0,
        "tol": 1e-7,
        "cap_ground": False,
    },
    "today's default": {},
    "today's default without the cap": {"cap_ground": False},
    "today's default with the floor at 0.25 (an option)": {"floor_ground": 0.25},
    # The other solve a scene chooses on two of the five real-cloud sites (cloudlab.scene_choice).
    "rpca 1/√d, capped (a scene's choice)": {"method": "rpca", "lam": "auto", "lam_scale": 1.0},
    # The ground the default's mask would write with (docs/REAL-CLOUDS.md, "The default's mask
    # with a signed solve's ground"): a second solve per tile.
    "aatm-shadow κ 1, λ̂*, capped (a second ground)": {
        "method": "aatm-shadow",
        "lam_scale": 1.0,
        "shadow_weight": 1.0,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1280, help="tile halo side in pixels")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    case = paper_case(load_demo_truth(), args.dates, size=args.size, rng=np.random.default_rng(0))
    D = case.D.astype(np.float32)
    mask = np.ones(D.shape, bool)
    seconds: dict[str, list[float]] = {k: [] for k in SETTINGS}
    iterations: dict[str, int] = {}
    for _ in range(args.runs):
        for label, settings in SETTINGS.items():  # alternated: the machine's noise hits both
            solver = SolverConfig(**settings)
            lam = solver_lambda(solver, *D.shape)
            started = time.perf_counter()
            result = solve_matrix(D, mask, solver, (args.size, args.size), lam, threads=1)
            written_layers(result, D, mask, solver, threads=1)
            seconds[label].append(time.perf_counter() - started)
            iterations[label] = result.iterations
    print(f"tile {args.size}² × {args.dates} dates, float32, 1 thread, {args.runs} runs each")
    base = min(seconds[next(iter(SETTINGS))])
    for label in SETTINGS:
        best = min(seconds[label])
        print(
            f"{label:40s} best {best:6.2f} s  runs {[round(s, 2) for s in seconds[label]]}  "
            f"iterations {iterations[label]}  ratio {best / base:.2f}"
        )


if __name__ == "__main__":
    main()
