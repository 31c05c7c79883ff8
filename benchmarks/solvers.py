"""Solver benchmark: this project's aATM / RPCA against a literal NumPy port and pyrpca.

Everything is timed in one run, side by side, on the same paper-style cases (tyrol-w1 in grey,
reference cloud recipe), so ratios are meaningful on a shared, noisy machine. Each timing is the
best of ``--repeat`` runs (the slow baselines run once unless ``--repeat-slow`` says otherwise).

Usage::

    python benchmarks/solvers.py                    # 512² and 1024², n = 7 and 15
    python benchmarks/solvers.py --sizes 512 --dates 7 --no-baselines
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import time
from collections.abc import Callable
from functools import partial

import numpy as np

import cloudcore
from cloudcore.reference import literal_alm
from cloudcore.simulate import paper_case
from pipeline.inputs.synthetic import load_demo_truth


def run_ours(D: np.ndarray, method: str, lam: float) -> tuple[np.ndarray, int]:
    res = cloudcore.decompose(D, method, lam=lam)
    return res.ground, res.iterations


def run_literal(D: np.ndarray, lam: float) -> tuple[np.ndarray, int]:
    L, _, _, it = literal_alm(D, lam, method="aatm")
    return np.clip(L, 0, 1), it


def run_pyrpca(D: np.ndarray, lam: float) -> tuple[np.ndarray, int]:
    from pyrpca import rpca_pcp_ialm

    L, _ = rpca_pcp_ialm(D, lam, verbose=False)
    return np.clip(L, 0, 1), -1  # pyrpca does not report its iteration count


def best_time(
    fn: Callable[[], tuple[np.ndarray, int]], repeat: int
) -> tuple[float, np.ndarray, int]:
    """Best wall time of ``repeat`` calls; returns (seconds, ground (d, n), iterations)."""
    best = np.inf
    out: tuple[np.ndarray, int] = (np.empty(0), 0)
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--dates", type=int, nargs="+", default=[7, 15])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repeat-slow", type=int, default=1)
    parser.add_argument("--no-baselines", action="store_true", help="skip literal port, pyrpca")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    image = load_demo_truth()
    print(
        f"# solvers benchmark  ({platform.processor() or platform.machine()}, "
        f"numba threads {__import__('numba').get_num_threads()})"
    )
    # Compile every kernel variant before timing anything.
    warm = paper_case(image, 3, size=64, rng=np.random.default_rng(0)).D
    for dtype in (np.float32, np.float64):
        for method in ("aatm", "rpca"):
            cloudcore.decompose(warm.astype(dtype), method)

    header = f"{'case':<13}{'solver':<24}{'time s':>9}{'vs ours f32':>13}{'iters':>7}{'r':>9}"
    for size in args.sizes:
        for n in args.dates:
            case = paper_case(image, n, size=size, rng=np.random.default_rng(args.seed))
            truth = case.truth.ravel()
            D64 = case.D
            D32 = D64.astype(np.float32)
            lam = cloudcore.lambda_default(D64.shape[0])
            runs: list[tuple[str, Callable[[], tuple[np.ndarray, int]], int]] = [
                ("ours aatm float32", partial(run_ours, D32, "aatm", lam), args.repeat),
                ("ours aatm float64", partial(run_ours, D64, "aatm", lam), args.repeat),
                ("ours rpca float32", partial(run_ours, D32, "rpca", lam), args.repeat),
                ("ours rpca float64", partial(run_ours, D64, "rpca", lam), args.repeat),
            ]
            if not args.no_baselines:
                runs.append(
                    ("literal aatm (np svd)", partial(run_literal, D64, lam), args.repeat_slow)
                )
                if importlib.util.find_spec("pyrpca") is not None:
                    runs.append(
                        ("pyrpca rpca float64", partial(run_pyrpca, D64, lam), args.repeat_slow)
                    )
                else:
                    print("  (pyrpca not installed: pip install -e '.[bench]')")

            print(f"\n{header}")
            results = {}
            for name, fn, repeat in runs:
                seconds, ground, iters = best_time(fn, repeat)
                recovery = cloudcore.recovery_error(ground, truth)
                results[name] = (seconds, recovery)
                base = results["ours aatm float32"][0]
                label = f"{size}²×{n}"
                print(
                    f"{label:<13}{name:<24}{seconds:>9.3f}{seconds / base:>12.1f}x"
                    f"{iters if iters >= 0 else '-':>7}{recovery:>9.4f}"
                )
            r32, r64 = results["ours aatm float32"][1], results["ours aatm float64"][1]
            print(f"{'':<13}aatm r float32 vs float64: {abs(r32 - r64) / r64 * 100:.3f} % apart")


if __name__ == "__main__":
    main()
