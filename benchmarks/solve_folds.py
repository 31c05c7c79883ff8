"""The solve chosen with every year of every site, each fold leaving out one site (#44).

The units are every site-year with a reference pair: each site's chosen year
(:data:`cloudlab.sites.WINDOWS`; CBERS's one series) and its other years
(:func:`cloudlab.sites.other_years`). Each of :data:`cloudlab.scene_choice.CANDIDATES` is
scored on each unit's four reference pairs, the source dropped, with the pipeline's default
post-step; a site's loss (:func:`cloudlab.heldout.loss`) is the mean over its years. Each fold
leaves out one site with all its years and keeps the default unless another candidate's mean
loss over the other sites is lower by more than the spread (the standard error over those
sites of the per-site loss difference), then takes the least; the left-out site is scored with
the fold's choice. It prints every candidate's per-site means, each fold's choice, the
held-out table and the conditions written before the run (docs/REAL-CLOUDS.md, "The solve
chosen with every year, folds by site").

With ``--floors`` the candidates are the default and the default with its ground floored
(:data:`FLOORED`) instead; with ``--shadow-fill`` the default and the default with the ground
written under a flagged shadow floored (:data:`SHADOW_FILL`); with ``--shadow-model`` the
default and ``aatm-shadow`` capped (:data:`SHADOW_MODEL`); with ``--ground-from`` the default
and the default's mask with another solve's ground (:data:`GROUND_FROM`); with
``--shadow-out-of-mask`` the same from one solve (:data:`SHADOW_OUT_OF_MASK`); with ``--stages``
the default and the default less one stage of its post-step (:data:`STAGES`); with
``--thresholds`` the default with a mask threshold moved or its ground not capped
(:data:`THRESHOLDS`); with ``--every-band`` the default with the test that every band
brightened (:data:`EVERY_BAND`); with ``--mean-ground`` the default's mask with the mean of
its ground and another solve's (:data:`MEAN_GROUND`); with ``--envelope`` the default with
every value it writes held within the pixel's kept observations (:data:`ENVELOPE`).
``--short-years`` and
``--short-years-ground`` score the default and one candidate (:data:`SHADOW_2`,
:data:`SHORT_GROUND`) on the transect's years of 7 to 11 dates (:data:`SHORT_YEARS`), never
scored before, as a confirmation, without folds.

Each run also prints the same report on the other years alone, post hoc: the chosen years
are in sample for the default (its solve and post-step were chosen on them), which favours it
in every fold that reads them. ``--from-units`` reports a run's saved unit scores again.

Usage::

    python benchmarks/solve_folds.py --out runs/solve-folds     # about 3 min on two cores
    python benchmarks/solve_folds.py --from-units runs/solve-folds/units.csv   # seconds
    python benchmarks/solve_folds.py --floors --out runs/solve-folds-floors
    python benchmarks/solve_folds.py --shadow-fill --out runs/solve-folds-shadow-fill
    python benchmarks/solve_folds.py --shadow-model --out runs/solve-folds-shadow-model
    python benchmarks/solve_folds.py --stages --out runs/solve-folds-stages
    python benchmarks/solve_folds.py --ground-from --out runs/solve-folds-ground-from
    python benchmarks/solve_folds.py --shadow-out-of-mask --out runs/solve-folds-one-solve
    python benchmarks/solve_folds.py --short-years-ground --out runs/short-years-ground
    python benchmarks/solve_folds.py --thresholds --out runs/solve-folds-thresholds
    python benchmarks/solve_folds.py --every-band --out runs/solve-folds-every-band
    python benchmarks/solve_folds.py --mean-ground --out runs/solve-folds-mean-ground
    python benchmarks/solve_folds.py --mean-ground --seed 1 --out runs/solve-folds-mean-ground-1
    python benchmarks/solve_folds.py --envelope --out runs/solve-folds-envelope
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from cloudlab.candidates import NO_SHADOW, PostStep, SolveSpec
from cloudlab.heldout import FIDELITY_LIMIT, loss, pooled
from cloudlab.scene_choice import (
    CANDIDATES,
    DEFAULT_KEY,
    DEFAULT_SOLVE,
    DEFAULT_STEP,
    candidate_label,
    fold_choice,
    own_pairs,
    scored_rows,
)
from cloudlab.sites import Site, load_site, other_years, site_names, window_of, year_of
from cloudlab.sitescore import site_arrays

#: How far a site's held-out mean fidelity may rise over the default's (the conditions).
FIDELITY_RISE = 0.01
#: The short years (``--short-years``): 7 to 11 dates, under #44's minimum of 12, never scored.
SHORT_YEARS = (7, 11)
#: A candidate: the key its solve is scored under, the solve and the post-step.
Candidate = tuple[str, SolveSpec, PostStep]
#: The pipeline's default, the first candidate of every mode.
DEFAULT: Candidate = (DEFAULT_KEY, DEFAULT_SOLVE, DEFAULT_STEP)
#: The default and the default with shadow 2σ, for the short years' confirmation.
SHADOW_2: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    "shadow 2": (DEFAULT_KEY, DEFAULT_SOLVE, DEFAULT_STEP.with_rule(shadow=2.0)),
}


def with_default_step(specs: Mapping[str, SolveSpec]) -> dict[str, Candidate]:
    """Each solve of ``specs`` scored under its own key with the default post-step."""
    return {key: (key, spec, DEFAULT_STEP) for key, spec in specs.items()}


def _shadow_model(scale: float = 1.0, shadow_out_of_mask: bool = False) -> SolveSpec:
    """``aatm-shadow`` κ 1 at ``scale`` × λ̂*, capped as the default, its mask off L − S with
    ``shadow_out_of_mask``."""
    return SolveSpec(
        "aatm-shadow",
        "star",
        scale=scale,
        shadow_weight=1.0,
        cap=True,
        shadow_out_of_mask=shadow_out_of_mask,
    )


#: The six solves, each with the default post-step.
SOLVES: dict[str, Candidate] = with_default_step(CANDIDATES)
#: The default and the default with its ground floored at a quantile of its dates
#: (``solver.floor_ground``), with and without each date's own level taken out of the darkening.
FLOORED: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **with_default_step(
        {
            f"floor {q:g}{' level' if level else ''}": dataclasses.replace(
                DEFAULT_SOLVE, floor=q, level=level
            )
            for q in (0.25, 0.5)
            for level in (False, True)
        }
    ),
}
#: The default and ``aatm-shadow`` with κ 1 at λ̂* ×1 and ×1.4, capped as the default.
SHADOW_MODEL: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **with_default_step(
        {f"aatm-shadow k1 x{scale:g}": _shadow_model(scale) for scale in (1.0, 1.4)}
    ),
}
#: The key of the default's mask with the shadow model's ground (two solves).
TWO_SOLVES = f"{DEFAULT_KEY}, ground of aatm-shadow k1"
#: The default's mask with another solve's ground written where it fills
#: (:attr:`cloudlab.candidates.SolveSpec.ground_from`): ``aatm-shadow`` κ 1 and RPCA 1/√d, each
#: capped as the default, whose signed layers keep a shadow out of the ground.
GROUND_FROM: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **with_default_step(
        {
            TWO_SOLVES: dataclasses.replace(DEFAULT_SOLVE, ground_from=_shadow_model()),
            f"{DEFAULT_KEY}, ground of rpca x1": dataclasses.replace(
                DEFAULT_SOLVE, ground_from=CANDIDATES["rpca x1"]
            ),
        }
    ),
}
#: The default, the default's mask with the shadow layer's ground (:data:`GROUND_FROM`, two
#: solves), and one ``aatm-shadow`` κ 1 solve (λ̂* ×1, and ×1.4 as the default's mask is
#: solved: docs/REAL-CLOUDS.md, "The one solve at the default's λ scale") whose mask reads
#: L − S and whose ground written is L (:attr:`cloudlab.candidates.SolveSpec.shadow_out_of_mask`).
SHADOW_OUT_OF_MASK: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    TWO_SOLVES: GROUND_FROM[TWO_SOLVES],
    **with_default_step(
        {
            f"aatm-shadow k1{'' if scale == 1.0 else f' x{scale:g}'}, its mask off L - S": (
                _shadow_model(scale, shadow_out_of_mask=True)
            )
            for scale in (1.0, DEFAULT_SOLVE.scale)
        }
    ),
}
#: The default and the default's mask with the shadow model's ground, for the short years'
#: confirmation (``--short-years-ground``).
SHORT_GROUND: dict[str, Candidate] = {DEFAULT_KEY: DEFAULT, TWO_SOLVES: GROUND_FROM[TWO_SOLVES]}
#: The default and the default with one stage of its post-step taken out.
STAGES: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **{
        f"without {name}": (DEFAULT_KEY, DEFAULT_SOLVE, step)
        for name, step in (
            ("the whiteness test", DEFAULT_STEP.with_rule(white=0.0)),
            ("white clouds", DEFAULT_STEP.with_rule(white_cloud=0.0)),
            ("the shadow beside its cloud", DEFAULT_STEP.with_rule(shadow_near=0.0)),
            ("the shadow dark in every band", DEFAULT_STEP.with_rule(shadow_flat=0.0)),
            ("the interpolation", dataclasses.replace(DEFAULT_STEP, between=False)),
            ("the offset", dataclasses.replace(DEFAULT_STEP, offset=None)),
        )
    },
}
#: The default and the default with one of its mask's thresholds moved (the grid's values) or
#: its ground not capped (the interpolation then off, as the README asks for an uncapped ground).
THRESHOLDS: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **{
        name: (DEFAULT_KEY, DEFAULT_SOLVE, DEFAULT_STEP.with_rule(**change))
        for name, change in (
            ("cloud 4", {"cloud": 4.0, "haze": 4.0}),
            ("cloud 3", {"cloud": 3.0, "haze": 3.0}),
            ("shadow 2", {"shadow": 2.0}),
            ("no shadow threshold", {"shadow": NO_SHADOW}),
            ("grow 1", {"grow": 1}),
        )
    },
    "not capped": (
        "aatm x1.4 uncapped",
        dataclasses.replace(DEFAULT_SOLVE, cap=False),
        dataclasses.replace(DEFAULT_STEP, between=False),
    ),
}
#: The default and the default with the ground written under a flagged shadow floored at the
#: pixel's lower quartile (:attr:`cloudlab.candidates.PostStep.shadow_floor`).
SHADOW_FILL: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    "shadow fill 0.25": (
        DEFAULT_KEY,
        DEFAULT_SOLVE,
        dataclasses.replace(DEFAULT_STEP, shadow_floor=0.25),
    ),
}

#: The default's mask with the mean of its ground and another solve's (:data:`GROUND_FROM`'s
#: two: ``aatm-shadow`` κ 1 and RPCA 1/√d, capped), written where it fills.
MEAN_GROUND: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **with_default_step(
        {
            f"{DEFAULT_KEY}, mean ground with {name}": dataclasses.replace(
                DEFAULT_SOLVE, ground_from=other, ground_weight=0.5
            )
            for name, other in (
                ("aatm-shadow k1", _shadow_model()),
                ("rpca x1", CANDIDATES["rpca x1"]),
            )
        }
    ),
}
#: The default and the default with the test that every band brightened
#: (``MaskRule.every_band``) at three shares of the most any band did.
EVERY_BAND: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **{
        f"every band {share:g}": (
            DEFAULT_KEY,
            DEFAULT_SOLVE,
            DEFAULT_STEP.with_rule(every_band=share),
        )
        for share in (0.1, 0.2, 0.3)
    },
}

#: The default with every value it writes held within the pixel's kept observations
#: (:attr:`cloudlab.candidates.PostStep.envelope`): their range, and their 10th to 90th
#: percentiles.
ENVELOPE: dict[str, Candidate] = {
    DEFAULT_KEY: DEFAULT,
    **{
        "envelope {:g}-{:g}".format(*edges): (
            DEFAULT_KEY,
            DEFAULT_SOLVE,
            dataclasses.replace(DEFAULT_STEP, envelope=edges),
        )
        for edges in ((0.0, 1.0), (0.1, 0.9))
    },
}


#: The modes (each a flag): the candidates instead of :data:`SOLVES`, and what they are.
MODES: dict[str, tuple[dict[str, Candidate], str]] = {
    "floors": (FLOORED, "the default floored (FLOORED)"),
    "shadow-fill": (SHADOW_FILL, "a flagged shadow's ground floored (SHADOW_FILL)"),
    "shadow-model": (SHADOW_MODEL, "aatm-shadow, capped (SHADOW_MODEL)"),
    "ground-from": (GROUND_FROM, "another solve's ground (GROUND_FROM)"),
    "shadow-out-of-mask": (
        SHADOW_OUT_OF_MASK,
        "one shadow-model solve, its mask off L − S (SHADOW_OUT_OF_MASK)",
    ),
    "stages": (STAGES, "the default less one post-step stage (STAGES)"),
    "thresholds": (THRESHOLDS, "the mask's thresholds, the cap (THRESHOLDS)"),
    "every-band": (EVERY_BAND, "every band brightened, at three shares (EVERY_BAND)"),
    "mean-ground": (MEAN_GROUND, "the default's mask, the mean of two grounds (MEAN_GROUND)"),
    "envelope": (ENVELOPE, "the default, its writes within the kept observations (ENVELOPE)"),
    "short-years": (SHADOW_2, "shadow 2σ on the years of 7-11 dates (SHADOW_2): a confirmation"),
    "short-years-ground": (
        SHORT_GROUND,
        "the default's mask, the shadow model's ground on the short years (SHORT_GROUND)",
    ),
}


def units(name: str, short: bool = False) -> list[tuple[str, Site]]:
    """A site's units: its chosen year (``chosen``) and each other year, by label; with
    ``short``, its other years of :data:`SHORT_YEARS` dates instead."""
    full = load_site(name, window=False)
    if short:
        low, high = SHORT_YEARS
        years = other_years(full, min_dates=low, max_dates=high)
        return [(str(year), year_of(full, year)) for year in years]
    out = [("chosen", window_of(full))]  # the file read once, every unit cut from it
    out += [(str(year), year_of(full, year)) for year in other_years(full)]
    return out


def unit_rows(
    name: str, candidates: Mapping[str, Candidate], short: bool = False, seed: int = 0
) -> pd.DataFrame:
    """Every candidate on every unit's four reference pairs (:func:`units`; drawn with
    ``seed``, 0 the record's), filed under ``site year``; an empty frame when no unit has a
    pair."""
    specs = {key: spec for key, spec, _ in candidates.values()}
    steps = list({step.name: step for _, _, step in candidates.values()}.values())
    rows = []
    for year, site in units(name, short):
        D, reference, days = site_arrays(site)
        pairs = own_pairs(reference, 4, seed)
        if not pairs:
            continue
        label = f"{name} {year}"
        rows += scored_rows(D, reference, days, site.series.frame, pairs, specs, steps, label)
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows)
    table["unit"] = table.site
    table["site"] = name
    return table


def unit_scores(rows: pd.DataFrame, candidates: Mapping[str, Candidate]) -> pd.DataFrame:
    """Per unit and candidate key: r, fidelity and the benchmark's loss; with its site."""
    scores = pooled(rows.assign(site=rows.unit))
    labels = list(scores.site.unique())
    losses = loss(scores, labels)
    out = []
    for key, (solve, _, step) in candidates.items():
        label = candidate_label(solve, step)
        mine = scores[(scores.solve == solve) & (scores.step == step.name)]
        mine = mine[mine.protocol == "drop-source"].set_index("site")
        median = scores[scores.solve == "temporal-median"].set_index("site").pred
        for unit in labels:
            out.append(
                {
                    "unit": unit,
                    "site": unit.rsplit(" ", 1)[0],
                    "key": key,
                    "r": float(mine.loc[unit].pred),
                    "fid": float(mine.loc[unit].fid),
                    "median": float(median.loc[unit]),
                    "loss": float(losses.loc[label, unit]),
                }
            )
    return pd.DataFrame(out)


def report_folds(scores: pd.DataFrame, keys: list[str], heading: str) -> None:
    """Print every candidate's per-site means, each fold's choice, the held-out table and the
    three conditions (module docstring, under ``heading``) for the unit scores ``scores``."""
    names = list(dict.fromkeys(scores.site))
    per_site = scores.groupby(["site", "key"])[["r", "fid", "loss"]].mean()
    site_loss = per_site.loss.unstack("key")
    print("Units per site:", scores.groupby("site").unit.nunique().to_dict())
    print("\nEvery candidate, the mean over each site's years (r, fidelity, loss):\n")
    print("| site | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name in names:
        cells = [
            "{:.3f}, {:.3f}, {:.2f}".format(*per_site.loc[(name, key)][["r", "fid", "loss"]])
            for key in keys
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    means = per_site.groupby("key")[["r", "fid"]].mean()
    print(
        "| mean of the sites | "
        + " | ".join(f"{means.loc[k].r:.3f}, {means.loc[k].fid:.3f}" for k in keys)
        + " |"
    )

    print("\nHeld out (each site scored with its fold's choice; the mean over its years):\n")
    print("| site left out | fold's choice | r | fidelity | the default: r, fidelity | median |")
    print("|---|---|---|---|---|---|")
    picks, held, base, rises = {}, [], [], []
    for name in names:
        picks[name] = fold_choice(site_loss, name)
        chosen, default = per_site.loc[(name, picks[name])], per_site.loc[(name, DEFAULT_KEY)]
        median = scores[(scores.site == name) & (scores.key == DEFAULT_KEY)]["median"].mean()
        held.append(chosen.r)
        base.append(default.r)
        rises.append(chosen.fid - default.fid)
        print(
            f"| {name} | {picks[name]} | {chosen.r:.3f} | {chosen.fid:.3f} | "
            f"{default.r:.3f}, {default.fid:.3f} | {median:.3f} |"
        )
    print(f"\nMean r over the sites: held out {np.mean(held):.4f}, the default {np.mean(base):.4f}")
    same = len(set(picks.values())) == 1 and DEFAULT_KEY not in picks.values()
    print(f"\n{heading}:")
    print(f"- {'met' if same else 'NOT met'}: every fold chose the same non-default candidate")
    print(
        f"- {'met' if np.mean(held) < np.mean(base) else 'NOT met'}: the held-out mean r is "
        "below the default's"
    )
    print(
        f"- {'met' if max(rises) <= FIDELITY_RISE else 'NOT met'}: no site's mean fidelity "
        f"above the default's by more than {FIDELITY_RISE} (largest {max(rises):+.3f}; "
        f"fidelity bar {FIDELITY_LIMIT})"
    )


def confirm_short(names: list[str], specs: Mapping[str, Candidate], out: Path | None) -> None:
    """Score the default and the one other candidate of ``specs`` (:data:`SHADOW_2` or
    :data:`SHORT_GROUND`) on every short year and print the confirmation's conditions
    (docs/REAL-CLOUDS.md, "Shadow 2σ on the transect's short years")."""
    (other,) = (key for key in specs if key != DEFAULT_KEY)
    frames = [unit_rows(name, specs, short=True) for name in names]
    scores = pd.concat([unit_scores(f, specs) for f in frames if not f.empty], ignore_index=True)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        scores.to_csv(out / "units.csv", index=False)
    table = scores.pivot(index="unit", columns="key", values=["r", "fid"])
    print(f"| year | default: r, fidelity | {other}: r, fidelity | median |")
    print("|---|---|---|---|")
    medians = scores[scores.key == DEFAULT_KEY].set_index("unit")["median"]
    for unit, row in table.iterrows():
        print(
            f"| {unit} | {row[('r', DEFAULT_KEY)]:.3f}, {row[('fid', DEFAULT_KEY)]:.3f} | "
            f"{row[('r', other)]:.3f}, {row[('fid', other)]:.3f} | "
            f"{medians[unit]:.3f} |"
        )
    mean = table.mean()
    worse = int((table[("r", other)] > table[("r", DEFAULT_KEY)]).sum())
    checks = [
        (
            f"mean r {mean[('r', other)]:.4f} below the default's {mean[('r', DEFAULT_KEY)]:.4f}",
            mean[("r", other)] < mean[("r", DEFAULT_KEY)],
        ),
        (
            f"mean fidelity {mean[('fid', other)]:.4f} within {FIDELITY_RISE} of the "
            f"default's {mean[('fid', DEFAULT_KEY)]:.4f}",
            mean[("fid", other)] <= mean[("fid", DEFAULT_KEY)] + FIDELITY_RISE,
        ),
        (
            f"worse on {worse} of {len(table)} years (a third at most)",
            worse <= len(table) / 3,
        ),
    ]
    print("\nThe conditions written before the run:")
    for text, held in checks:
        print(f"- {'met' if held else 'NOT met'}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", nargs="+", default=None)
    parser.add_argument(
        "--seed", type=int, default=0, help="the draw of each unit's four pairs (0: the record's)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the unit scores here (CSV)")
    parser.add_argument(
        "--from-units", type=Path, default=None, help="a run's units.csv: report it again"
    )
    mode = parser.add_mutually_exclusive_group()
    for flag, (_, text) in MODES.items():
        mode.add_argument(f"--{flag}", dest="mode", action="store_const", const=flag, help=text)
    args = parser.parse_args()
    started = time.perf_counter()
    names = args.sites or site_names()
    specs = SOLVES if args.mode is None else MODES[args.mode][0]
    if args.mode in ("short-years", "short-years-ground"):
        confirm_short(names, specs, args.out)
        print(f"\n({time.perf_counter() - started:.0f} s)")
        return
    if args.from_units is not None:  # a run's unit scores again, nothing solved
        scores = pd.read_csv(args.from_units)
        keys = list(dict.fromkeys(scores.key))
    else:
        frames = [unit_rows(name, specs, seed=args.seed) for name in names]
        for name, frame in zip(names, frames, strict=True):
            if frame.empty:  # every site's chosen year has pairs: a site without is an error
                raise SystemExit(f"{name}: no year of this site has a reference pair")
        scores = pd.concat([unit_scores(f, specs) for f in frames], ignore_index=True)
        keys = list(specs)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        scores.to_csv(args.out / "units.csv", index=False)
    print("Every site-year (the conditions written before the run read this one):\n")
    report_folds(scores, keys, "The conditions written before the run")
    print(
        "\nPost hoc, the other years alone (the chosen years, in sample for the default, "
        "left out; not a condition of any run):\n"
    )
    report_folds(
        scores[~scores.unit.str.endswith(" chosen")], keys, "The same conditions, post hoc"
    )
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
