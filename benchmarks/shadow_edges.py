"""A shadow's edge (``mask.shadow_edge``), chosen held out: a third stage of the default's choice.

The held-out benchmark (``python -m cloudlab heldout --out DIR``) chooses each fold's candidate
(solve, mask rule, composition) in two stages; its ``heldout-capped.csv`` lists, for each site,
the candidate chosen on the other sites with its ground capped, and ``default.json`` the
pipeline's default (chosen on all of them). This script adds one stage, as the whiteness test
was added: each of those candidates is scored with every shadow edge of :data:`EDGES` (0: none;
a shadow then extends into the pixels next to it darkened by at least that many σ, up to
``edge_reach`` pixels, :func:`cloudcore.masks.classify_scores`), on every site, with the
benchmark's own pairs, protocols and scores (:func:`cloudlab.heldout.score_site`). Each fold
takes the edge of least mean loss (:func:`cloudlab.heldout.loss`) on the sites it was chosen
on (none on a tie) and is scored on the site left out; the pipeline's default takes the edge
of least mean loss on all sites.

Printed: the held-out table with the folds' edges beside the same folds' choices without one
(which reproduces the run's ``heldout-capped.csv``: checked), and each fold's mean loss per edge.

Usage::

    python -m cloudlab heldout --out runs/heldout                 # once (about 20 min)
    python benchmarks/shadow_edges.py --heldout runs/heldout      # about 2 min
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from cloudlab.candidates import FLOORED_SOLVES, SHADOW_SOLVES, SOLVES, PostStep, post_steps
from cloudlab.heldout import held_out, loss, pooled, score_site

#: The shadow edges offered, in σ (0: none, first: it is kept on a tie). They bracket what an
#: in-sample look at the five sites found (2026-11-28, docs/REAL-CLOUDS.md, "A shadow's edge").
EDGES = (0.0, 1.5, 2.0)

#: The columns printed, as the benchmark's report names them.
COLUMNS = {
    "pred_drop": "r dropped",
    "temporal-median_drop": "median",
    "fid": "fidelity r",
    "f1_cloud+haze": "F1 cloud+haze",
    "f1_shadow": "F1 shadow",
}


def with_edge(step: PostStep, edge: float) -> PostStep:
    """``step`` with its mask rule's shadow edge set to ``edge`` (0: none)."""
    return dataclasses.replace(step, rule=dataclasses.replace(step.rule, shadow_edge=edge))


def edges_of(step: PostStep) -> list[PostStep]:
    """``step`` with each edge of :data:`EDGES` its rule admits (below its shadow threshold)."""
    return [with_edge(step, e) for e in EDGES if e < step.rule.shadow]


def _read_picks(heldout: Path) -> tuple[dict[str, str], str]:
    """Each site's capped fold choice and the pipeline's default, from a held-out run."""
    table = heldout / "heldout-capped.csv"
    if not table.is_file():
        raise SystemExit(
            f"{table}: not found; run `python -m cloudlab heldout --out {heldout}` first"
        )
    capped = pd.read_csv(table)
    default = json.loads((heldout / "default.json").read_text())["pipeline_default"]
    return dict(zip(capped.site, capped.chosen, strict=True)), str(default)


def _label(solve: str, step: PostStep) -> str:
    return f"{solve} | {step.name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heldout", type=Path, required=True, help="a held-out run's folder")
    parser.add_argument("--out", type=Path, default=None, help="write the tables here (CSV)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    picks, default = _read_picks(args.heldout)
    names = list(picks)
    every_solve = {s.name: s for s in SOLVES + SHADOW_SOLVES + FLOORED_SOLVES}
    every_step = {s.name: s for s in post_steps()}
    chosen = [*picks.values(), default]
    solves = tuple(dict.fromkeys(every_solve[c.split(" | ")[0]] for c in chosen))
    variants = {c: edges_of(every_step[c.split(" | ")[1]]) for c in chosen}
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

    def best_edge(candidate: str, sites: list[str]) -> tuple[str, dict[str, float]]:
        solve = candidate.split(" | ")[0]
        options = [_label(solve, v) for v in variants[candidate]]
        means = loss(scores, sites).loc[options].mean(axis=1)
        by_edge = {
            f"{e.rule.shadow_edge:g}": float(means[o])
            for e, o in zip(variants[candidate], options, strict=True)
        }
        return options[int(np.argmin(means.to_numpy()))], by_edge  # the first on a tie

    folds = {}
    print("Each fold's mean loss on the sites it was chosen on, by shadow edge (σ):\n")
    for site, pick in picks.items():
        folds[site], by_edge = best_edge(pick, [s for s in names if s != site])
        print(f"- {site}: " + ", ".join(f"{e}: {v:.4f}" for e, v in by_edge.items()))
    pipeline_default, by_edge = best_edge(default, names)
    print(f"- all sites ({default}): " + ", ".join(f"{e}: {v:.4f}" for e, v in by_edge.items()))
    print(f"\nThe pipeline's default with its edge: {pipeline_default}\n")

    without = held_out(scores, masks, names, picks=picks)
    with_edges = held_out(scores, masks, names, picks=folds)
    reference = pd.read_csv(args.heldout / "heldout-capped.csv").set_index("site")
    for column in COLUMNS:  # the same folds without an edge are the run's own table
        np.testing.assert_allclose(
            without.set_index("site")[column], reference[column], rtol=1e-9, atol=1e-12
        )
    header = " | ".join(f"{label}, with (without)" for label in COLUMNS.values())
    print(f"| site (left out) | chosen on the other sites | {header} |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for (_, a), (_, b) in zip(with_edges.iterrows(), without.iterrows(), strict=True):
        cells = " | ".join(f"{a[c]:.3f} ({b[c]:.3f})" for c in COLUMNS)
        print(f"| {a.site} | {a.chosen} | {cells} |")
    means = " | ".join(f"{with_edges[c].mean():.3f} ({without[c].mean():.3f})" for c in COLUMNS)
    print(f"| mean | | {means} |")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with_edges.to_csv(args.out / "heldout-edges.csv", index=False)
        without.to_csv(args.out / "heldout-capped.csv", index=False)
        (args.out / "default.json").write_text(
            json.dumps({"pipeline_default": pipeline_default, "loss_by_edge": by_edge}) + "\n"
        )


if __name__ == "__main__":
    main()
