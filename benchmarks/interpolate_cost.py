"""What the pixel's own departure interpolated in time (``mask.interpolate``) costs per core:
the mask pass's :func:`pipeline.outputs.kept.filled_shift` of one band over one core's context
(the default offset's: the 1024 px core and the offset's margin and block around it), without
and with the interpolation, alternated, best of the runs, one thread; times the bands for a core.

The residual is synthetic (float32 noise, as the solved layers' C + N − S) and about two thirds
of the entries are kept (the evidence), the dates a day apart. The interpolation reads every
entry once in a compiled pass, so its cost does not depend on the values. The reads and writes
of the mask pass are not in it; they are the same with it or without (docs/PERFORMANCE.md).

Usage::

    python benchmarks/interpolate_cost.py [--size 1024] [--dates 7] [--bands 5] [--runs 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cloudcore.offset import OFFSET_BLOCK, offset_margin
from pipeline.config import MaskConfig
from pipeline.outputs.kept import filled_shift


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="core, px a side")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--bands", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scale = MaskConfig().offset
    side = args.size + 2 * (offset_margin(scale=scale) + OFFSET_BLOCK)
    rng = np.random.default_rng(0)
    residual = rng.normal(0.0, 0.02, (args.dates, side, side)).astype(np.float32)
    evidence = rng.random(residual.shape) < 2 / 3
    times = tuple(86_400.0 * k for k in range(args.dates))
    variants = {"offset alone": None, "interpolated, then the offset": times}
    filled_shift(residual[:, :64, :64], evidence[:, :64, :64], scale=scale, times=times)  # compile
    best = dict.fromkeys(variants, np.inf)
    for _ in range(args.runs):
        for name, given in variants.items():
            started = time.perf_counter()
            filled_shift(residual, evidence, scale=scale, times=given)
            best[name] = min(best[name], time.perf_counter() - started)
    print(f"{args.dates} dates × {side}² (a {args.size}² core's context), one band, one thread,")
    print(f"best of {args.runs} alternated:")
    for name in variants:
        print(f"  {name}: {best[name]:.3f} s a band, {best[name] * args.bands:.2f} s a core")
    added = best["interpolated, then the offset"] - best["offset alone"]
    print(f"  the interpolation adds {added:.3f} s a band, {added * args.bands:.2f} s a core")


if __name__ == "__main__":
    main()
