"""The scene's own choice of solve on smaller scenes: each site cut into windows (#44).

The rule of ``benchmarks/scene_solve.py`` was read off whole sites, so those sites cannot score
it. This script stresses it on scenes it was not read off, though not on new data: each site
is cut into windows (quarters of the square sites, the odd row and column of a 61 × 61 site
left out; thirds of the one-row transect; the 10 × 10 France cube is too small to cut), and
each window is a scene of its own: its own reference pairs (the benchmark's rules, four
pairs), its own mask and own pairs. Per window it prints
the reference scores (r dropped, its ratio to the temporal median, fidelity) of:

- **unanimity**: :func:`cloudlab.scene_choice.unanimous_choice` over four draws of sixteen own
  pairs (the rule the whole-site tables suggested);
- **one draw**: :func:`cloudlab.scene_choice.spread_choice` on four own pairs, seed 0;
- the default, and RPCA 1/√d capped.

Every window takes the pipeline's default post-step (chosen on all five whole sites: in sample
for the post-step). A window with no reference pair is skipped.

Usage::

    python benchmarks/scene_windows.py            # about 10 min on two cores
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np

from cloudlab.heldout import pooled
from cloudlab.scene_choice import (
    DEFAULT_KEY,
    DEFAULT_STEP,
    OWN,
    own_codes,
    scene_rows,
    spread_choice,
    unanimous_choice,
)
from cloudlab.sites import load_site
from cloudlab.sitescore import WholeSeries, site_arrays

#: The sites cut: every bundled site large enough to cut.
SITES = (
    "cbers_awfi_022024",
    "landsat_p013r030_harvard_transect",
    "p035r032-landsat",
    "s2_nrt_romania_10m",
)
DRAWS, DRAW_PAIRS, ONE_DRAW_PAIRS = 4, 16, 4


def windows(name: str) -> Iterator[tuple[str, tuple[int, int], np.ndarray, np.ndarray, np.ndarray]]:
    """The windows of a site: label, frame, ``D`` (bands, pixels, dates), reference codes
    (pixels, dates) and day numbers: quarters of a site of several rows, thirds of one row."""
    site = load_site(name)
    rows, cols = site.series.frame
    D, reference, days = site_arrays(site)
    if rows == 1:
        third = cols // 3
        cuts = [(0, 1, c, c + third) for c in (0, third, 2 * third)]
    else:
        half_r, half_c = rows // 2, cols // 2
        cuts = [(r, r + half_r, c, c + half_c) for r in (0, half_r) for c in (0, half_c)]
    index = np.arange(rows * cols).reshape(rows, cols)
    for r0, r1, c0, c1 in cuts:
        pixels = index[r0:r1, c0:c1].ravel()
        label = f"{name}[{r0}:{r1}, {c0}:{c1}]"
        yield label, (r1 - r0, c1 - c0), D[:, pixels], reference[pixels], days


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", nargs="+", default=list(SITES))
    args = parser.parse_args()
    started = time.perf_counter()
    print("| window | unanimity | one draw | default | RPCA 1/√d |")
    print("|---|---|---|---|---|")
    sums: dict[str, list[float]] = {"unanimity": [], "one draw": [], "default": []}
    for name in args.sites:
        for label, frame, D, reference, days in windows(name):
            series = WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0))
            own = own_codes(D, series, frame)
            table = scene_rows(
                label, frame, D, reference, days, own, DRAWS, DRAW_PAIRS, ONE_DRAW_PAIRS
            )
            if table[table.site == label].empty:
                print(f"| {label} | no reference pair | | | |")
                continue
            scores = pooled(table).set_index(["site", "solve"])
            median = scores.loc[(label, "temporal-median")].pred
            draws = [f"{label}{OWN}{draw}" for draw in range(DRAWS)]
            picks = {
                "unanimity": unanimous_choice(table, draws, DEFAULT_STEP),
                "one draw": spread_choice(table, f"{label}{OWN}one", DEFAULT_STEP)[0],
                "default": DEFAULT_KEY,
                "RPCA 1/√d": "rpca x1",
            }
            cells = []
            for side, key in picks.items():
                score = scores.loc[(label, key)]
                sums.setdefault(side, []).append(score.pred)
                cells.append(
                    f"{key}: {score.pred:.3f} ({score.pred / median:.2f}), {score.fid:.3f}"
                )
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    means = ", ".join(f"{side} {np.mean(values):.4f}" for side, values in sums.items())
    print(f"\nMean r dropped over the windows: {means} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
