"""Timings of the cloud simulation at the paper's image size (1024 × 1024).

Run ``python benchmarks/simulate.py [--size N] [--repeat R]``; prints the best of R runs per case.
The target for ``perlin_noise`` (1024², 5 octaves) is ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from cloudcore.simulate import cloud_field, cloud_series, perlin_noise, reference_clouds


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` calls, in seconds (the best is the least disturbed run)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (best is shown)")
    args = parser.parse_args()
    shape = (args.size, args.size)
    rng = np.random.default_rng(0)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("perlin_noise (5 octaves)", lambda: perlin_noise(shape, rng=rng)),
        ("cloud_field (defaults)", lambda: cloud_field(shape, rng=rng)),
        ("reference_clouds", lambda: reference_clouds(shape, rng=rng)),
        ("cloud_series moving, n=7", lambda: cloud_series(shape, 7, style="moving", rng=rng)),
    ]
    perlin_noise((64, 64), rng=rng)  # warm-up: imports and first-call overheads
    print(f"{args.size} x {args.size}, best of {args.repeat}")
    print(f"{'case':<28} {'seconds':>8}")
    for name, fn in cases:
        print(f"{name:<28} {best_of(fn, args.repeat):>8.3f}")


if __name__ == "__main__":
    main()
