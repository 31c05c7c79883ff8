"""Shadows on the real-cloud sites: found with the ground floored, or taken into the ground?

Per site of the held-out benchmark (``cloudlab.sites``), the whole series (every date, nothing
pasted) is solved once with the default solve; its ground is then capped at each pixel's median
date (the default) and, in turn, also floored at each quantile of :data:`FLOORS`
(``solver.floor_ground``, :func:`cloudcore.cap_ground`'s ``floor``). With the default mask, against
the site's reference: the shadow F1, precision and recall, the cloud + haze F1, and the share of
the reference's clear entries that the mask calls anything but clear (what ``keep_clear`` then
fills instead of keeping). An in-sample look, the floor's reason for being a candidate: the
held-out benchmark (``python -m cloudlab heldout``) is what chooses.

With ``--guards``, each floor is also scored with a date guard: on a date where more than that
share of the observed pixels not called cloud or haze is called shadow, the darkening is taken
for the date's own level and none of them is shadow (docs/REAL-CLOUDS.md, "A date-wide
darkening told by its share").

Usage::

    python benchmarks/shadow_floor.py     # a few seconds
    python benchmarks/shadow_floor.py --guards 0.5 0.3
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from cloudcore.masks import CLEAR, CLOUD, HAZE, SHADOW
from cloudlab.candidates import FLOOR_QUANTILES, PostStep, SolveSpec
from cloudlab.realscores import agreement
from cloudlab.sites import site_names
from cloudlab.sitescore import solve_specs, whole_series
from pipeline.config import MaskConfig, SolverConfig

#: The floors compared: none (today's cap alone) and the held-out benchmark's quantiles.
FLOORS: tuple[float | None, ...] = (None, 0.1, *FLOOR_QUANTILES)


def guarded(codes: np.ndarray, observed: np.ndarray, share: float) -> np.ndarray:
    """``codes`` (pixels × dates) without shadow on the dates where more than ``share`` of the
    observed pixels not called cloud or haze are called shadow."""
    out = codes.copy()
    for t in range(codes.shape[1]):
        date, rest = out[:, t], observed[:, t] & ~np.isin(codes[:, t], (CLOUD, HAZE))
        if rest.any() and float((date[rest] == SHADOW).mean()) > share:
            date[date == SHADOW] = CLEAR
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guards", type=float, nargs="*", default=[], help="date guard shares")
    args = parser.parse_args()
    plain = dataclasses.replace(SolveSpec.of(SolverConfig()), cap=True, floor=None)
    specs = {q: dataclasses.replace(plain, floor=q) for q in FLOORS}
    step = PostStep.of(MaskConfig())
    print(f"solve {plain.name}, then floored; mask {step.name}\n")
    print(
        "| site | reference shadow entries | floor | guard | F1 shadow | precision | recall "
        "| F1 cloud+haze | clear entries flagged | dates guarded |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in site_names():
        series = whole_series(name)
        reference = series.scored_reference  # snow is neither
        solved = solve_specs(series.D, series.observed, list(specs.values()), series.frame)
        for q, spec in specs.items():
            plain_codes = series.codes(solved[spec.name], step.rule)
            for share in (None, *args.guards):
                codes = plain_codes
                if share is not None:
                    codes = guarded(plain_codes, series.observed, share)
                dates = int((codes != plain_codes).any(axis=0).sum())
                shadow = agreement(reference, codes, (SHADOW,), (SHADOW,))
                cloud = agreement(reference, codes, (CLOUD,), (HAZE, CLOUD))
                clear = (reference == CLEAR) & series.observed
                flagged = float((codes[clear] != CLEAR).mean())
                print(
                    f"| {name} | {int((reference == SHADOW).sum())} | {'-' if q is None else q} "
                    f"| {'-' if share is None else share} "
                    f"| {shadow.f1:.3f} | {shadow.precision:.3f} | {shadow.recall:.3f} "
                    f"| {cloud.f1:.3f} | {flagged:.4f} | {dates}/{codes.shape[1]} |"
                )


if __name__ == "__main__":
    main()
