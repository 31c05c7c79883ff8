"""What the pixel's own departure (``mask.interpolate``) reads, with the ground capped and not:
the in-sample look behind the README's "with ``cap_ground: false`` set ``interpolate: false``".

The interpolation takes each filled entry's departure D − L from the pixel's nearest dates the
mask keeps. Where the mask keeps a cloud, that departure is the cloud's, and it is written into
the fill. Per bundled site, over its pairs with the source dropped (the primary protocol), the
default solve with its ground capped (``solver.cap_ground``, the default) and not, and the
default post-step with the interpolation and without: the prediction r on the pasted pixels,
and the share of the entries the mask keeps, on every date but the target, that the site's
reference calls cloud (the interpolation's evidence; the target's own are pasted). Last, per
site and ground, the dates on which the reference calls at least half the scene cloud
("overcast") and the share of their entries the mask keeps.

In-sample (the default was chosen on all five sites); it says why, not what to choose.

Usage::

    python benchmarks/interpolate_evidence.py    # about 10 s
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cloudcore.kept import kept_codes
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.realdata import CLOUD as REF_CLOUD
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import dropped_pairs, error_sums, written_target
from pipeline.config import MaskConfig, SolverConfig

#: A date the reference calls cloud on at least this share of its observed pixels.
OVERCAST = 0.5


@dataclasses.dataclass
class _Ground:
    """One site's sums under one ground (capped or not)."""

    #: Σ(out − truth)², Σ truth² on the pasted pixels, without and with the interpolation.
    error: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((2, 2)))
    kept: int = 0  #: entries kept on dates other than the target
    kept_cloud: int = 0  #: of them, the reference's cloud
    overcast: int = 0  #: entries of overcast dates
    overcast_kept: int = 0  #: of them, kept

    def r(self, between: bool) -> float:
        num, den = self.error[int(between)]
        return float(np.sqrt(num / den))


def score_site(name: str) -> dict[bool, _Ground]:
    """The sums of :class:`_Ground` over the site's pairs, source dropped, ground capped or not."""
    capped = SolveSpec.of(SolverConfig())
    specs = {
        True: dataclasses.replace(capped, cap=True),
        False: dataclasses.replace(capped, cap=False),
    }
    step = dataclasses.replace(PostStep.of(MaskConfig()), between=True)
    plain = dataclasses.replace(step, between=False)
    site = load_site(name)
    frame = site.series.frame
    sums = {cap: _Ground() for cap in specs}
    for pair, kept, solved in dropped_pairs(site, list(specs.values())):
        t = kept.target
        seen = kept.observed[:, t].reshape(1, *frame)
        others = np.arange(kept.D.shape[2]) != t
        reference = kept.reference[:, others]
        observed = kept.observed[:, others]
        cloud_share = (reference == REF_CLOUD).sum(axis=0) / np.maximum(observed.sum(axis=0), 1)
        overcast = observed & (cloud_share >= OVERCAST)[None, :]
        for cap, spec in specs.items():
            s, g = solved[spec.name], sums[cap]
            for k, each in enumerate((plain, step)):
                codes = s.codes(each.rule, seen, t)
                out = written_target(kept.D, kept.days, t, s, codes, each, frame)
                e = error_sums(out, pair.truth, pair.scored, pair.clear)
                g.error[k] += [e["pred_num"], e["pred_den"]]
            codes = s.codes(step.rule, s.seen)  # (dates, rows, cols), every date
            keep = kept_codes(codes, keep_haze=step.haze_fill == "observed")
            keep = keep.reshape(codes.shape[0], -1).T[:, others] & observed
            g.kept += int(keep.sum())
            g.kept_cloud += int((keep & (reference == REF_CLOUD)).sum())
            g.overcast += int(overcast.sum())
            g.overcast_kept += int((keep & overcast).sum())
    return sums


def main() -> None:
    print(
        "the default's pairs, source dropped; evidence: the entries the mask keeps on every "
        f"date but the target; overcast: dates the reference calls ≥ {OVERCAST:.0%} cloud\n"
    )
    print(
        "| site | ground | r without the interpolation | r with it "
        "| evidence the reference calls cloud | overcast entries kept |"
    )
    print("|---|---|---|---|---|---|")
    for name in site_names():
        for cap, g in score_site(name).items():
            share = g.kept_cloud / g.kept if g.kept else float("nan")
            kept = g.overcast_kept / g.overcast if g.overcast else float("nan")
            print(
                f"| {name} | {'capped' if cap else 'not capped'} | {g.r(False):.3f} "
                f"| {g.r(True):.3f} | {share:.3f} | {kept:.2f} of {g.overcast} |"
            )


if __name__ == "__main__":
    main()
