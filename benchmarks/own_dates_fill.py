"""The default's fill against fills read off a pixel's own kept dates alone, without the ground.

Per site of the held-out benchmark, over its (clear target, cloudy source) pairs with the source
dropped (``cloudlab.sitescore``, the primary protocol), the default solve and mask
(``SolverConfig()``, ``MaskConfig()``). Where the default's mask flags a pixel of the target,
three fills are compared, the kept observations being the same in all three:

* **the default**: the ground, raised by the pixel's own departure from it on its nearest kept
  dates, plus the date's offset (``mask.interpolate``, ``mask.offset``);
* **its kept dates interpolated**: the pixel's observations on its nearest kept dates before and
  after, interpolated in time (the default's departure with a ground of zero), no offset;
* **the median of its kept dates**: per band, over every kept date but the target.

A pixel with no kept date takes the default's fill in all three. Printed per site: r on every
pasted pixel and on the pasted pixels the mask flags, for each fill and the temporal median.

The question it answers: is the transect's loss to the temporal median (docs/REAL-CLOUDS.md)
the ground model's, which a model-free fill would avoid? In-sample (the default was chosen on
all five sites): it says where a fill is better, not what to choose.

Usage::

    python benchmarks/own_dates_fill.py     # about 10 s
"""

from __future__ import annotations

import warnings

import numpy as np

from cloudcore.departure import raised_ground
from cloudcore.kept import kept_codes
from cloudcore.masks import CLEAR
from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import compose_target, dropped_pairs, error_sums, written_ground
from pipeline.config import MaskConfig, SolverConfig

FILLS = ("the default", "kept dates interpolated", "median of kept dates", "temporal median")


def _own_dates_fills(
    D: np.ndarray, kept: np.ndarray, days: np.ndarray, target: int, fallback: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The target's fills ``(bands, pixels)`` from the pixels' own kept dates other than the
    target: interpolated in time, and their median; ``fallback`` where a pixel has none.
    ``D`` is ``(bands, pixels, dates)``, ``kept`` ``(dates, pixels)``."""
    others = kept.copy()
    others[target] = False
    observation = np.moveaxis(D, 2, 1)  # (bands, dates, pixels)
    evidence = others & np.isfinite(observation).all(axis=0)
    interpolated = raised_ground(observation, np.zeros_like(observation), others, days)[:, target]
    values = np.where(evidence[None], observation, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a pixel with no kept date
        median = np.nanmedian(values, axis=1)
    some = evidence.any(axis=0)[None]
    return np.where(some, np.clip(interpolated, 0.0, 1.0), fallback), np.where(
        some, median, fallback
    )


def score_site(name: str, spec: SolveSpec, step: PostStep) -> tuple[list[float], list[float], int]:
    """r of each of :data:`FILLS` on every pasted pixel and on those the mask flags, pooled
    over the site's pairs and bands, and the flagged pasted pixels' count."""
    site = load_site(name)
    frame = site.series.frame
    sums = np.zeros((len(FILLS), 2, 2))  # fill, (all, flagged), (error², truth²)
    flagged_count = 0
    for pair, series, solved in dropped_pairs(site, [spec]):
        result, t = solved[spec.name], series.target
        seen = series.observed[:, t].reshape(1, *frame)
        observation = series.D[:, :, t]
        ground = written_ground(series.D, series.days, t, result, step)
        codes = result.codes(step.rule, seen, t)
        flagged = codes.reshape(-1) != CLEAR
        keep = kept_codes(result.codes(step.rule, result.seen), step.haze_fill == "observed")
        interpolated, median = _own_dates_fills(
            series.D, keep.reshape(keep.shape[0], -1), series.days, t, ground
        )
        outputs = (
            compose_target(observation, ground, codes, step, frame),
            np.where(flagged[None], interpolated, observation),
            np.where(flagged[None], median, observation),
            MULTIBAND_BASELINES["temporal-median"](series.D, series.reference, series.days)[
                :, :, t
            ],
        )
        where = (pair.scored, pair.scored & flagged)
        flagged_count += int(where[1].sum())
        for f, out in enumerate(outputs):
            for w, pixels in enumerate(where):
                e = error_sums(out, pair.truth, pixels, np.zeros_like(pixels))
                sums[f, w] += (e["pred_num"], e["pred_den"])
    r = np.sqrt(sums[..., 0] / sums[..., 1])
    return list(r[:, 0]), list(r[:, 1]), flagged_count


def main() -> None:
    spec, step = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig())
    print(f"the default: {spec.name} | {step.name}; pairs with the source dropped\n")
    print(
        "| site | flagged pasted pixels | r on every pasted pixel: "
        + ", ".join(FILLS)
        + " | r on the flagged ones: "
        + ", ".join(FILLS)
        + " |"
    )
    print("|---|---|---|---|")
    for name in site_names():
        every, flagged, count = score_site(name, spec, step)
        cells = [", ".join(f"{x:.3f}" for x in row) for row in (every, flagged)]
        print(f"| {name} | {count} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
