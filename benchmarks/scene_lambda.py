"""λ chosen from the scene itself: its own mask's clouds pasted on its own clear dates (#44,
item 3).

The default scales λ̂* by a constant (``solver.lam_scale``, 1.4) that every fold of the
held-out benchmark chose. A scene could instead choose its own λ the way the benchmark scores
one, without a reference mask: solve the whole series once with the default, take the
default's own mask, pick (clear target, cloudy source) pairs from that mask by the benchmark's
rules (:data:`cloudlab.sitescore.PAIRS`), paste the source's flagged pixels onto the target in
every band, drop the source, and solve again with each λ scale of ``--scales``. The scene's
choice is the scale of least loss on those pseudo-pairs (the benchmark's own loss,
:func:`cloudlab.heldout.loss`'s: r_pred / r_median + 10 · max(0, r_fid − 0.03), here with
"clear" meaning the scene's own mask's clear). No reference is read by the choice.

Per bundled site and scale, the script prints both sides: the scores against the reference
(the benchmark's pairs, source dropped, the default post-step) and the scores on the
pseudo-pairs; then per site the scale each side would choose, and the reference scores of the
scene's choice against those of the fixed default. The scene's choice reads nothing of the
site's reference and nothing of the other sites, so for λ its reference scores are held-out
figures (the only choices made across sites are the scales offered and the pairs' rules; the
mask and composition are the default's, on both sides).

Usage::

    python benchmarks/scene_lambda.py                       # about 45 s
    python benchmarks/scene_lambda.py --scales 0.7 1 1.4 2
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import pandas as pd

from cloudlab.heldout import loss, pooled
from cloudlab.scene_choice import (
    DEFAULT_SOLVE,
    DEFAULT_STEP,
    OWN,
    candidate_label,
    own_codes,
    own_pairs,
    scored_rows,
)
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import WholeSeries, site_arrays

SCALES = (0.5, 0.7, 1.0, 1.4, 2.0, 3.0)
#: The pairs of a site, as the held-out benchmark takes them.
PAIR_COUNT, PAIR_SEED = 4, 0


def score_site(name: str, scales: tuple[float, ...]) -> list[dict]:
    """The error sums (:func:`cloudlab.scene_choice.scored_rows`) of the default at each of
    ``scales``, against the reference (filed under ``name``) and on the scene's own
    pseudo-pairs (under ``name`` + :data:`OWN`), the latter from the default's own mask of the
    whole series (the reference's codes: clear, cloud, shadow, no data)."""
    site = load_site(name)
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    series = WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0))
    own = own_codes(D, series, frame)
    specs = {f"x{scale:g}": dataclasses.replace(DEFAULT_SOLVE, scale=scale) for scale in scales}
    pairs = {
        name: (reference, own_pairs(reference, PAIR_COUNT, PAIR_SEED)),
        name + OWN: (own, own_pairs(own, PAIR_COUNT, PAIR_SEED)),
    }
    return [
        row
        for key, (codes, chosen) in pairs.items()
        for row in scored_rows(D, codes, days, frame, chosen, specs, [DEFAULT_STEP], key)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=list(SCALES))
    parser.add_argument("--sites", nargs="+", default=None)
    args = parser.parse_args()
    scales = tuple(args.scales)
    fixed = DEFAULT_SOLVE.scale
    if fixed not in scales:
        parser.error(f"--scales must include the default's {fixed:g}")
    started = time.perf_counter()
    names = args.sites or site_names()
    rows = pd.DataFrame([row for name in names for row in score_site(name, scales)])
    scores = pooled(rows).set_index(["site", "solve"])
    losses = loss(pooled(rows), [*names, *(n + OWN for n in names)])

    def of(site: str, scale: float) -> tuple[float, float, float]:
        """r, fidelity and loss of the default at ``scale`` filed under ``site``."""
        row = scores.loc[(site, f"x{scale:g}")]
        return row.pred, row.fid, losses.loc[candidate_label(f"x{scale:g}", DEFAULT_STEP), site]

    print("| site | λ scale | r (reference) | fidelity | loss | r (own pairs) | fidelity | loss |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for scale in scales:
            ref, own = of(name, scale), of(name + OWN, scale)
            print(
                f"| {name} | {scale:g} | {ref[0]:.4f} | {ref[1]:.4f} | {ref[2]:.3f} | "
                f"{own[0]:.4f} | {own[1]:.4f} | {own[2]:.3f} |"
            )
    print(
        "\n| site | the reference's choice | the scene's choice | its r, fidelity | "
        f"the default's ({fixed:g}) r, fidelity |"
    )
    print("|---|---|---|---|---|")
    picks = []
    for name in names:
        best_ref = min(scales, key=lambda s: of(name, s)[2])
        best_own = min(scales, key=lambda s: of(name + OWN, s)[2])
        mine, default = of(name, best_own), of(name, fixed)
        picks.append([*mine[:2], *default[:2]])
        print(
            f"| {name} | {best_ref:g} | {best_own:g} | {mine[0]:.4f}, {mine[1]:.4f} | "
            f"{default[0]:.4f}, {default[1]:.4f} |"
        )
    mean = np.mean(picks, axis=0)
    print(
        f"| mean | | | {mean[0]:.4f}, {mean[1]:.4f} | {mean[2]:.4f}, {mean[3]:.4f} |\n"
        f"({time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
