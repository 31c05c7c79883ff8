"""Which clear pixels does the default change, and why: the mask's false clouds on real sites.

Per site of the held-out benchmark (``cloudlab.sites``), over its (clear target, cloudy source)
pairs with the source dropped (``cloudlab.sitescore``), on the target's reference-clear pixels:
how many the default's mask flags (and so fills), their share of the fidelity error, and the
colour of those it calls cloud or haze against the pasted real clouds' — the shortest band's
brightening D − L over the largest of any band's (clouds are white, haze bluish: near 1; a
ground that greened or was laid bare: near 0). Run with the default post-step without and with
its whiteness test (``mask.white``). Where a site keeps its reference's raw classes (Sen2Cor
SCL), the classes of the flagged pixels.

``--rho`` solves with another growth of the ALM's step μ than the paper's 1.5
(:func:`cloudcore._growth.mu_growth`; docs/REAL-CLOUDS.md, "The ALM's growth ρ").

Usage::

    python benchmarks/clear_changes.py     # about 20 s
    python benchmarks/clear_changes.py --rho 2
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from cloudcore._growth import check_growth, mu_growth
from cloudcore.masks import CLOUD, HAZE
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import compose_target, dropped_pairs, error_sums
from pipeline.config import MaskConfig, SolverConfig

SITES_DIR = Path(__file__).resolve().parents[1] / "cloudlab" / "data" / "real-clouds"
#: Sen2Cor SCL's surface classes: 4 vegetation, 5 not vegetated.
SURFACE_CLASSES = (4, 5)


def _raw_reference(name: str, dates: np.ndarray) -> np.ndarray | None:
    """The site's raw reference classes ``(pixels, dates)`` on the site's dates, if kept."""
    with np.load(SITES_DIR / f"{name}.npz") as z:
        if "reference_raw" not in z.files:
            return None
        raw, all_dates = z["reference_raw"], z["dates"].astype("datetime64[D]")
    index = np.searchsorted(all_dates, dates.astype("datetime64[D]"))
    return raw.reshape(raw.shape[0], -1).T[:, index]


def _classes(parts: list[np.ndarray]) -> str:
    """``class: count`` of the raw reference classes in ``parts``."""
    classes, counts = np.unique(np.concatenate(parts), return_counts=True)
    return ", ".join(f"{c}: {k}" for c, k in zip(classes, counts, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rho", type=check_growth, default=None, help="the ALM's growth of μ")
    with mu_growth(parser.parse_args().rho):
        _table()


def _table() -> None:
    spec = SolveSpec.of(SolverConfig())
    default = PostStep.of(MaskConfig())
    steps = {
        # Neither whiteness test: no gate and no white clouds.
        "no test": dataclasses.replace(
            default, rule=dataclasses.replace(default.rule, white=0.0, white_cloud=0.0)
        ),
        f"white {default.rule.white:g}": default,
    }
    print(f"solve {spec.name}; mask {default.name} with and without its whiteness tests\n")
    print(
        "| site | mask | clear px flagged | share | fidelity r | prediction r "
        "| short/max band, clear called cloud (median) | same, pasted clouds called cloud |"
    )
    print("|---|---|---|---|---|---|---|---|")
    raw_lines = []
    for name in site_names():
        site = load_site(name)
        frame = site.series.frame
        raw = _raw_reference(name, site.series.dates)
        totals = {
            label: {
                "n": 0,
                "clear": 0,
                "fp_q": [],
                "tp_q": [],
                "raw": [],
                "raw_clear": [],
                "sums": {},
                "strict": [0.0, 0.0],
            }
            for label in steps
        }
        for pair, kept, solved_specs in dropped_pairs(site, [spec]):
            solved = solved_specs[spec.name]
            tt = kept.target
            seen = kept.observed[:, tt].reshape(1, *frame)
            residual = kept.D[:, :, tt] - solved.ground[:, :, tt]  # (bands, pixels)
            peak = np.nanmax(residual, axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                colour = residual[0] / peak
            for label, step in steps.items():
                codes = solved.codes(step.rule, seen, tt)
                out = compose_target(kept.D[:, :, tt], solved.ground[:, :, tt], codes, step, frame)
                sums = error_sums(out, pair.truth, pair.scored, pair.clear)
                acc = totals[label]
                for key, value in sums.items():
                    acc["sums"][key] = acc["sums"].get(key, 0.0) + value
                flagged = pair.clear & (codes.ravel() != 0)
                # The colour of brightenings only: cloud or haze, with a band that brightened.
                bright = np.isin(codes.ravel(), (HAZE, CLOUD)) & (peak > 0)
                cloud = pair.scored & (codes.ravel() == CLOUD) & (peak > 0)
                acc["n"] += int(flagged.sum())
                acc["clear"] += int(pair.clear.sum())
                acc["fp_q"].append(colour[flagged & bright])
                acc["tp_q"].append(colour[cloud])
                if raw is not None:
                    acc["raw"].append(raw[:, pair.target][flagged])
                    acc["raw_clear"].append(raw[:, pair.target][pair.clear])
                    # Fidelity over the clear pixels of SCL's surface classes alone (4
                    # vegetation, 5 not vegetated): 7 "unclassified" and 2 "dark area" are
                    # the classes a missed cloud edge or haze would fall in.
                    surface = pair.clear & np.isin(raw[:, pair.target], SURFACE_CLASSES)
                    strict = error_sums(out, pair.truth, surface, surface)
                    acc["strict"][0] += strict["fid_num"]
                    acc["strict"][1] += strict["fid_den"]
        for label, acc in totals.items():
            sums = acc["sums"]
            fid = np.sqrt(sums["fid_num"] / sums["fid_den"])
            pred = np.sqrt(sums["pred_num"] / sums["pred_den"])
            fp_q, tp_q = np.concatenate(acc["fp_q"]), np.concatenate(acc["tp_q"])
            fp_med = f"{np.median(fp_q):.2f}" if fp_q.size else "-"
            tp_med = f"{np.median(tp_q):.2f}" if tp_q.size else "-"
            print(
                f"| {name} | {label} | {acc['n']} of {acc['clear']} | "
                f"{acc['n'] / acc['clear']:.3f} | {fid:.3f} | {pred:.3f} | {fp_med} | {tp_med} |"
            )
            if acc["raw"]:
                num, den = acc["strict"]
                strict = ""
                if den > 0:
                    r = np.sqrt(num / den)
                    strict = f"; fidelity r over classes {SURFACE_CLASSES} alone {r:.3f}"
                raw_lines.append(
                    f"- {name}, {label}: raw reference classes of the flagged clear pixels "
                    f"{_classes(acc['raw'])}; of all its clear pixels {_classes(acc['raw_clear'])}"
                    + strict
                )
    print()
    print("\n".join(raw_lines))


if __name__ == "__main__":
    main()
