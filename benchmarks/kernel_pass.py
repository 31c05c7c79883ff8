"""The solver's fused ALM pass alone: nanoseconds per matrix entry, by the mask it runs with.

:func:`cloudcore._kernels.fused_iteration` (aATM's pass, the default's) on a random n × d
float32 matrix, one thread, best of ``--rounds`` timings of several calls each, with no mask,
with every entry observed (the masked path taken all the same), with a coherent mask (the first
30 % of the pixels unobserved on every date, as where a date's footprint misses part of a tile)
and with a random one (30 % of the entries, the masked path's worst case for branches).

To compare two versions of the code, run it from each checkout:
``PYTHONPATH=TREE python TREE/benchmarks/kernel_pass.py`` (docs/PERFORMANCE.md).

Usage::

    NUMBA_NUM_THREADS=1 python benchmarks/kernel_pass.py [--dates 7] [--pixels 131072 1327104]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cloudcore import _kernels


def masks(n: int, d: int, rng: np.random.Generator) -> dict[str, np.ndarray | None]:
    """The masks timed: None (no mask), all True, coherent and random, 30 % unobserved."""
    return {
        "no mask": None,
        "all observed": np.ones((n, d), bool),
        "coherent": np.broadcast_to(np.arange(d) >= 0.3 * d, (n, d)).copy(),
        "random": rng.random((n, d)) >= 0.3,
    }


def time_pass(n: int, d: int, obs: np.ndarray | None, rounds: int) -> float:
    """Best seconds per entry of one fused pass (aATM's: β = 1, clipped cloud) over ``rounds``."""
    rng = np.random.default_rng(1)
    D = rng.random((n, d), dtype=np.float32)
    C, C_next, N, Y, L = (np.zeros_like(D) for _ in range(5))
    W = np.eye(n) * 0.9
    masked = obs is not None
    args = (
        D,
        _kernels.AS_STORED,
        C,
        C_next,
        N,
        Y,
        L,
        obs if masked else np.ones((1, 1), bool),
        np.zeros((1, 1), np.float32),
        W,
        masked,
        False,  # weighted
        True,  # clip_c
        0.0,  # c_floor
        -1.0,  # neg
        1e-3,  # lam
        1.0,  # mu
        0.5,  # n_factor
        2.0,  # mu_next
    )
    _kernels.fused_iteration(*args)  # compiled or loaded from numba's cache, untimed
    calls = max(3, int(3e7 // (n * d)))
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            _kernels.fused_iteration(*args)
        best = min(best, (time.perf_counter() - started) / calls)
    return best / (n * d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--pixels", type=int, nargs="+", default=[131072, 1327104])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("pixels  mask           ns per entry")
    for d in args.pixels:
        for label, obs in masks(args.dates, d, rng).items():
            seconds = time_pass(args.dates, d, obs, args.rounds)
            print(f"{d:>7}  {label:<13}  {seconds * 1e9:.2f}")


if __name__ == "__main__":
    main()
