"""What ground that stays (``mask.persist``) takes out of cloud and haze on each site's whole
series, by the reference's class, and what it does to the pairs' fidelity: the in-sample look
behind its not being the default (docs/REAL-CLOUDS.md, "Ground that stays").

The default's solve on each bundled site's whole series (nothing pasted), its mask with the
rule off and at ``--persist``; every entry the rule turns from cloud or haze into clear,
counted by the reference's class (clear, cloud, shadow, snow). Then the fidelity r of the
default's pairs (source dropped) with the rule off and on. Last, for the reference's cloud
entries it unflags: on which dates, how much of each such date the reference calls cloud,
and, where a site keeps its raw classes (Sen2Cor SCL), which (8, 9: cloud of medium and high
probability; 10: thin cirrus).

Usage::

    python benchmarks/persist_unflags.py [--persist 0.3]    # about 30 s
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings

import numpy as np
from clear_changes import _raw_reference  # this folder's benchmark

from cloudcore.masks import CLOUD, HAZE
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.realdata import CLEAR as REF_CLEAR
from cloudlab.realdata import CLOUD as REF_CLOUD
from cloudlab.realdata import SHADOW as REF_SHADOW
from cloudlab.realdata import SNOW as REF_SNOW
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import dropped_pairs, error_sums, solve_specs, whole_series, written_target
from pipeline.config import MaskConfig, SolverConfig


def fidelity(name: str, steps: list[PostStep]) -> list[float]:
    """The fidelity r of each post-step over the site's pairs, source dropped."""
    spec = SolveSpec.of(SolverConfig())
    site = load_site(name)
    frame = site.series.frame
    sums = np.zeros((len(steps), 2))
    for pair, kept, solved in dropped_pairs(site, [spec]):
        t, s = kept.target, solved[spec.name]
        seen = kept.observed[:, t].reshape(1, *frame)
        for k, step in enumerate(steps):
            codes = s.codes(step.rule, seen, t)
            out = written_target(kept.D, kept.days, t, s, codes, step, frame)
            e = error_sums(out, pair.truth, pair.scored, pair.clear)
            sums[k] += [e["fid_num"], e["fid_den"]]
    return [float(np.sqrt(a / b)) for a, b in sums]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--persist", type=float, default=0.3)
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    spec, step = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig())
    off = step.with_rule(persist=0.0)
    on = dataclasses.replace(off, rule=dataclasses.replace(off.rule, persist=args.persist))
    print(f"mask {off.rule_name} against {on.rule_name}, each site's whole series:\n")
    header = "| site | flagged | unflagged | reference clear | cloud | shadow | snow |"
    print(header + " fidelity r off → on |")
    print("|---|---|---|---|---|---|---|---|")
    notes = []
    for name in site_names():
        series = whole_series(name)
        solved = solve_specs(series.D, series.observed, [spec], series.frame)[spec.name]
        before, after = series.codes(solved, off.rule), series.codes(solved, on.rule)
        flagged = np.isin(before, (CLOUD, HAZE))
        taken = flagged & ~np.isin(after, (CLOUD, HAZE))
        ref = series.reference[taken]
        counts = [int((ref == c).sum()) for c in (REF_CLEAR, REF_CLOUD, REF_SHADOW, REF_SNOW)]
        fid = fidelity(name, [off, on])
        print(
            f"| {name} | {int(flagged.sum())} | {int(taken.sum())} | "
            + " | ".join(str(c) for c in counts)
            + f" | {fid[0]:.3f} → {fid[1]:.3f} |"
        )
        clouds = taken & (series.reference == REF_CLOUD)
        notes.append(_cloud_note(name, series.reference, clouds))
    print()
    print("\n".join(n for n in notes if n))


def _cloud_note(name: str, reference: np.ndarray, clouds: np.ndarray) -> str:
    """Where the reference's cloud entries the rule unflags are: per date, their count and
    the share of the date the reference calls cloud; the raw classes where kept."""
    per_date = clouds.sum(axis=0)
    if not per_date.any():
        return ""
    dates = load_site(name).series.dates
    share = (reference == REF_CLOUD).mean(axis=0)
    parts = [
        f"{str(dates[d])[:10]} {int(per_date[d])} (the date {share[d]:.0%} cloud)"
        for d in np.flatnonzero(per_date)
    ]
    raw = _raw_reference(name, dates)
    classes = ""
    if raw is not None:
        values, counts = np.unique(raw[clouds], return_counts=True)
        classes = "; raw classes " + ", ".join(
            f"{v}: {c}" for v, c in zip(values, counts, strict=True)
        )
    return f"- {name}: reference cloud unflagged on " + ", ".join(parts) + classes


if __name__ == "__main__":
    main()
