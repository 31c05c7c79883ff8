"""A mask setting chosen held out, in a third stage of the default's choice.

The held-out benchmark (``python -m cloudlab heldout --out DIR``) chooses each fold's candidate
(solve, mask rule, composition) in two stages; its ``heldout-capped.csv`` lists, for each site,
the candidate chosen on the other sites with its ground capped, and ``default.json`` the
pipeline's default (chosen on all of them). This script adds one stage, as the whiteness test
was added: each of those candidates is scored with each variant of one setting (:data:`SETTINGS`)
on every site, with the benchmark's own pairs, protocols and scores
(:func:`cloudlab.heldout.score_site`). Each fold takes the variant of least mean loss
(:func:`cloudlab.heldout.loss`) on the sites it was chosen on (the candidate as it was on a
tie) and is scored on the site left out; the pipeline's default takes the variant of least mean
loss on all sites.

The settings (docs/REAL-CLOUDS.md):

* ``shadow-edge``: a shadow extends into the pixels next to it darkened by at least 1.5σ or 2σ,
  up to ``edge_reach`` pixels (``mask.shadow_edge``), or not;
* ``shadow-near``: a pixel darker than its date around it by at least 1.5σ or 2σ within 8 or
  16 px of a cloud of the same date is shadow (``mask.shadow_near``, ``mask.near_reach``), or
  not (:func:`cloudlab.candidates.near_of`). Adopted: ``python -m cloudlab heldout`` now
  chooses it itself, as its fourth stage; this script reproduces the stage that adopted it on
  a run from before (its choices without the rule); on a run of today's its as-it-is row is
  the run's own choice, which has the rule.
* ``shadow-flat``: an entry called clear within 16 or 32 px of a cloud of its date, darkened
  below its pixel's median ground by at least 3σ on the bands' mean and each band to at most
  0.8 of it, is shadow (``mask.shadow_flat``, ``mask.flat_reach``), or not
  (:func:`cloudlab.candidates.flat_dark_of`). Adopted: ``python -m cloudlab heldout`` now
  chooses it itself, as its seventh stage; this script reproduces the stage that adopted it on
  a run from before (14:03 on 2026-11-29, whose choices had no such rule).
* ``bright-level``: each date's brightening level around an entry (the mean brightening of
  the entries within 16 or 32 px brightened by less than 3σ or 6σ) taken out of its
  brightening before the thresholds (``mask.bright_level``, ``mask.level_below``), or not.
* ``white-clouds``: a flat brightening (shortest band ≥ 0.7 of the largest) is cloud from 3σ
  (``mask.white_cloud``), with the candidate's whiteness test or a stricter one (0.25, 0.3), or
  neither (:func:`cloudlab.candidates.white_clouds_of`). Adopted: ``python -m cloudlab heldout``
  now chooses it itself, as its third stage; this script reproduces the run that adopted it
  (a20b8da's run, whose choices had no white clouds). On a run of today's, whose choices have
  them already, its variants are those of the chosen step (white clouds with each whiteness
  test), and the as-it-is row is that choice.

Printed: the held-out table with the folds' variants beside the same folds' choices without one
(which reproduces the run's ``heldout-capped.csv``: checked), and each fold's mean loss per
variant.

Usage::

    python -m cloudlab heldout --out runs/heldout                                # about 20 min
    python benchmarks/mask_stage.py shadow-edge --heldout runs/heldout           # seconds
    python benchmarks/mask_stage.py shadow-near --heldout runs/heldout
    python benchmarks/mask_stage.py shadow-flat --heldout runs/heldout
    python benchmarks/mask_stage.py white-clouds --heldout runs/heldout
    python benchmarks/mask_stage.py bright-level --heldout runs/heldout
    python benchmarks/mask_stage.py bright-level --heldout runs/heldout --level-below 3
"""

from __future__ import annotations

import argparse
import functools
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from cloudlab.candidates import (
    PostStep,
    flat_dark_of,
    near_of,
    solve_named,
    step_named,
    white_clouds_of,
)
from cloudlab.heldout import held_out, least_of, loss, pooled, read_picks, score_site
from cloudlab.scene_choice import candidate_label

#: The shadow edges offered, in σ (0: none, first: it is kept on a tie). They bracket what an
#: in-sample look at the five sites found (2026-11-28, docs/REAL-CLOUDS.md, "A shadow's edge").
EDGES = (0.0, 1.5, 2.0)


def edges_of(step: PostStep) -> list[PostStep]:
    """``step`` with each edge of :data:`EDGES` its rule admits (below its shadow threshold)."""
    return [step.with_rule(shadow_edge=e) for e in EDGES if e < step.rule.shadow]


#: A date's brightening level offered (``mask.bright_level`` px, ``mask.level_below`` σ), after
#: none (kept on a tie). They bracket what an in-sample look at the five sites found
#: (2026-11-29, docs/REAL-CLOUDS.md, "A date's brightening level").
LEVELS = ((16, 3.0), (32, 3.0), (16, 6.0), (32, 6.0))


def levels_of(step: PostStep, below: float | None = None) -> list[PostStep]:
    """``step`` as it is, then with each brightening level of :data:`LEVELS` (only those
    counted under ``below`` σ, when given)."""
    levels = [(r, b) for r, b in LEVELS if below is None or b == below]
    return [step] + [step.with_rule(bright_level=r, level_below=b) for r, b in levels]


#: The settings a stage can choose, by name: each gives a candidate's post-step its variants,
#: the candidate's own first.
SETTINGS = {
    "bright-level": levels_of,
    "shadow-edge": edges_of,
    "shadow-flat": flat_dark_of,
    "shadow-near": near_of,
    "white-clouds": white_clouds_of,
}

#: The columns printed, as the benchmark's report names them.
COLUMNS = {
    "pred_drop": "r dropped",
    "temporal-median_drop": "median",
    "fid": "fidelity r",
    "f1_cloud+haze": "F1 cloud+haze",
    "f1_shadow": "F1 shadow",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("setting", choices=sorted(SETTINGS), help="the setting chosen")
    parser.add_argument("--heldout", type=Path, required=True, help="a held-out run's folder")
    parser.add_argument("--out", type=Path, default=None, help="write the tables here (CSV)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--level-below",
        type=float,
        default=None,
        help="bright-level: offer only the levels counted under this many σ (a look after the "
        "stage's run, not a held-out choice: docs/REAL-CLOUDS.md)",
    )
    args = parser.parse_args()

    picks, default = read_picks(args.heldout)
    names = list(picks)
    chosen = [*picks.values(), default]
    solves = tuple(dict.fromkeys(solve_named(c.split(" | ")[0]) for c in chosen))
    variants_of = SETTINGS[args.setting]
    if args.level_below is not None:
        if args.setting != "bright-level":
            parser.error("--level-below goes with bright-level")
        variants_of = functools.partial(levels_of, below=args.level_below)
    variants = {c: variants_of(step_named(c.split(" | ")[1])) for c in chosen}
    steps = list(dict.fromkeys(v for vs in variants.values() for v in vs))

    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        count = len(names)
        results = list(
            pool.map(
                score_site,
                names,
                [4] * count,
                [0] * count,
                [solves] * count,
                ["median"] * count,
                [steps] * count,
            )
        )
    scores = pooled(pd.DataFrame([r for res in results for r in res[0]]))
    masks = pd.DataFrame([r for res in results for r in res[1]])

    def best(candidate: str, sites: list[str]) -> tuple[str, dict[str, float]]:
        """The variant of least mean loss on ``sites`` (the first on a tie), and each one's."""
        solve = candidate.split(" | ")[0]
        options = [candidate_label(solve, v) for v in variants[candidate]]
        return least_of(loss(scores, sites), options, lambda c: c.split(" | ")[1])

    folds = {}
    print("Each fold's mean loss on the sites it was chosen on, by mask rule:\n")
    for site, pick in picks.items():
        folds[site], by_variant = best(pick, [s for s in names if s != site])
        print(f"- {site}: " + ", ".join(f"{r}: {v:.4f}" for r, v in by_variant.items()))
    pipeline_default, by_variant = best(default, names)
    print("- all sites: " + ", ".join(f"{r}: {v:.4f}" for r, v in by_variant.items()))
    print(f"\nThe pipeline's default with the stage: {pipeline_default}\n")

    without = held_out(scores, masks, names, picks=picks)
    staged = held_out(scores, masks, names, picks=folds)
    reference = pd.read_csv(args.heldout / "heldout-capped.csv").set_index("site")
    for column in COLUMNS:  # the same folds as chosen are the run's own table
        np.testing.assert_allclose(
            without.set_index("site")[column], reference[column], rtol=1e-9, atol=1e-12
        )
    header = " | ".join(f"{label}, with (without)" for label in COLUMNS.values())
    print(f"| site (left out) | chosen on the other sites | {header} |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for (_, a), (_, b) in zip(staged.iterrows(), without.iterrows(), strict=True):
        cells = " | ".join(f"{a[c]:.3f} ({b[c]:.3f})" for c in COLUMNS)
        print(f"| {a.site} | {a.chosen} | {cells} |")
    means = " | ".join(f"{staged[c].mean():.3f} ({without[c].mean():.3f})" for c in COLUMNS)
    print(f"| mean | | {means} |")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        staged.to_csv(args.out / f"heldout-{args.setting}.csv", index=False)
        without.to_csv(args.out / "heldout-capped.csv", index=False)
        summary = {"pipeline_default": pipeline_default, "loss": by_variant}
        (args.out / f"default-{args.setting}.json").write_text(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
