"""The default and the scene's own choice on the other years of the sites: held out in time (#44).

Every choice of the benchmark was made on one calendar year of each site
(:data:`cloudlab.sites.WINDOWS`); the unanimity rule (:func:`cloudlab.scene_choice.
unanimous_choice`) was read off those years' tables. The bundled files hold more years of four
sites, which no choice has read (:func:`cloudlab.sites.other_years`: every other calendar year
with at least 12 dates). Each is scored here as a scene of its own, the source date dropped,
with the pipeline's default solve and post-step:

- the default, RPCA 1/√d capped, the temporal median and the nearest-clear oracle on the
  year's reference pairs (four, the benchmark's rules);
- the unanimity rule: four draws of sixteen pairs of the year's own mask;
- the default's mask on the whole year against the reference (F1, plain and grown as the
  reference grows its own).

It then prints the per-site means over the years, the mean of the sites (each site weighs one,
however many years it has), how many site-years meet each of #44's bars with the default, and
the four conditions written before the run (docs/REAL-CLOUDS.md, "Other years of the same
sites"), each met or not.

Usage::

    python benchmarks/other_years.py --out runs/other-years    # about 28 min on two cores
    python benchmarks/other_years.py --sites s2_nrt_subset --years 2018   # one year (seconds)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudlab.heldout import FIDELITY_LIMIT, mask_f1, pooled
from cloudlab.realdata import SHADOW
from cloudlab.scene_choice import (
    DEFAULT_KEY,
    DEFAULT_SOLVE,
    DEFAULT_STEP,
    OWN,
    own_pairs,
    scene_rows,
    unanimous_choice,
)
from cloudlab.sites import Site, load_site, other_years, site_names, year_of
from cloudlab.sitescore import WholeSeries, mask_rows, site_arrays, solve_series

DRAWS, DRAW_PAIRS = 4, 16
#: #44's bars, read per site-year with the default.
RATIO_BAR, CLOUD_F1_BAR, SHADOW_F1_BAR = 0.85, 0.6, 0.4
#: The conditions written before the run: how much worse unanimity may be on one site-year (b),
#: how much better it must be on at least one site's mean (d).
WORSE_LIMIT, GAIN_NEEDED = 0.01, 0.01


def score_year(full: Site, year: int) -> dict[str, Any] | None:
    """One year's row of scores of the whole site ``full``, or None when its reference has no
    pair."""
    name = full.name
    site = year_of(full, year)
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    if not own_pairs(reference, 4):  # the benchmark's rules find no pair in the reference
        return None
    series = WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0))
    whole = solve_series(D, series.observed, DEFAULT_SOLVE, frame)
    counts = [{"site": name, **r} for r in mask_rows(site, {DEFAULT_KEY: whole}, [DEFAULT_STEP])]
    f1 = mask_f1(pd.DataFrame(counts)).iloc[0]
    own = series.codes(whole, DEFAULT_STEP.rule)
    label = f"{name} {year}"
    table = scene_rows(label, frame, D, reference, days, own, DRAWS, DRAW_PAIRS)
    scores = pooled(table).set_index(["site", "solve"])
    draws = [f"{label}{OWN}{draw}" for draw in range(DRAWS)]
    pick = unanimous_choice(table, draws, DEFAULT_STEP)
    row: dict[str, Any] = {
        "site": name,
        "year": year,
        "dates": int(days.size),
        "pairs": int(table[table.site == label].pair.nunique()),
        "shadow_px": int((reference == SHADOW).sum()),
        "unanimity": pick,
    }
    for side, key in (
        ("default", DEFAULT_KEY),
        ("rpca", "rpca x1"),
        ("unan", pick),
        ("median", "temporal-median"),
        ("oracle", "nearest-clear"),
    ):
        row[f"{side}_r"] = float(scores.loc[(label, key)].pred)
        row[f"{side}_fid"] = float(scores.loc[(label, key)].fid)
    for cls in ("cloud+haze", "shadow", "cloud+haze_grown", "shadow_grown"):
        row[f"f1_{cls}"] = float(f1[f"f1_{cls}"])
    return row


def conditions(years: pd.DataFrame) -> list[tuple[str, bool]]:
    """The four conditions written before the run, each with whether it holds."""
    sites = years.groupby("site")[["default_r", "unan_r"]].mean()
    worse = years.unan_r - years.default_r
    kept = years.default_fid <= FIDELITY_LIMIT
    return [
        (
            f"(a) mean r over the sites: unanimity {sites.unan_r.mean():.4f} below the "
            f"default's {sites.default_r.mean():.4f}",
            bool(sites.unan_r.mean() < sites.default_r.mean()),
        ),
        (
            f"(b) no site-year worse than the default by more than {WORSE_LIMIT} "
            f"(largest {worse.max():+.4f})",
            bool(worse.max() <= WORSE_LIMIT),
        ),
        (
            f"(c) no site-year within fidelity {FIDELITY_LIMIT} with the default taken over it "
            f"({int((kept & (years.unan_fid > FIDELITY_LIMIT)).sum())} taken over)",
            bool(not (kept & (years.unan_fid > FIDELITY_LIMIT)).any()),
        ),
        (
            f"(d) a site whose mean r falls by {GAIN_NEEDED} or more (largest fall "
            f"{(sites.default_r - sites.unan_r).max():.4f})",
            bool((sites.default_r - sites.unan_r).max() >= GAIN_NEEDED),
        ),
    ]


def report(years: pd.DataFrame) -> None:
    """Print the per-year table, the per-site means, the bars' counts and the conditions."""
    print(
        "| site | year | dates | default: r (ratio), fidelity | median | nearest clear (oracle) "
        "| RPCA 1/√d: r, fidelity | unanimity: choice, r, fidelity | F1 cloud+haze (grown) "
        "| F1 shadow (grown), shadow px |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _, y in years.iterrows():
        print(
            f"| {y.site} | {y.year} | {y.dates} | {y.default_r:.3f} "
            f"({y.default_r / y.median_r:.2f}), {y.default_fid:.3f} | {y.median_r:.3f} | "
            f"{y.oracle_r:.3f} | {y.rpca_r:.3f}, {y.rpca_fid:.3f} | {y.unanimity}, "
            f"{y.unan_r:.3f}, {y.unan_fid:.3f} | {y['f1_cloud+haze']:.2f} "
            f"({y['f1_cloud+haze_grown']:.2f}) | {y.f1_shadow:.2f} ({y.f1_shadow_grown:.2f}), "
            f"{y.shadow_px} |"
        )
    columns = ["default_r", "median_r", "oracle_r", "rpca_r", "unan_r", "default_fid", "unan_fid"]
    sites = years.groupby("site")[columns].mean()
    sites["years"] = years.groupby("site").size()
    print("\nMeans over each site's years, then over the sites:\n")
    print(sites.to_string(float_format=lambda v: f"{v:.4f}"))
    print("\nmean of the sites:", ", ".join(f"{c} {sites[c].mean():.4f}" for c in columns))
    ratio = years.default_r / years.median_r
    shadowed = years[years.shadow_px > 0]
    grown = shadowed.f1_shadow_grown
    print(
        "\n#44's bars with the default, site-years meeting each:"
        f"\n- ratio to the median ≤ {RATIO_BAR}: {int((ratio <= RATIO_BAR).sum())} of {len(years)}"
        f"\n- fidelity ≤ {FIDELITY_LIMIT}: {int((years.default_fid <= FIDELITY_LIMIT).sum())} "
        f"of {len(years)}"
        f"\n- cloud + haze F1 ≥ {CLOUD_F1_BAR} (grown): "
        f"{int((years['f1_cloud+haze_grown'] >= CLOUD_F1_BAR).sum())} of {len(years)}"
        f"\n- shadow F1 ≥ {SHADOW_F1_BAR} (grown), years whose reference holds shadow: "
        f"{int((grown >= SHADOW_F1_BAR).sum())} of {len(shadowed)}"
        f"\n- mean r of the sites ≤ the nearest-clear oracle's: "
        f"{sites.default_r.mean():.4f} against {sites.oracle_r.mean():.4f}"
    )
    print("\nThe unanimity rule's conditions, written before the run:")
    for text, held in conditions(years):
        print(f"- {'met' if held else 'NOT met'}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", nargs="+", default=None)
    parser.add_argument("--years", type=int, nargs="+", default=None, help="only these years")
    parser.add_argument("--out", type=Path, default=None, help="write the table here (CSV)")
    args = parser.parse_args()
    started = time.perf_counter()
    rows, skipped = [], []
    for name in args.sites or site_names():
        full = load_site(name, window=False)  # read once, every year cut from it
        for year in other_years(full):
            if args.years is not None and year not in args.years:
                continue
            row = score_year(full, year)
            if row is None:
                skipped.append(f"{name} {year}")
                continue
            rows.append(row)
            print(
                f"{name} {year}: default {row['default_r']:.3f}, unanimity "
                f"{row['unanimity']} {row['unan_r']:.3f} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    years = pd.DataFrame(rows)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        years.to_csv(args.out / "years.csv", index=False)
    print(f"\nSkipped, no reference pair: {', '.join(skipped) or 'none'}\n")
    if not years.empty:
        report(years)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
