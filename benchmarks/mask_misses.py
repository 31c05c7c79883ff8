"""Where the default's error on pasted real clouds comes from: what its mask misses, or its fill.

Per site of the held-out benchmark (``cloudlab.sites``), over its (clear target, cloudy source)
pairs with the source dropped (``cloudlab.sitescore``, the primary protocol), the default solve
and post-step (``SolverConfig()``, ``MaskConfig()``). The pasted pixels the default's mask calls
clear keep their observation, which is the pasted cloud or shadow itself; those it flags get the
fill (the ground plus the date's offset). The table splits the prediction error between the two,
by the source reference's class of the pasted pixel (cloud, shadow), and gives the r the same
fill would have if the mask had flagged every pasted pixel: what a perfect mask would leave.
The temporal median's r is beside it (the issue's ratio is against it).

A second table scores the default with each of :data:`VARIANTS` of its mask rule (lower
thresholds, growth, a shadow's edge, white clouds, a shadow beside its cloud or none): the
pasted pixels missed, the prediction r and the fidelity r (on the target's other
reference-clear pixels), so the trade between the mask's recall and the clear pixels it
changes is in numbers.

A third table asks which of the missed pasted pixels carry anything a mask could see. A pasted
pixel is the source date's observation; it departs from the target's truth by cloud or shadow,
and also by whatever the ground did between the two dates. Per pair, the two dates' **clear
difference** is the :data:`GROUND_QUANTILE` th percentile, over the pixels the reference calls
clear on both dates, of the bands' mean |source − target|; a pasted pixel departing from the
truth by no more than that is, pixel by pixel, no different from ground that changed (pairs
with fewer than :data:`MIN_BOTH_CLEAR` such pixels have none: every pasted pixel counts as
departing). The table gives the missed pixels within the clear difference and their share of
the error; those within :data:`EDGE` px inside the edge of the source's flags (where Fmask,
which grows its own, put pixels its detector did not find); and on the pasted pixels beyond
the clear difference the default's r, its r had the mask flagged every pasted pixel, and the
temporal median's.

In-sample: the default was chosen on all five sites (docs/REAL-CLOUDS.md); this says where its
error is, not what to choose.

With ``--years`` it scores the given years of the sites instead of their chosen years
(``NAME:YEAR``, :func:`cloudlab.sites.year_of`: held out in time), and with ``--solve`` one of
:data:`cloudlab.scene_choice.CANDIDATES` instead of the default solve.

Usage::

    python benchmarks/mask_misses.py     # about 4 s
    python benchmarks/mask_misses.py --years p035r032-landsat:2009 s2_nrt_romania_10m:2018
    python benchmarks/mask_misses.py --years p035r032-landsat:2009 --solve "rpca x1"
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from cloudcore.masks import CLEAR, CLOUD, SHADOW
from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.scene_choice import CANDIDATES
from cloudlab.sites import Site, load_site, site_names, year_of
from cloudlab.sitescore import (
    KeptSeries,
    PastedPair,
    Solved,
    compose_target,
    dropped_pairs,
    error_sums,
    site_arrays,
    written_ground,
)
from pipeline.config import MaskConfig, SolverConfig

#: Percentile of the two dates' clear difference a pasted pixel must depart by to count as
#: cloud or shadow a mask could see (the third table).
GROUND_QUANTILE = 95
#: Pixels clear on both dates a pair needs for its clear difference.
MIN_BOTH_CLEAR = 10
#: Depth (px) inside the source's reference flags counted as their edge (the third table):
#: Fmask's buffer on the Landsat sites (``cloudlab.sites.REFERENCE_BUFFERS``).
EDGE = 3

#: The source reference's classes the pasted pixels are split by.
PASTED = {"cloud": CLOUD, "shadow": SHADOW}

#: Changes to the default's mask rule scored in the second table: the held-out grid's lower
#: thresholds and growth, the shadow edges ``benchmarks/mask_stage.py`` chose among, and the
#: default's mask before white clouds (no white clouds, whiteness test 0.2) and with the third
#: stage's stricter whiteness test (0.3), shadows beside their clouds (docs/REAL-CLOUDS.md,
#: "A shadow beside its cloud"), and a date's brightening level ("A date's brightening level").
VARIANTS: tuple[dict[str, Any], ...] = (
    {},
    {"cloud": 4.0},
    {"cloud": 3.0},
    {"shadow": 2.0},
    {"grow": 1},
    {"cloud": 4.0, "shadow": 2.0, "grow": 1},
    {"shadow_edge": 2.0},
    {"shadow_edge": 1.5},
    {"white_cloud": 0.0, "white": 0.2},
    {"white": 0.3},
    {"shadow_near": 0.0},
    {"shadow_near": 2.0, "near_reach": 8},
    {"shadow_near": 2.0, "near_reach": 16},
    {"shadow_near": 1.5, "near_reach": 8},
    {"shadow_near": 1.5, "near_reach": 16},
    {"shadow_near": 1.0, "near_reach": 16},
    {"shadow_near": 1.5, "near_reach": 32},
    {"bright_level": 16, "level_below": 3.0},
    {"bright_level": 32, "level_below": 3.0},
    {"bright_level": 16, "level_below": 6.0},
    {"bright_level": 32, "level_below": 6.0},
    {"bright_level": 16, "level_below": 3.0, "cloud": 4.0},
    {"bright_level": 32, "level_below": 6.0, "cloud": 4.0},
)


@dataclass
class _Sums:
    """Σ(out − truth)² and Σ truth² of a set of pixels, pooled over pairs and bands."""

    error: float = 0.0
    truth: float = 0.0
    pixels: int = 0

    def add(self, out: np.ndarray, truth: np.ndarray, where: np.ndarray) -> None:
        """Add ``out`` against ``truth`` (bands, pixels) on the pixels ``where``, as the
        benchmark's prediction sums (:func:`cloudlab.sitescore.error_sums`: NaN counts as 0)."""
        sums = error_sums(out, truth, where, np.zeros_like(where))
        self.error += sums["pred_num"]
        self.truth += sums["pred_den"]
        self.pixels += int(where.sum())

    @property
    def r(self) -> float:
        return float(np.sqrt(self.error / self.truth)) if self.truth else float("nan")


@dataclass
class _Site:
    """One site's sums under one post-step: every pasted pixel, those missed by class, the fill
    everywhere, the target's other clear pixels (fidelity)."""

    pasted: _Sums = field(default_factory=_Sums)
    missed: dict[str, _Sums] = field(default_factory=lambda: {k: _Sums() for k in PASTED})
    of_class: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PASTED, 0))
    filled_everywhere: _Sums = field(default_factory=_Sums)
    fidelity: _Sums = field(default_factory=_Sums)

    @property
    def missed_pixels(self) -> int:
        return sum(m.pixels for m in self.missed.values())


def clear_difference(D: np.ndarray, reference: np.ndarray, source: int, target: int) -> float:
    """The :data:`GROUND_QUANTILE` th percentile of the bands' mean |D_source − D_target| over
    the pixels ``reference`` (pixels, dates; the series before pasting) calls clear on both
    dates; NaN with fewer than :data:`MIN_BOTH_CLEAR` of them. ``D`` is (bands, pixels, dates)."""
    both = (reference[:, source] == CLEAR) & (reference[:, target] == CLEAR)
    if both.sum() < MIN_BOTH_CLEAR:
        return float("nan")
    difference = np.nanmean(np.abs(D[:, both, source] - D[:, both, target]), axis=0)
    return float(np.nanpercentile(difference, GROUND_QUANTILE))


@dataclass
class _Departure:
    """One site's pasted pixels split by whether they depart from the truth beyond the two
    dates' clear difference (:func:`clear_difference`), under one post-step."""

    missed_within: _Sums = field(default_factory=_Sums)
    missed_at_edge: int = 0
    beyond: _Sums = field(default_factory=_Sums)
    beyond_filled: _Sums = field(default_factory=_Sums)
    beyond_median: _Sums = field(default_factory=_Sums)

    def add(
        self,
        pair: PastedPair,
        frame: tuple[int, int],
        limit: float,
        out: np.ndarray,
        filled: np.ndarray,
        missed: np.ndarray,
        median: np.ndarray,
    ) -> None:
        """Add one pair: its output ``out``, the same with every pasted pixel ``filled``, the
        pasted pixels ``missed``, the temporal ``median``; ``limit`` its clear difference."""
        departure = np.nanmean(np.abs(pair.D[:, :, pair.target] - pair.truth), axis=0)
        within = departure <= limit  # all False where the pair has no clear difference
        beyond = pair.scored & ~within
        self.missed_within.add(out, pair.truth, missed & within)
        self.missed_at_edge += int((missed & _edge(pair, frame)).sum())
        self.beyond.add(out, pair.truth, beyond)
        self.beyond_filled.add(filled, pair.truth, beyond)
        self.beyond_median.add(median, pair.truth, beyond)


def _edge(pair: PastedPair, frame: tuple[int, int]) -> np.ndarray:
    """``(pixels,)``: within :data:`EDGE` px (chessboard) of the edge of the source's reference
    cloud and shadow, inside them: where a reference that grows its own (Fmask's 7 × 7
    square) put pixels its detector did not find."""
    flagged = np.isin(pair.reference[:, pair.source], tuple(PASTED.values())).reshape(frame)
    depth = ndimage.distance_transform_cdt(flagged, metric="chessboard")
    return np.asarray((flagged & (depth <= EDGE)).reshape(-1))


def score_site(
    site: Site, spec: SolveSpec, steps: list[PostStep]
) -> tuple[list[_Site], _Sums, _Departure]:
    """The sums of :class:`_Site` over the site's pairs, source dropped, for each post-step
    (one solve per pair serves them all), the temporal median's on the pasted pixels, and the
    first post-step's pasted pixels split by their departure (:class:`_Departure`)."""
    frame = site.series.frame
    D, reference, _ = site_arrays(site)
    sums = [_Site() for _ in steps]
    median = _Sums()
    departure = _Departure()
    for pair, kept, solved in dropped_pairs(site, [spec]):
        outputs = [
            _score_pair(pair, kept, solved[spec.name], frame, step, site_sums)
            for step, site_sums in zip(steps, sums, strict=True)
        ]
        baseline = MULTIBAND_BASELINES["temporal-median"](kept.D, kept.reference, kept.days)
        median.add(baseline[:, :, kept.target], pair.truth, pair.scored)
        limit = clear_difference(D, reference, pair.source, pair.target)
        departure.add(pair, frame, limit, *outputs[0], baseline[:, :, kept.target])
    return sums, median, departure


def _score_pair(
    pair: PastedPair,
    kept: KeptSeries,
    solved: Solved,
    frame: tuple[int, int],
    step: PostStep,
    sums: _Site,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Add one pasted pair's sums, its output composed by the post-step ``step``; return the
    output, the output with every pasted pixel filled, and the pasted pixels missed."""
    t = kept.target
    seen = kept.observed[:, t].reshape(1, *frame)
    observation = kept.D[:, :, t]
    ground = written_ground(kept.D, kept.days, t, solved, step)
    codes = solved.codes(step.rule, seen, t)
    everywhere = codes.copy()
    everywhere.reshape(-1)[pair.scored] = CLOUD

    out = compose_target(observation, ground, codes, step, frame)
    missed = pair.scored & (codes.reshape(-1) == CLEAR)
    sums.pasted.add(out, pair.truth, pair.scored)
    sums.fidelity.add(out, pair.truth, pair.clear)
    for label, code in PASTED.items():
        of_class = pair.scored & (pair.reference[:, pair.target] == code)
        sums.of_class[label] += int(of_class.sum())
        sums.missed[label].add(out, pair.truth, of_class & missed)
    filled = compose_target(observation, ground, everywhere, step, frame)
    sums.filled_everywhere.add(filled, pair.truth, pair.scored)
    return out, filled, missed


def _departure_table(scored: dict[str, tuple[list[_Site], _Sums, _Departure]]) -> None:
    print(
        "\nThe missed pasted pixels against the two dates' clear difference "
        f"({GROUND_QUANTILE}th percentile):\n"
    )
    print(
        "| site | missed | of them within the clear difference | their share of the error "
        f"| missed within {EDGE} px of the flags' edge "
        "| pasted beyond it | r there | r there, every pasted pixel filled "
        "| temporal median there | ratio there | ratio there, filled |"
    )
    print("|---" * 11 + "|")
    for name, (sums, _, d) in scored.items():
        s = sums[0]
        within = d.missed_within
        share = within.error / s.pasted.error if s.pasted.error else 0.0
        b, f, m = d.beyond, d.beyond_filled, d.beyond_median
        print(
            f"| {name} | {s.missed_pixels} | {within.pixels} | {share:.0%} | {d.missed_at_edge} "
            f"| {b.pixels} | {b.r:.3f} | {f.r:.3f} | {m.r:.3f} | {b.r / m.r:.2f} "
            f"| {f.r / m.r:.2f} |"
        )


def _label(change: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in change.items()) or "the default"


def sites(years: list[str] | None) -> dict[str, Site]:
    """The sites scored, by label: every site's chosen year, or the ``NAME:YEAR`` given."""
    if not years:
        return {name: load_site(name) for name in site_names()}
    out = {}
    for given in years:
        name, year = given.rsplit(":", 1)
        site = year_of(load_site(name, window=False), int(year))
        if site.series.dates.size == 0:
            raise SystemExit(f"--years {given}: {name} holds no date in {year}")
        out[f"{name} {year}"] = site
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--years", nargs="+", default=None, help="NAME:YEAR, held out in time")
    parser.add_argument("--solve", default=None, choices=list(CANDIDATES), help="not the default")
    args = parser.parse_args()
    spec = SolveSpec.of(SolverConfig()) if args.solve is None else CANDIDATES[args.solve]
    step = PostStep.of(MaskConfig())
    steps = [step.with_rule(**change) for change in VARIANTS]
    print(f"the solve: {spec.name} | {step.name}; pairs with the source dropped\n")
    scored = {label: score_site(site, spec, steps) for label, site in sites(args.years).items()}
    print(
        "| site | r | pasted cloud missed | its share of the error | pasted shadow missed "
        "| its share of the error | r, every pasted pixel filled | temporal median | ratio "
        "| ratio, every pasted pixel filled |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (sums, median_sums, _) in scored.items():
        s = sums[0]
        cells = []
        for label in PASTED:
            m = s.missed[label]
            share = m.error / s.pasted.error if s.pasted.error else 0.0
            cells += [f"{m.pixels} of {s.of_class[label]}", f"{share:.0%}"]
        median = median_sums.r
        print(
            f"| {name} | {s.pasted.r:.3f} | {' | '.join(cells)} | {s.filled_everywhere.r:.3f} "
            f"| {median:.3f} | {s.pasted.r / median:.2f} | {s.filled_everywhere.r / median:.2f} |"
        )
    print("\nThe mask rule changed (pasted pixels missed; prediction r; fidelity r):\n")
    print("| rule | " + " | ".join(scored) + " |")
    print("|---" * (len(scored) + 1) + "|")
    for k, change in enumerate(VARIANTS):
        cells = [
            f"{sums[k].missed_pixels} of {sum(sums[k].of_class.values())}; "
            f"{sums[k].pasted.r:.3f}; {sums[k].fidelity.r:.3f}"
            for sums, _, _ in scored.values()
        ]
        print(f"| {_label(change)} | " + " | ".join(cells) + " |")
    _departure_table(scored)


if __name__ == "__main__":
    main()
