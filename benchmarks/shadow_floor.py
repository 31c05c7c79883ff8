"""Shadows on the real-cloud sites: found with the ground floored, or taken into the ground?

Per site of the held-out benchmark (``cloudlab.sites``), the whole series (every date, nothing
pasted) is solved once with the default solve; its ground is then capped at each pixel's median
date (the default) and, in turn, also floored at each quantile of :data:`FLOORS`
(``solver.floor_ground``, :func:`cloudcore.cap_ground`'s ``floor``). With the default mask, against
the site's reference: the shadow F1, precision and recall, the cloud + haze F1, and the share of
the reference's clear entries that the mask calls anything but clear (what ``keep_clear`` then
fills instead of keeping). An in-sample look, the floor's reason for being a candidate: the
held-out benchmark (``python -m cloudlab heldout``) is what chooses.

Usage::

    python benchmarks/shadow_floor.py     # a few seconds
"""

from __future__ import annotations

import dataclasses

from cloudcore.masks import CLEAR, CLOUD, HAZE, SHADOW
from cloudlab.candidates import FLOOR_QUANTILES, PostStep, SolveSpec
from cloudlab.realscores import agreement
from cloudlab.sites import site_names
from cloudlab.sitescore import solve_specs, whole_series
from pipeline.config import MaskConfig, SolverConfig

#: The floors compared: none (today's cap alone) and the held-out benchmark's quantiles.
FLOORS: tuple[float | None, ...] = (None, 0.1, *FLOOR_QUANTILES)


def main() -> None:
    plain = dataclasses.replace(SolveSpec.of(SolverConfig()), cap=True, floor=None)
    specs = {q: dataclasses.replace(plain, floor=q) for q in FLOORS}
    step = PostStep.of(MaskConfig())
    print(f"solve {plain.name}, then floored; mask {step.name}\n")
    print(
        "| site | reference shadow entries | floor | F1 shadow | precision | recall "
        "| F1 cloud+haze | clear entries flagged |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in site_names():
        series = whole_series(name)
        reference = series.scored_reference  # snow is neither
        solved = solve_specs(series.D, series.observed, list(specs.values()), series.frame)
        for q, spec in specs.items():
            codes = series.codes(solved[spec.name], step.rule)
            shadow = agreement(reference, codes, (SHADOW,), (SHADOW,))
            cloud = agreement(reference, codes, (CLOUD,), (HAZE, CLOUD))
            clear = (reference == CLEAR) & series.observed
            flagged = float((codes[clear] != CLEAR).mean())
            print(
                f"| {name} | {int((reference == SHADOW).sum())} | {'-' if q is None else q} "
                f"| {shadow.f1:.3f} | {shadow.precision:.3f} | {shadow.recall:.3f} "
                f"| {cloud.f1:.3f} | {flagged:.4f} |"
            )


if __name__ == "__main__":
    main()
