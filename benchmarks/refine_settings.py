"""How the refinement's settings and the mask's thresholds were chosen, on real clouds.

The bundled Landsat series and the pairs of ``configs/real-clouds.yaml`` (docs/REAL-CLOUDS.md):

* ``refine``: r on the pasted pixels (mean over the 36 pair × band cases of each protocol) of
  RPCA 1/√d refined with :class:`cloudcore.RefineRule` variants, one setting changed at a time
  from the default, beside the first solve alone;
* ``mask``: cloud, cloud + haze and shadow F1 of :func:`cloudcore.classify_result` against Fmask,
  pooled over every date of the four unmodified series solved by the default solver, for a grid
  of :class:`cloudcore.MaskRule` thresholds.

About 3 minutes for both on the 2-core development machine.

Usage::

    python benchmarks/refine_settings.py [refine|mask]
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import replace
from itertools import product

import numpy as np

import cloudcore
from cloudlab.realclouds import MASK_CLASSES, config_pairs, solve
from cloudlab.realconfig import RealCloudsConfig, SolverEntry
from cloudlab.realdata import RealSeries, load_real_series
from cloudlab.realpaste import paste_clouds, without_source
from cloudlab.realscores import agreement_per_date, relative_error

DEFAULT = cloudcore.RefineRule()
#: One setting changed at a time.
VARIANTS = {
    "default": DEFAULT,
    "threshold 2.5": replace(DEFAULT, threshold=2.5),
    "threshold 4": replace(DEFAULT, threshold=4.0),
    "lam_scale 2": replace(DEFAULT, lam_scale=2.0),
    "lam_scale 5": replace(DEFAULT, lam_scale=5.0),
    "radius 0": replace(DEFAULT, radius=0),
    "radius 2": replace(DEFAULT, radius=2),
    "rounds 2": replace(DEFAULT, rounds=2),
}


#: The first solve of the default solver, and the default solver (the experiment's entries).
FIRST = SolverEntry(method="rpca", lam="auto")
REFINED = SolverEntry(method="rpca", lam="auto", refine=True)


def _seasons(cfg: RealCloudsConfig) -> list[RealSeries]:
    data = load_real_series(cfg.data_path)
    return [data.between(w.start, w.end) for w in cfg.series]


def refine_table(cfg: RealCloudsConfig) -> None:
    """r of each refinement variant, per protocol."""
    scores: dict[tuple[str, str], list[float]] = {}
    for series in _seasons(cfg):
        n = series.dates.size
        reference = series.reference.reshape(n, -1).T
        pairs = config_pairs(cfg, reference)
        for (t, s), band, protocol in product(pairs, range(len(series.bands)), cfg.pairs.protocols):
            pasted = paste_clouds(series.matrix(band)[0], reference, t, s)
            if protocol == "drop-source":
                pasted, _ = without_source(pasted)
            D, observed = np.where(pasted.observed, pasted.D, 0.0), pasted.observed
            first = solve(D, observed, FIRST, cfg, series.frame)
            runs = {"first solve alone": first}
            for name, rule in VARIANTS.items():
                runs[name] = cloudcore.refine(D, first, series.frame, rule=rule, mask=observed)
            for name, result in runs.items():
                r = relative_error(result.ground[:, pasted.target], pasted.truth, pasted.scored)
                scores.setdefault((name, protocol), []).append(r)
    print("| RPCA 1/√d, refined with | " + " | ".join(cfg.pairs.protocols) + " |")
    print("|---" * (len(cfg.pairs.protocols) + 1) + "|")
    for name in ["first solve alone", *VARIANTS]:
        cells = " | ".join(f"{np.mean(scores[name, p]):.4f}" for p in cfg.pairs.protocols)
        print(f"| {name} | {cells} |")


def mask_table(cfg: RealCloudsConfig) -> None:
    """Pooled F1 against Fmask for a grid of mask thresholds."""
    solved = []
    for series in _seasons(cfg):
        n = series.dates.size
        observed = series.observed.reshape(n, -1).T
        results = [
            solve(series.matrix(band)[0], observed, REFINED, cfg, series.frame)
            for band in range(len(series.bands))
        ]
        solved.append((series, results, observed))
    print("| cloud | haze | shadow | " + " | ".join(f"{c} F1" for c in MASK_CLASSES) + " |")
    print("|---" * (3 + len(MASK_CLASSES)) + "|")
    for cloud, haze, shadow in product((6.0, 8.0, 10.0, 14.0), (3.0, 4.0), (3.0, 4.0, 6.0, 10.0)):
        # The grid's figures (docs/REAL-CLOUDS.md) were made without the whiteness test.
        rule = cloudcore.MaskRule(
            cloud=cloud, haze=haze, shadow=shadow, white=0.0, white_cloud=0.0, shadow_near=0.0
        )
        cells = []
        for ref_codes, pred_codes in MASK_CLASSES.values():
            tp = fp = fn = 0
            for series, results, observed in solved:
                codes = cloudcore.classify_result(results, series.frame, rule, observed)
                for a in agreement_per_date(series.reference, codes, ref_codes, pred_codes):
                    tp, fp, fn = tp + a.tp, fp + a.fp, fn + a.fn
            cells.append(f"{2 * tp / max(2 * tp + fp + fn, 1):.3f}")
        print(f"| {cloud:g} | {haze:g} | {shadow:g} | " + " | ".join(cells) + " |")


def main() -> None:
    tables = {"refine": refine_table, "mask": mask_table}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # No `choices`: Python 3.11 checks an empty `nargs="*"` against them and refuses it.
    parser.add_argument(
        "parts", nargs="*", metavar="{refine,mask}", help="the tables to print (default both)"
    )
    parts = parser.parse_args().parts or list(tables)
    if unknown := sorted(set(parts) - set(tables)):
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from refine, mask")
    warnings.simplefilter("ignore", cloudcore.ConvergenceWarning)
    cfg = RealCloudsConfig()
    for part in parts:
        tables[part](cfg)
        print()


if __name__ == "__main__":
    main()
