"""What the mask's ground that stays (``mask.persist``) costs per core: the mask pass's
classification (:func:`cloudcore.masks.classify_scores`, with the default rule) of one tile's
core and its context, with the rule off and on, alternated, best of the runs, one thread.

The scores are synthetic (the bands' mean brightening and darkening in σ: noise, with cloud
blobs on every date and a bright field on three dates), the dates one day apart, so every date
has neighbours and the rule runs its every step: the worst case. A series of one day (GF-4
staring) has no neighbours and the rule does nothing. The pipeline's scores and the rest of
the mask pass (reading the layers, the kept observations, the offset) are not in it; their
cost is in docs/PERFORMANCE.md.

Usage::

    python benchmarks/mask_cost.py [--size 1056] [--dates 7] [--runs 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from cloudcore.masks import classify_scores, neighbour_scores, other_day_neighbours
from pipeline.config import MaskConfig


def scores(size: int, dates: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``bright``, ``dark`` ``(dates, size, size)`` float32 in σ: noise, 40 cloud blobs a date
    (8–60 px, 8–20σ) and a field 6σ bright on dates 2–4."""
    rng = np.random.default_rng(seed)
    bright = np.abs(rng.normal(0.0, 1.0, (dates, size, size))).astype(np.float32)
    dark = np.abs(rng.normal(0.0, 1.0, (dates, size, size))).astype(np.float32)
    for t in range(dates):
        for _ in range(40):
            r, c = rng.integers(0, size - 60, 2)
            h, w = rng.integers(8, 60, 2)
            bright[t, r : r + h, c : c + w] += rng.uniform(8.0, 20.0)
    bright[2:5, 100:200, 100:200] += 6.0
    return bright, dark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1056, help="core and context, px a side")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bright, dark = scores(args.size, args.dates)
    observed = np.ones(bright.shape, bool)
    white = np.ones(bright.shape, bool)
    flat = np.zeros(bright.shape, bool)
    shade = np.zeros(bright.shape, bool)  # no entry dark in every band (the rule still runs)
    default = MaskConfig().rule()
    rules = {
        "persist off": dataclasses.replace(default, persist=0.0),
        "persist 0.3": dataclasses.replace(default, persist=0.3),
    }
    days = other_day_neighbours(np.arange(args.dates, dtype=float))
    best = dict.fromkeys(rules, np.inf)
    counts = {}
    for _ in range(args.runs):
        for name, rule in rules.items():
            started = time.perf_counter()
            around = neighbour_scores(bright, observed, days) if rule.persist > 0 else None
            codes = classify_scores(bright, dark, observed, rule, white, flat, around, shade)
            best[name] = min(best[name], time.perf_counter() - started)
            counts[name] = int((codes == 2).sum())
    print(f"{args.dates} × {args.size}², one thread, best of {args.runs} alternated:")
    for name in rules:
        print(f"  {name}: {best[name]:.3f} s, {counts[name]} cloud entries")
    print(f"  ground that stays adds {best['persist 0.3'] - best['persist off']:.3f} s a core")


if __name__ == "__main__":
    main()
