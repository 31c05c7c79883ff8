"""Overcast dates on the real-cloud sites: are their clouds found, or written as the ground?

Per site of the held-out benchmark (``cloudlab.sites``), the whole series (every date, nothing
pasted) is solved with the default solve and post-step, with and without the ground's cap
(``solver.cap_ground``, :func:`cloudcore.cap_ground`). Against the site's reference mask, over
the reference's cloud pixels on its overcast dates (≥ 90 % of the date's observed pixels cloud)
and on its other dates: the share the mask calls cloud or haze (recall), and the share the
output keeps as observed (the cloud written into the "cloud-free" image); and the mask's cloud +
haze F1 over every date. Snow (Fmask's class) counts as neither cloud nor clear.

Usage::

    python benchmarks/overcast_dates.py     # about 15 s
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cloudcore.kept import kept_codes
from cloudcore.masks import CLOUD, HAZE
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.realscores import agreement
from cloudlab.sites import site_names
from cloudlab.sitescore import solve_specs, whole_series
from pipeline.config import MaskConfig, SolverConfig

#: A date is overcast where the reference calls at least this share of its observed pixels cloud.
OVERCAST = 0.9


def main() -> None:
    default = SolveSpec.of(SolverConfig())
    specs = {
        "no cap": dataclasses.replace(default, cap=False, floor=None),
        "cap": dataclasses.replace(default, cap=True),
    }
    step = PostStep.of(MaskConfig())
    print(f"solve {default.name} without and with the cap; mask {step.name}\n")
    print(
        "| site | overcast dates | cap | recall, overcast | kept as observed, overcast "
        "| recall, other dates | kept as observed, other dates | F1 cloud+haze |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in site_names():
        series = whole_series(name)
        observed = series.observed
        cloud = (series.reference == CLOUD) & observed
        share = cloud.sum(axis=0) / np.maximum(observed.sum(axis=0), 1)
        overcast = share >= OVERCAST
        solved = solve_specs(series.D, observed, list(specs.values()), series.frame)
        for label, spec in specs.items():
            codes = series.codes(solved[spec.name], step.rule)
            flagged = np.isin(codes, (CLOUD, HAZE))
            keep_haze = step.haze_fill == "observed"
            kept = kept_codes(codes, keep_haze) if step.keep_clear else np.zeros_like(flagged)
            f1 = agreement(series.scored_reference, codes, (CLOUD,), (HAZE, CLOUD)).f1
            cells = []
            for dates in (overcast, ~overcast):
                ref = cloud[:, dates]
                if not ref.any():
                    cells += ["-", "-"]
                    continue
                cells.append(f"{flagged[:, dates][ref].mean():.3f}")
                cells.append(f"{kept[:, dates][ref].mean():.3f}")
            print(
                f"| {name} | {int(overcast.sum())} of {observed.shape[1]} | {label} | "
                + " | ".join(cells)
                + f" | {f1:.3f} |"
            )


if __name__ == "__main__":
    main()
