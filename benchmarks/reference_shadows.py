"""Are the real-cloud sites' reference shadows dark, and does the default's ground take them?

Per site with a shadow class, over its reference-shadow entries, per band (median):

* the observation over the pixel's clear level on that date: D divided by the pixel's median
  over its reference-clear dates, then by that ratio's median over the date's clear pixels (so a
  date that is darker everywhere, winter or haze, does not count as shadow). No model involved:
  below 1 the reference's shadows are dark;
* the observation over the default solve's ground, D/L: near 1 the ground took the shadow.

Usage::

    python benchmarks/reference_shadows.py      # about 30 s
"""

from __future__ import annotations

import warnings

import numpy as np

from cloudcore.masks import CLEAR, SHADOW
from cloudlab.candidates import SolveSpec
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import site_arrays, solve_specs
from pipeline.config import SolverConfig


def _nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pixels or dates with no clear entry
        return np.nanmedian(x, axis=axis)


def main() -> None:
    spec = SolveSpec.of(SolverConfig())
    print("| site | shadow entries | D / clear level, per band | D / ground L, per band |")
    print("|---|---|---|---|")
    for name in site_names():
        site = load_site(name)
        D, reference, _ = site_arrays(site)  # (bands, pixels, dates), (pixels, dates)
        shadow, clear = reference == SHADOW, reference == CLEAR
        if not shadow.any():
            continue
        level = np.stack([_nanmedian(np.where(clear, band, np.nan), axis=1) for band in D])
        ratio = D / level[:, :, None]
        per_date = np.stack([_nanmedian(np.where(clear, r, np.nan), axis=0) for r in ratio])
        darkness = [
            float(_nanmedian((r / d)[shadow], axis=0)) for r, d in zip(ratio, per_date, strict=True)
        ]
        observed = np.isfinite(D).all(axis=0)
        ground = solve_specs(D, observed, [spec], site.series.frame)[spec.name].ground
        taken = [
            float(_nanmedian((b / np.maximum(g, 1e-3))[shadow], axis=0))
            for b, g in zip(D, ground, strict=True)
        ]
        print(
            f"| {name} | {int(shadow.sum())} | {', '.join(f'{v:.2f}' for v in darkness)} "
            f"| {', '.join(f'{v:.2f}' for v in taken)} |"
        )


if __name__ == "__main__":
    main()
