"""Which of a target's clear pixels the default changes, pair by pair, on chosen site-years (#44).

Per given ``NAME:YEAR`` (:func:`cloudlab.sites.year_of`, held out in time) and each of its four
reference pairs with the source dropped (:func:`cloudlab.sitescore.dropped_pairs`, the
benchmark's primary protocol), the default solve and post-step: how many of the target's
reference-clear pixels the mask calls cloud and shadow, and the fidelity r of the output there
(0 where none is flagged). Two colour measures on the target, each the bands' D − L against the
written ground: on the clear pixels called cloud and on the pasted pixels called cloud, the
median of the ratio of the smallest band's brightening to the largest's (in the data's units),
and the median over the bands' smallest brightening in units of σ. Then the clear pixels called
shadow with a shadow rule taken out: without the shadow beside its cloud, without the shadow
dark in every band, without both.

The look behind docs/REAL-CLOUDS.md, "Every band brightened" (in sample: these site-years are
among the units its folds score).

With ``--dates``, each site-year's whole series is solved instead (no clouds pasted) and every
date gets one row: the reference's cloud, clear and snow shares of its observed pixels, the
share the default's mask calls cloud or haze, the reference-clear and snow pixels it calls
so, and the median D − L of each band.

Usage::

    python benchmarks/clear_flags.py p035r032-landsat:2008 p035r032-landsat:2010 \\
        s2_nrt_romania_10m:2016 s2_nrt_romania_10m:2018      # about 1 min
    python benchmarks/clear_flags.py --dates p035r032-landsat:2008    # seconds
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from cloudcore.anomaly import anomaly_scale
from cloudcore.masks import CLEAR, CLOUD, HAZE, SHADOW, MaskRule
from cloudlab import realdata
from cloudlab.scene_choice import DEFAULT_SOLVE, DEFAULT_STEP
from cloudlab.sites import load_site, year_of
from cloudlab.sitescore import dropped_pairs, series_of, solve_specs, written_target

#: The mask rules whose shadows are counted: the default's without each shadow rule, and both.
SHADOW_RULES: dict[str, MaskRule] = {
    "without the shadow beside its cloud": dataclasses.replace(DEFAULT_STEP.rule, shadow_near=0.0),
    "without the shadow dark in every band": dataclasses.replace(
        DEFAULT_STEP.rule, shadow_flat=0.0
    ),
    "without both": dataclasses.replace(DEFAULT_STEP.rule, shadow_near=0.0, shadow_flat=0.0),
}


def _median(x: np.ndarray) -> str:
    return f"{np.median(x):.2f}" if x.size else "–"


def per_date(item: str) -> None:
    """One row per date of the site-year ``item`` (``NAME:YEAR``), its whole series solved with
    the default: what the reference and the default's mask call each date (module docstring)."""
    name, year = item.rsplit(":", 1)
    site = year_of(load_site(name, window=False), int(year))
    series = series_of(site)
    D, reference, observed = series.D, series.reference, series.observed
    result = solve_specs(D, observed, [DEFAULT_SOLVE], series.frame)[DEFAULT_SOLVE.name]
    codes = series.codes(result, DEFAULT_STEP.rule)  # (pixels, dates), as the reference
    bands = ", ".join(site.series.bands)
    print(f"\n{item} ({bands})\n")
    print(
        "| date | reference cloud | clear | snow | mask cloud+haze | clear called cloud+haze "
        f"| snow called cloud+haze | median D − L ({bands}) |"
    )
    print("|---" * 8 + "|")
    for t, date in enumerate(site.series.dates):
        ref, seen = reference[:, t], observed[:, t]
        count = max(int(seen.sum()), 1)
        said = np.isin(codes[:, t], (CLOUD, HAZE)) & seen
        shares = [
            ((ref == code) & seen).sum() / count
            for code in (realdata.CLOUD, realdata.CLEAR, realdata.SNOW)
        ]
        medians = np.nanmedian(np.where(seen, D[:, :, t] - result.ground[:, :, t], np.nan), axis=1)
        cells = [f"{x:.2f}" for x in (*shares, said.sum() / count)]
        called = (said & (ref == code) for code in (realdata.CLEAR, realdata.SNOW))
        cells += [str(int(c.sum())) for c in called]
        cells.append(", ".join(f"{m:+.3f}" for m in medians))
        print(f"| {date} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("years", nargs="+", help="NAME:YEAR")
    parser.add_argument(
        "--dates", action="store_true", help="the whole year solved, one row per date"
    )
    args = parser.parse_args()
    if args.dates:
        for item in args.years:
            per_date(item)
        return
    print(
        "| site-year | target | clear px | called cloud | called shadow | fidelity r "
        "| lowest/highest band, clear called cloud | the same, pasted called cloud "
        "| lowest band σ, clear called cloud | "
        + " | ".join(f"shadow {k}" for k in SHADOW_RULES)
        + " |"
    )
    print("|---" * (9 + len(SHADOW_RULES)) + "|")
    for item in args.years:
        name, year = item.rsplit(":", 1)
        site = year_of(load_site(name, window=False), int(year))
        frame = site.series.frame
        for pair, kept, solved in dropped_pairs(site, [DEFAULT_SOLVE]):
            result = solved[DEFAULT_SOLVE.name]
            t = kept.target
            seen = np.isfinite(kept.D[:, :, t]).all(axis=0).reshape(1, *frame)
            codes = result.codes(DEFAULT_STEP.rule, seen, t)
            out = written_target(kept.D, kept.days, t, result, codes, DEFAULT_STEP, frame)
            c = codes.reshape(-1)
            clear = pair.clear
            error = ((out - pair.truth)[:, clear] ** 2).sum()
            fidelity = np.sqrt(error / (pair.truth[:, clear] ** 2).sum())
            residual = kept.D[:, :, t] - result.ground[:, :, t]  # (bands, pixels)
            ratio = residual.min(axis=0) / np.maximum(residual.max(axis=0), 1e-12)
            sigmas = [
                anomaly_scale(np.where(kept.observed, b - g, np.nan), kept.observed, "median")
                for b, g in zip(kept.D, result.ground, strict=True)
            ]
            lowest = np.min(residual / np.asarray(sigmas)[:, None], axis=0)
            false_cloud = clear & (c == CLOUD)
            pasted_cloud = pair.scored & (c == CLOUD)
            shadows = []
            for rule in SHADOW_RULES.values():
                other = result.codes(rule, seen, t).reshape(-1)
                shadows.append(str(int((clear & (other == SHADOW)).sum())))
            print(
                f"| {item} | {site.series.dates[pair.target]} | {int(clear.sum())} "
                f"| {int(false_cloud.sum())} | {int((clear & (c == SHADOW)).sum())} "
                f"| {fidelity:.3f} | {_median(ratio[false_cloud])} "
                f"| {_median(ratio[pasted_cloud])} "
                f"| {_median(lowest[false_cloud])} | " + " | ".join(shadows) + " |"
            )
    flagged = "the clear pixels not called clear"
    print(f"\n(fidelity r over the target's reference-clear pixels; {flagged} carry all of it)")
    print(f"(codes: clear {CLEAR}, cloud {CLOUD}, shadow {SHADOW})")


if __name__ == "__main__":
    main()
