"""λ chosen from the scene itself: its own mask's clouds pasted on its own clear dates (#44,
item 3).

The default scales λ̂* by a constant (``solver.lam_scale``, 1.4) that every fold of the
held-out benchmark chose. A scene could instead choose its own λ the way the benchmark scores
one, without a reference mask: solve the whole series once with the default, take the
default's own mask, pick (clear target, cloudy source) pairs from that mask by the benchmark's
rules (:data:`cloudlab.sitescore.PAIRS`), paste the source's flagged pixels onto the target in
every band, drop the source, and solve again with each λ scale of ``--scales``. The scene's
choice is the scale of least loss on those pseudo-pairs (the benchmark's own loss,
:func:`cloudlab.heldout.loss`'s: r_pred / r_median + 10 · max(0, r_fid − 0.03), here with
"clear" meaning the scene's own mask's clear). No reference is read by the choice.

Per bundled site and scale, the script prints both sides: the scores against the reference
(the benchmark's pairs, source dropped, the default post-step) and the scores on the
pseudo-pairs; then per site the scale each side would choose, and the reference scores of the
scene's choice against those of the fixed default. The scene's choice reads nothing of the
site's reference and nothing of the other sites, so for λ its reference scores are held-out
figures (the only choices made across sites are the scales offered and the pairs' rules; the
mask and composition are the default's, on both sides).

Usage::

    python benchmarks/scene_lambda.py                       # about 45 s
    python benchmarks/scene_lambda.py --scales 0.7 1 1.4 2
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np

from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.heldout import FIDELITY_LIMIT
from cloudlab.realpaste import choose_pairs
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import PAIRS, pasted_pair, site_arrays, solve_series, whole_series
from pipeline.config import MaskConfig, SolverConfig

DEFAULT_SOLVE = SolveSpec.of(SolverConfig())
DEFAULT_STEP = PostStep.of(MaskConfig())
SCALES = (0.5, 0.7, 1.0, 1.4, 2.0, 3.0)
#: The pairs of a site, as the held-out benchmark takes them.
PAIR_COUNT, PAIR_SEED = 4, 0


@dataclasses.dataclass(frozen=True)
class Scores:
    """Prediction and fidelity r of one solve over a set of pairs, and the benchmark's loss."""

    pred: float
    fid: float
    median: float  # the temporal median's prediction r on the same pixels

    @property
    def loss(self) -> float:
        """r_pred / r_median + 10 · max(0, r_fid − 0.03), as :func:`cloudlab.heldout.loss`."""
        return self.pred / self.median + 10 * max(0.0, self.fid - FIDELITY_LIMIT)


def pair_scores(
    D: np.ndarray,
    codes: np.ndarray,
    days: np.ndarray,
    frame: tuple[int, int],
    pairs: list[tuple[int, int]],
    spec: SolveSpec,
) -> Scores:
    """``spec``'s scores over ``pairs``, each the source's ``codes`` cloud and shadow pasted on
    the target and the source dropped, pooled over pairs and bands; the fidelity is 0 where the
    targets have no other clear pixel."""
    sums = dict.fromkeys(("pred_num", "pred_den", "fid_num", "fid_den", "m_num", "m_den"), 0.0)
    for target, source in pairs:
        kept = pasted_pair(D, codes, target, source).kept(days, "drop-source")
        solved = solve_series(kept.D, kept.observed, spec, frame)
        rows = kept.rows(frame, {"default": solved}, [DEFAULT_STEP])
        mine = next(r for r in rows if r["solve"] == "default")
        median = next(r for r in rows if r["solve"] == "temporal-median")
        for key in ("pred_num", "pred_den", "fid_num", "fid_den"):
            sums[key] += mine[key]
        sums["m_num"] += median["pred_num"]
        sums["m_den"] += median["pred_den"]
    fid = math.sqrt(sums["fid_num"] / sums["fid_den"]) if sums["fid_den"] else 0.0
    return Scores(
        math.sqrt(sums["pred_num"] / sums["pred_den"]),
        fid,
        math.sqrt(sums["m_num"] / sums["m_den"]),
    )


def own_codes(name: str) -> np.ndarray:
    """The default's own mask of the site's whole series (``(pixels, dates)``, the reference's
    codes: clear, cloud, shadow, no data)."""
    series = whole_series(name)
    solved = solve_series(series.D, series.observed, DEFAULT_SOLVE, series.frame)
    return series.codes(solved, DEFAULT_STEP.rule)


def score_site(name: str, scales: tuple[float, ...]) -> dict[float, tuple[Scores, Scores]]:
    """Per scale: (scores against the reference, scores on the scene's own pseudo-pairs)."""
    site = load_site(name)
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    own = own_codes(name)
    reference_pairs = choose_pairs(reference, count=PAIR_COUNT, seed=PAIR_SEED, **PAIRS)
    own_pairs = choose_pairs(own, count=PAIR_COUNT, seed=PAIR_SEED, **PAIRS)
    out = {}
    for scale in scales:
        spec = dataclasses.replace(DEFAULT_SOLVE, scale=scale)
        out[scale] = (
            pair_scores(D, reference, days, frame, reference_pairs, spec),
            pair_scores(D, own, days, frame, own_pairs, spec),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=list(SCALES))
    parser.add_argument("--sites", nargs="+", default=None)
    args = parser.parse_args()
    scales = tuple(args.scales)
    fixed = DEFAULT_SOLVE.scale
    if fixed not in scales:
        parser.error(f"--scales must include the default's {fixed:g}")
    started = time.perf_counter()
    print("| site | λ scale | r (reference) | fidelity | loss | r (own pairs) | fidelity | loss |")
    print("|---|---|---|---|---|---|---|---|")
    chosen = {}
    for name in args.sites or site_names():
        by_scale = score_site(name, scales)
        for scale, (ref, own) in by_scale.items():
            print(
                f"| {name} | {scale:g} | {ref.pred:.4f} | {ref.fid:.4f} | {ref.loss:.3f} | "
                f"{own.pred:.4f} | {own.fid:.4f} | {own.loss:.3f} |",
                flush=True,
            )
        chosen[name] = by_scale
    print(
        "\n| site | the reference's choice | the scene's choice | its r, fidelity | "
        f"the default's ({fixed:g}) r, fidelity |"
    )
    print("|---|---|---|---|---|")
    picks = []
    for name, by_scale in chosen.items():
        best_ref = min(scales, key=lambda s: by_scale[s][0].loss)
        best_own = min(scales, key=lambda s: by_scale[s][1].loss)
        mine, default = by_scale[best_own][0], by_scale[fixed][0]
        picks.append((mine, default))
        print(
            f"| {name} | {best_ref:g} | {best_own:g} | {mine.pred:.4f}, {mine.fid:.4f} | "
            f"{default.pred:.4f}, {default.fid:.4f} |"
        )
    mean = np.mean([[m.pred, m.fid, d.pred, d.fid] for m, d in picks], axis=0)
    print(
        f"| mean | | | {mean[0]:.4f}, {mean[1]:.4f} | {mean[2]:.4f}, {mean[3]:.4f} |\n"
        f"({time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
