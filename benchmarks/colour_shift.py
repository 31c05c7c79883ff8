"""Do the filled pixels keep their colour? The default against the baselines on real clouds.

#44 saw the demo's cloud-free images shift colour (a white road come out cyan, forest under a
cloud blue-tinted) when each band's solve decided on its own how much of a pixel was cloud. The
mask now decides per pixel and date from all bands together, and a pixel it keeps is kept in
every band; a pixel it fills is filled band by band from each band's ground. This measures what
colour the filled pixels come out in, on the held-out benchmark's sites (``cloudlab.sites``),
over their (clear target, cloudy source) pairs with the source dropped (the primary protocol,
``cloudlab.sitescore``):

- the **spectral angle** between a pixel's output and its truth (the target before pasting),
  as band vectors, in degrees: 0 where the output is the truth times any brightness, so it
  measures colour apart from brightness; the mean and the 95th percentile over the pasted
  pixels (``prediction``), and the mean over the target's other reference-clear pixels
  (``fidelity``: there the truth is the observation);
- each band's **bias**, Σ(out − truth) / Σ truth, on the pasted pixels and on those the
  default's mask fills (the same pixels for every estimator): a tint is one band's bias apart
  from the others'; a second table gives the truth's mean there, what the biases are shares of.

Estimators: the default, or with ``--heldout DIR`` (a ``python -m cloudlab heldout`` run's
folder) each site's candidate chosen on the other sites (its capped fold choice, as the
held-out tables score it), and the baselines of the benchmark: the temporal median and the
geometric median (band vectors, Weiszfeld), and the nearest clear date (an oracle: it reads
the reference mask). Nothing is chosen on these figures; with the default alone they are
in-sample (it was chosen on these sites' prediction r).

With ``--parts`` it splits the default's fill instead (in-sample): each band's bias on the
pasted pixels its mask fills, written as the capped ground alone, the ground raised by the
pixel's own departure on its nearest kept dates (``mask.interpolate``), the ground plus the
date's offset (``mask.offset``), and both (the default): which part carries a tint.

With ``--regional`` it scores, in sample, a look at a fill with a date-wide term: the ground
written raised also by the median, per band, of the target's residual (observation less the
ground written) over the pixels its mask keeps (at least :data:`MIN_KEPT`), before the local
offset; prediction r, its ratio to the temporal median, fidelity r and each band's bias on
the filled pixels, beside the default's. Not a stage of the held-out benchmark.

Usage::

    python benchmarks/colour_shift.py                          # the default, in-sample (45 s)
    python benchmarks/colour_shift.py --heldout runs/heldout   # each site's held-out choice
    python benchmarks/colour_shift.py --parts                  # the default's fill by part (9 s)
    python benchmarks/colour_shift.py --regional               # a date-wide term, in sample (7 s)
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from cloudcore.masks import CLEAR
from cloudcore.metrics import spectral_angle
from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.candidates import PostStep, SolveSpec, solve_named, step_named
from cloudlab.heldout import read_picks
from cloudlab.sites import Site, load_site, site_names
from cloudlab.sitescore import (
    KeptSeries,
    PastedPair,
    Solved,
    compose_target,
    dropped_pairs,
    error_sums,
    written_ground,
    written_target,
)
from pipeline.config import MaskConfig, SolverConfig

#: Kept pixels the target needs for the date-wide term of ``--regional``.
MIN_KEPT = 10

#: The baselines scored beside the default (``nearest-clear`` reads the reference mask).
BASELINES = ("temporal-median", "geometric-median", "nearest-clear")


@dataclass
class ColourSums:
    """One estimator's colour figures on one site, pooled over its pairs."""

    bands: int
    angles: list[np.ndarray] = field(default_factory=list)
    clear_angles: list[np.ndarray] = field(default_factory=list)
    difference: np.ndarray = field(init=False)
    truth: np.ndarray = field(init=False)
    filled_pixels: int = 0

    def __post_init__(self) -> None:
        # Per band: Σ(out − truth) and Σ truth on the pasted pixels, then on those filled.
        self.difference = np.zeros((2, self.bands))
        self.truth = np.zeros((2, self.bands))

    def add(
        self,
        out: np.ndarray,
        truth: np.ndarray,
        scored: np.ndarray,
        clear: np.ndarray,
        filled: np.ndarray,
    ) -> None:
        """Add one pair: ``out`` and ``truth`` ``(bands, pixels)``, its pasted pixels ``scored``,
        its other clear pixels ``clear`` and the pasted pixels the default's mask fills
        ``filled`` (the same pixels for every estimator). A band's bias counts the pixels
        finite in every band of the output and the truth (a NaN output has no colour)."""
        self.angles.append(spectral_angle(out[:, scored], truth[:, scored]))
        self.clear_angles.append(spectral_angle(out[:, clear], truth[:, clear]))
        finite = np.isfinite(out).all(axis=0) & np.isfinite(truth).all(axis=0)
        for k, where in enumerate((scored & finite, filled & finite)):
            self.difference[k] += np.sum(out[:, where] - truth[:, where], axis=1, dtype=np.float64)
            self.truth[k] += np.sum(truth[:, where], axis=1, dtype=np.float64)
        self.filled_pixels += int((filled & finite).sum())

    def row(self) -> list[str]:
        """Mean and 95th percentile angle on the pasted pixels, mean on the clear ones, and each
        band's bias (percent) on the pasted pixels and on those the default's mask fills."""
        angles = np.concatenate(self.angles)
        clear = np.concatenate(self.clear_angles)
        bias = 100.0 * self.difference / self.truth
        return [
            f"{np.nanmean(angles):.2f}",
            f"{np.nanpercentile(angles, 95):.2f}",
            f"{np.nanmean(clear):.2f}",
            *(" ".join(f"{b:+.1f}" for b in row) for row in bias),
        ]

    def truth_means(self) -> str:
        """Each band's mean truth (reflectance × 1000) on the pasted pixels the default fills:
        what the biases are shares of."""
        return " ".join(f"{m:.0f}" for m in 1000.0 * self.truth[1] / self.filled_pixels)


class MaskedPair(NamedTuple):
    """One of a site's pasted pairs, source dropped (:func:`cloudlab.sitescore.dropped_pairs`),
    with the target's mask and what the estimators' outputs are scored on."""

    pair: PastedPair
    kept: KeptSeries
    solved: Solved
    codes: np.ndarray  # (1, rows, cols): the target's mask under the post-step
    filled: np.ndarray  # (pixels,): the pasted pixels the mask fills

    def written(self, step: PostStep, frame: tuple[int, int]) -> np.ndarray:
        """The target's output ``(bands, pixels)`` as ``step`` writes it with this mask."""
        k = self.kept
        return written_target(k.D, k.days, k.target, self.solved, self.codes, step, frame)

    def baseline(self, label: str) -> np.ndarray:
        """The target's output ``(bands, pixels)`` of the baseline ``label``."""
        k = self.kept
        return MULTIBAND_BASELINES[label](k.D, k.reference, k.days)[:, :, k.target]


def masked_pairs(site: Site, spec: SolveSpec, step: PostStep) -> Iterator[MaskedPair]:
    """The site's pairs, source dropped, solved with ``spec`` and masked by ``step``'s rule."""
    frame = site.series.frame
    for pair, kept, solved in dropped_pairs(site, [spec]):
        t = kept.target
        codes = solved[spec.name].codes(step.rule, kept.observed[:, t].reshape(1, *frame), t)
        filled = pair.scored & (codes.reshape(-1) != CLEAR)
        yield MaskedPair(pair, kept, solved[spec.name], codes, filled)


def score_site(site: Site, spec: SolveSpec, step: PostStep) -> dict[str, ColourSums]:
    """The colour figures of ``spec`` with ``step`` and of the baselines on ``site``."""
    bands = len(site.series.bands)
    sums = {label: ColourSums(bands) for label in ("chosen", *BASELINES)}
    for m in masked_pairs(site, spec, step):
        p = m.pair
        sums["chosen"].add(m.written(step, site.series.frame), p.truth, p.scored, p.clear, m.filled)
        for label in BASELINES:
            sums[label].add(m.baseline(label), p.truth, p.scored, p.clear, m.filled)
    return sums


def fill_parts(site: Site, spec: SolveSpec, step: PostStep) -> dict[str, np.ndarray]:
    """Each band's bias (percent) on the pasted pixels ``step``'s mask fills on ``site``,
    with the fill written by parts: the ground alone, with the pixel's own departure, with the
    date's offset, with both (``step`` itself, which must have both)."""
    parts = {
        "the ground alone": dataclasses.replace(step, offset=None, between=False),
        "and the pixel's own departure": dataclasses.replace(step, offset=None),
        "and the date's offset": dataclasses.replace(step, between=False),
        "both (the default)": step,
    }
    bands = len(site.series.bands)
    difference = {label: np.zeros(bands) for label in parts}
    truth = np.zeros(bands)
    for m in masked_pairs(site, spec, step):
        # Every part writes the same pixels (the ground, not NaN, wherever the mask fills).
        finite = m.filled & np.isfinite(m.pair.truth).all(axis=0)
        for label, part in parts.items():
            out = m.written(part, site.series.frame)
            difference[label] += np.nansum(out[:, finite] - m.pair.truth[:, finite], axis=1)
        truth += np.sum(m.pair.truth[:, finite], axis=1, dtype=np.float64)
    return {label: 100.0 * d / truth for label, d in difference.items()}


def print_parts(sites: dict[str, Site], spec: SolveSpec, step: PostStep) -> None:
    """The table of :func:`fill_parts` for every site."""
    if step.offset is None or not step.between:
        raise SystemExit("--parts splits a fill with the offset and the interpolation both on")
    print("| site | bands | fill | bias by band, filled (%) |\n|---|---|---|---|")
    for name, site in sites.items():
        bands = ", ".join(site.series.bands)
        for label, bias in fill_parts(site, spec, step).items():
            print(f"| {name} | {bands} | {label} | " + " ".join(f"{b:+.1f}" for b in bias) + " |")


def regional_look(name: str, site: Site, spec: SolveSpec, step: PostStep) -> list[str]:
    """Rows of the ``--regional`` table for ``site`` (``name``): the default's fill and the
    same with the date-wide term (the module's docstring)."""
    frame = site.series.frame
    bands = len(site.series.bands)
    sums = {label: np.zeros(4) for label in ("the default", "with the date-wide term")}
    bias = {label: np.zeros(bands) for label in sums}
    truth = np.zeros(bands)
    median = np.zeros(2)
    for m in masked_pairs(site, spec, step):
        pair, k = m.pair, m.kept
        observation = k.D[:, :, k.target]
        ground = written_ground(k.D, k.days, k.target, m.solved, step)
        kept_pixels = (m.codes.reshape(-1) == CLEAR) & np.isfinite(observation).all(axis=0)
        level = np.zeros(bands)
        if kept_pixels.sum() >= MIN_KEPT:
            level = np.nanmedian(observation[:, kept_pixels] - ground[:, kept_pixels], axis=1)
        filled = m.filled & np.isfinite(pair.truth).all(axis=0)
        grounds = (ground, np.clip(ground + level[:, None], 0.0, 1.0))
        for label, written in zip(sums, grounds, strict=True):
            out = compose_target(observation, written, m.codes, step, frame)
            e = error_sums(out, pair.truth, pair.scored, pair.clear)
            sums[label] += [e["pred_num"], e["pred_den"], e["fid_num"], e["fid_den"]]
            bias[label] += np.nansum(out[:, filled] - pair.truth[:, filled], axis=1)
        truth += np.sum(pair.truth[:, filled], axis=1, dtype=np.float64)
        e = error_sums(m.baseline("temporal-median"), pair.truth, pair.scored, pair.clear)
        median += [e["pred_num"], e["pred_den"]]
    rows = []
    for label, (pn, pd, fn, fd) in sums.items():
        r = np.sqrt(pn / pd)
        tint = " ".join(f"{b:+.1f}" for b in 100.0 * bias[label] / truth)
        ratio = r / np.sqrt(median[0] / median[1])
        rows.append(
            f"| {name} | {label} | {r:.3f} | {ratio:.2f} | {np.sqrt(fn / fd):.3f} | {tint} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", type=Path, default=None, help="a held-out run's folder")
    parser.add_argument("--parts", action="store_true", help="the default's fill by part")
    parser.add_argument("--regional", action="store_true", help="a date-wide term, in sample")
    args = parser.parse_args()
    sites = {name: load_site(name) for name in site_names()}
    spec, step = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig())
    default = f"{spec.name} | {step.name}"
    if args.regional:
        print(f"a date-wide term in the default's fill, in sample: {default}\n")
        print("| site | fill | r | ratio to the median | fidelity r | bias by band, filled (%) |")
        print("|---|---|---|---|---|---|")
        for name, site in sites.items():
            print("\n".join(regional_look(name, site, spec, step)))
        return
    if args.parts:
        print(f"the default's fill by part, in-sample: {default}\n")
        print_parts(sites, spec, step)
        return
    if args.heldout is None:
        picks = dict.fromkeys(sites, default)
        print(f"the default, in-sample: {default}\n")
    else:
        picks, _ = read_picks(args.heldout)
        print(f"each site's candidate chosen on the other sites ({args.heldout})\n")
    print(
        "| site | bands | estimator | angle, pasted (mean, °) | 95th percentile (°) "
        "| angle, clear (mean, °) | bias by band, pasted (%) | bias by band, filled (%) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    levels = {}
    for name, candidate in picks.items():
        solve, rule = candidate.split(" | ")
        try:
            chosen = solve_named(solve)
        except KeyError as error:
            raise SystemExit(f"{args.heldout}: {error.args[0]}") from None
        scored = score_site(sites[name], chosen, step_named(rule))
        bands = ", ".join(sites[name].series.bands)
        levels[name] = (bands, scored["chosen"].truth_means())
        for label, sums in scored.items():
            shown = "held-out choice" if args.heldout and label == "chosen" else label
            shown = "the default" if shown == "chosen" else shown
            print(f"| {name} | {bands} | {shown} | " + " | ".join(sums.row()) + " |")
    print("\nThe truth's mean on the pasted pixels filled (reflectance × 1000), by band:\n")
    print("| site | bands | mean |\n|---|---|---|")
    for name, (bands, means) in levels.items():
        print(f"| {name} | {bands} | {means} |")


if __name__ == "__main__":
    main()
