"""The scene chooses its own solve from its own mask's clouds pasted on its own clear dates
(#44, item 3: :mod:`cloudlab.scene_choice`).

Per bundled site: the whole series solved with every candidate of
:data:`cloudlab.scene_choice.CANDIDATES` (the mask of each against the reference, every date),
then two sides of pairs, each source date dropped:

- the **reference's** pairs (the benchmark's: its reference mask's clouds pasted), which score
  every candidate as the held-out benchmark does;
- the scene's **own** pairs (the default's own mask's clouds pasted), from which the scene
  chooses (:func:`cloudlab.scene_choice.spread_choice`), reading no reference.

With ``--heldout DIR`` (a ``python -m cloudlab heldout`` run) each site takes the post-step its
fold chose on the other sites (``heldout-capped.csv``): its rule makes the scene's own mask and
the step scores both sides, so the table of the scene's choice is held out for the post-step
as well as the solve; without it every site takes the pipeline's default post-step, chosen on
all five (in sample for the post-step).

Usage::

    python benchmarks/scene_solve.py                                   # about 1 min
    python benchmarks/scene_solve.py --pairs 8                         # about 2 min
    python benchmarks/scene_solve.py --heldout runs/heldout --out runs/scene-solve
    python benchmarks/scene_solve.py --heldout runs/heldout --own-pairs 16 --seeds 0 1 2 3

With several ``--seeds`` the scene's own pairs are drawn again with each, and a last table gives
each draw's choices and their reference scores: whether the choice is the scene's or the draw's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cloudlab.candidates import PostStep, step_named
from cloudlab.heldout import FIDELITY_LIMIT, loss, mask_f1, pooled, read_picks
from cloudlab.scene_choice import (
    CANDIDATES,
    DEFAULT_KEY,
    DEFAULT_STEP,
    OWN,
    candidate_label,
    own_pairs,
    scored_rows,
    spread_choice,
)
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import WholeSeries, mask_rows, site_arrays, solve_series

#: The mask classes printed, as F1 against the reference on the whole series.
F1_COLUMNS = ("cloud+haze", "shadow", "cloud+haze_grown", "shadow_grown")


def fold_steps(heldout: Path | None, names: list[str]) -> dict[str, PostStep]:
    """Each site's post-step: its fold's choice in ``heldout``, else the pipeline's default."""
    if heldout is None:
        return {name: DEFAULT_STEP for name in names}
    picks, _ = read_picks(heldout)
    return {name: step_named(picks[name].split(" | ", 1)[1]) for name in names}


def own_side(name: str, seed: int) -> str:
    """What the scene's own pairs drawn with ``seed`` are filed under."""
    return f"{name}{OWN} seed {seed}"


def score_site(
    name: str, step: PostStep, count: int, own_count: int, seeds: list[int]
) -> tuple[list[dict], list[dict]]:
    """The pair rows of both sides (:func:`cloudlab.scene_choice.scored_rows`): the reference's
    ``count`` pairs (seed 0), and the scene's own ``own_count`` pairs drawn with each of
    ``seeds`` (filed under :func:`own_side`); and the mask rows of every candidate."""
    site = load_site(name)
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    series = WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0))
    whole = {key: solve_series(D, series.observed, spec, frame) for key, spec in CANDIDATES.items()}
    masks = [{"site": name, **row} for row in mask_rows(site, whole, [step])]
    own = series.codes(whole[DEFAULT_KEY], step.rule)  # the default's own mask, the step's rule
    rows = scored_rows(
        D, reference, days, frame, own_pairs(reference, count), CANDIDATES, [step], name
    )
    for seed in seeds:
        pairs = own_pairs(own, own_count, seed)
        rows += scored_rows(D, own, days, frame, pairs, CANDIDATES, [step], own_side(name, seed))
    return rows, masks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4, help="pairs a side (4: the benchmark's)")
    parser.add_argument(
        "--own-pairs", type=int, default=None, help="the scene's own pairs (default: --pairs)"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="draws of the scene's own pairs"
    )
    parser.add_argument("--heldout", type=Path, default=None, help="a held-out run's folder")
    parser.add_argument("--sites", nargs="+", default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the rows here (CSV)")
    args = parser.parse_args()
    started = time.perf_counter()
    names = args.sites or site_names()
    steps = fold_steps(args.heldout, names)
    own_count = args.pairs if args.own_pairs is None else args.own_pairs
    rows, masks = [], []
    for name in names:
        pair_rows, mask_counts = score_site(name, steps[name], args.pairs, own_count, args.seeds)
        rows += pair_rows
        masks += mask_counts
    table, counts = pd.DataFrame(rows), pd.DataFrame(masks)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out / "rows.csv", index=False)
        counts.to_csv(args.out / "masks.csv", index=False)
    scores = pooled(table).set_index(["site", "solve"])
    f1 = mask_f1(counts).set_index(["site", "solve"])
    losses = loss(pooled(table), names)

    print(
        "| site | candidate | r (reference) | fidelity | loss | loss (own pairs) | "
        "difference to the default ± spread |"
    )
    print("|---|---|---|---|---|---|---|")
    picks = {}
    for name in names:
        picks[name], own = spread_choice(table, own_side(name, args.seeds[0]), steps[name])
        for key in CANDIDATES:
            ref = scores.loc[(name, key)]
            diff = own.loc[key] if key in own.index else None
            own_text = (
                "– | –"
                if diff is None
                else (f"{diff.loss:.3f} | {diff.difference:+.3f} ± {diff.spread:.3f}")
            )
            print(
                f"| {name} | {key} | {ref.pred:.4f} | {ref.fid:.4f} | "
                f"{losses.loc[candidate_label(key, steps[name]), name]:.3f} | {own_text} |"
            )

    head = ["r dropped", "ratio to the median", "fidelity", *(f"F1 {c}" for c in F1_COLUMNS)]
    print("\n| site | post-step | solve | " + " | ".join(head) + " |")
    print("|---|---|---|" + "---|" * len(head))
    means: dict[str, list[float]] = {"scene": [], "default": []}
    for name in names:
        median = scores.loc[(name, "temporal-median")].pred
        for side, key in (("scene", picks[name]), ("default", DEFAULT_KEY)):
            ref = scores.loc[(name, key)]
            masked = f1.loc[(name, key)]
            values = [
                ref.pred,
                ref.pred / median,
                ref.fid,
                *(float(masked[f"f1_{c}"]) for c in F1_COLUMNS),
            ]
            means[side].append(ref.pred)
            step = steps[name].name if side == "scene" else ""
            print(
                f"| {name} | {step} | {side}: {key} | "
                + " | ".join(f"{v:.4f}" if i == 2 else f"{v:.3f}" for i, v in enumerate(values))
                + " |"
            )
    if len(args.seeds) > 1:
        print("\nThe scene's choice by the draw of its own pairs (seed), against the reference:")
        print("\n| seed | " + " | ".join(names) + " | mean r | sites over fidelity 0.03 |")
        print("|---|" + "---|" * (len(names) + 2))
        for seed in args.seeds:
            cells, rs, over = [], [], 0
            for name in names:
                key, _ = spread_choice(table, own_side(name, seed), steps[name])
                ref = scores.loc[(name, key)]
                rs.append(ref.pred)
                over += int(ref.fid > FIDELITY_LIMIT)
                cells.append(f"{key}: {ref.pred:.3f}, {ref.fid:.3f}")
            print(f"| {seed} | " + " | ".join(cells) + f" | {np.mean(rs):.4f} | {over} |")
    print(
        f"\nMean r dropped: the scene's choice {np.mean(means['scene']):.4f}, "
        f"the default {np.mean(means['default']):.4f} ({time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
