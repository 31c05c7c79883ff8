"""What the ground written under a pasted cloud or shadow is: the default's, and two signed solves'.

docs/REAL-CLOUDS.md ("The solve chosen with every year") found the default failing on years it
was not chosen on in two ways, and left one unexplained: on p035r032's 2009 its mask misses
little, yet with every pasted pixel filled its r is 0.325 where RPCA 1/√d's is 0.043. This
splits the fill by what was pasted. Per site-year, over its four reference pairs with the
source dropped (``cloudlab.sitescore.dropped_pairs``, the primary protocol), for each solve of
:data:`solve_folds.GROUND_FROM` (the default; the default's mask with the ground of
``aatm-shadow`` κ 1, ``solver.shadow_free_fill``; the default's mask with RPCA 1/√d's ground),
the pasted pixels are split by the source reference's class (cloud, shadow), and for each
class it gives:

- the ground written, alone (the solve's capped ground on the target, before the pixel's own
  departure and the date's offset): each band's bias Σ(ground − truth) / Σ truth;
- r of the default post-step's fill with every pasted pixel filled (the mask set to cloud
  there, the rest of the target's mask the solve's own): the fill alone, what a perfect mask
  would leave.

aATM's cloud layer is non-negative (a cloud only brightens), so a darkening on one date has no
sparse layer to go to; the two signed solves have one (``aatm-shadow``'s S, RPCA's signed
sparse part). A measurement, in sample for the post-step; nothing is chosen on it.

Usage::

    python benchmarks/shadow_ground.py      # the three site-years below, about 40 s
    python benchmarks/shadow_ground.py --years p035r032-landsat:2009
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import defaultdict

import numpy as np
from solve_folds import GROUND_FROM  # this folder's benchmark

from cloudcore.masks import CLOUD, SHADOW
from cloudlab.scene_choice import DEFAULT_STEP
from cloudlab.sites import load_site, year_of
from cloudlab.sitescore import compose_target, dropped_pairs, error_sums, written_ground

#: The site-years where docs/REAL-CLOUDS.md found the default failing, held out in time.
YEARS = (
    "p035r032-landsat:2009",
    "s2_nrt_romania_10m:2018",
    "landsat_p013r030_harvard_transect:2001",
)

#: The source reference's classes the pasted pixels are split by.
CLASSES = {"cloud": CLOUD, "shadow": SHADOW}


def site_year(spec: str) -> tuple[str, int]:
    """``NAME:YEAR`` → (name, year)."""
    name, _, year = spec.rpartition(":")
    return name, int(year)


def ground_by_class(name: str, year: int) -> list[str]:
    """The table's rows for one site-year (the module docstring)."""
    site = year_of(load_site(name, window=False), year)
    frame = site.series.frame
    specs = {label: spec for label, (_, spec, _) in GROUND_FROM.items()}
    step = DEFAULT_STEP  # every candidate's post-step
    ground_step = dataclasses.replace(step, offset=None, between=False)
    bands = len(site.series.bands)
    bias = defaultdict(lambda: np.zeros((2, bands)))  # (label, class) → Σ(g − truth), Σ truth
    fill = defaultdict(lambda: np.zeros(2))  # (label, class) → Σ(out − truth)², Σ truth²
    pixels: dict[str, int] = defaultdict(int)
    for pair, kept, solved in dropped_pairs(site, list(specs.values())):
        t = kept.target
        source_class = pair.reference[:, t]  # the pasted pixels carry the source's codes
        for label, spec in specs.items():
            result = solved[spec.name]
            codes = result.codes(step.rule, kept.observed[:, t].reshape(1, *frame), t)
            codes.reshape(-1)[pair.scored] = CLOUD  # every pasted pixel filled
            ground = written_ground(kept.D, kept.days, t, result, ground_step)
            written = written_ground(kept.D, kept.days, t, result, step)
            out = compose_target(kept.D[:, :, t], written, codes, step, frame)
            for cls, code in CLASSES.items():
                where = pair.scored & (source_class == code)
                if label == next(iter(specs)):
                    pixels[cls] += int(where.sum())
                finite = where & np.isfinite(ground).all(axis=0)
                bias[label, cls] += [
                    np.sum(ground[:, finite] - pair.truth[:, finite], axis=1),
                    np.sum(pair.truth[:, finite], axis=1),
                ]
                e = error_sums(out, pair.truth, where, where)
                fill[label, cls] += [e["pred_num"], e["pred_den"]]
    rows = []
    for label in specs:
        for cls in CLASSES:
            if not pixels[cls]:
                continue
            num, den = bias[label, cls]
            by_band = " ".join(f"{100 * b:+.0f}" for b in num / den)
            r = np.sqrt(fill[label, cls][0] / fill[label, cls][1])
            where = f"{cls} ({pixels[cls]})"
            rows.append(f"| {name} {year} | {label} | {where} | {by_band} | {r:.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--years", nargs="+", default=list(YEARS), help="NAME:YEAR site-years")
    args = parser.parse_args()
    print(
        "| site-year | solve | pasted (pixels) | ground written alone: bias by band (%) "
        "| r, fill alone |\n|---|---|---|---|---|"
    )
    for spec in args.years:
        name, year = site_year(spec)
        print("\n".join(ground_by_class(name, year)), flush=True)


if __name__ == "__main__":
    main()
