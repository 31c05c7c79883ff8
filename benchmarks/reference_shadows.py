"""Are the real-cloud sites' reference shadows dark, does the default's ground take them, and
what does the default's mask call them?

Per site with a shadow class, over its reference-shadow entries, per band (median):

* the observation over the pixel's clear level on that date: D divided by the pixel's median
  over its reference-clear dates, then by that ratio's median over the date's clear pixels (so a
  date that is darker everywhere, winter or haze, does not count as shadow). No model involved:
  below 1 the reference's shadows are dark;
* the observation over the default solve's ground, D/L: near 1 the ground took the shadow.

Then, per date with at least :data:`MIN_SHADOW` reference shadow pixels, whether its shadows
are **darker than the clear ground** (docs/REAL-CLOUDS.md, "The references' shadows", where
the criterion was written before its F1 was computed): s, the median over the date's shadow
pixels of the bands' mean ratio D / (the pixel's median over its reference-clear dates), at
most :data:`DARKER` times c, the same over the date's reference-clear pixels (1 when it has
fewer than :data:`MIN_CLEAR`); and what the default's mask (``MaskConfig()``, on the whole
series) calls those pixels. Last, each site's shadow F1 on every date and on the dates whose
shadows are darker than the clear ground (at :data:`DARKER` and the two factors beside it),
and the share of reference shadow pixels the mask flags at all (shadow or cloud: both are
filled, so for the output the two differ in nothing). And, with no model at all, how far each
reference shadow pixel lies from a reference cloud of its date (:func:`cloud_distances`): a
shadow whose cloud is outside the frame cannot be paired with it by any test that looks for
its cloud, and the sites are small crops.

On the three sites with shadows at ≤ 60 m every held-out fold chose the default's mask rule,
so their codes here are held-out codes.

``--floor-near SIGMAS`` adds an in-sample look at one more rule: a shadow beside its cloud
(``mask.shadow_near``, its reach and darkening level as the default's) read off the ground
floored at each pixel's median date (:class:`cloudlab.sitescore.Solved` with ``floor`` 0.5)
instead of the capped one, at each of ``SIGMAS``, added to the default's codes where they
say clear: per site the entries it adds, how many of them the reference calls clear and
shadow, and the shadow F1 before and after.

``--flat-dark`` adds another: an entry every band of which is at most ``q`` of the floored
ground, darkened by at least σ (the bands' mean, against the floored ground) and within
``reach`` px of a cloud of its date, is shadow (:data:`FLAT_DARK`: (σ, q, reach)), again added
to the default's codes where they say clear: on the whole series as above, and on the
benchmark's pairs with the source dropped, the prediction r and the fidelity r.

Usage::

    python benchmarks/reference_shadows.py                      # about 3 s
    python benchmarks/reference_shadows.py --floor-near 1.5 3   # and the floored look
    python benchmarks/reference_shadows.py --flat-dark          # and the flat darkening (7 s)
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from typing import NamedTuple

import numpy as np
from scipy import ndimage

from cloudcore._morphology import dilate
from cloudcore.masks import CLEAR, CLOUD, NODATA, SHADOW, classify_scores, whiteness_tests
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import (
    Solved,
    WholeSeries,
    compose_target,
    dropped_pairs,
    error_sums,
    solve_specs,
    whole_series,
    written_ground,
)
from pipeline.config import MaskConfig, SolverConfig

#: A date's reference shadows are darker than the clear ground when s ≤ DARKER · c.
DARKER = 0.8
#: The factors the F1 is also given at.
FACTORS = (0.7, DARKER, 0.9)
#: Reference shadow pixels a date needs to be judged; clear pixels it needs for its own c.
MIN_SHADOW, MIN_CLEAR = 10, 10
#: Distances (px) from a shadow pixel to a cloud of its date counted in the last table.
REACHES = (8, 16, 32)
#: The flat darkening's settings looked at: (σ, every band at most this of the floored ground,
#: reach in px).
FLAT_DARK = ((3.0, 0.8, 16), (3.0, 0.8, 32), (2.0, 0.8, 16), (3.0, 0.7, 16))


def _nanmedian(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pixels or dates with no clear entry
        return np.nanmedian(x, axis=axis)


class ShadowDate(NamedTuple):
    """One date's reference shadows: how dark, and what the default's mask calls them."""

    date: int
    shadow: int  # reference shadow pixels
    cloud: int  # reference cloud pixels
    s: float  # median band-mean ratio to the clear-date median, shadow pixels
    c: float  # the same, the date's clear pixels (1 with fewer than MIN_CLEAR)
    called: dict[str, int]  # what the mask calls the shadow pixels: shadow, cloud, clear


def clear_level(D: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(bands, pixels)``: each band's median of the pixel over its reference-clear dates."""
    clear = reference == CLEAR
    return np.stack([_nanmedian(np.where(clear, band, np.nan), axis=1) for band in D])


def clear_ratio(D: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(pixels, dates)``: the bands' mean of D over the pixel's :func:`clear_level`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.mean(D / clear_level(D, reference)[:, :, None], axis=0))


def shadow_dates(
    D: np.ndarray, reference: np.ndarray, codes: np.ndarray, observed: np.ndarray
) -> list[ShadowDate]:
    """:class:`ShadowDate` of every date with :data:`MIN_SHADOW` observed reference shadows;
    all arrays ``(pixels, dates)`` (``D`` with the bands first)."""
    ratio = clear_ratio(D, reference)
    out = []
    for t in range(reference.shape[1]):
        shadow = (reference[:, t] == SHADOW) & observed[:, t]
        if shadow.sum() < MIN_SHADOW:
            continue
        clear = (reference[:, t] == CLEAR) & observed[:, t]
        c = float(_nanmedian(ratio[clear, t])) if clear.sum() >= MIN_CLEAR else 1.0
        said = codes[shadow, t]
        called = {"shadow": SHADOW, "cloud": CLOUD, "clear": CLEAR}
        out.append(
            ShadowDate(
                t,
                int(shadow.sum()),
                int((reference[:, t] == CLOUD).sum()),
                float(_nanmedian(ratio[shadow, t])),
                c,
                {k: int((said == v).sum()) for k, v in called.items()},
            )
        )
    return out


def shadow_f1(codes: np.ndarray, reference: np.ndarray, valid: np.ndarray) -> float:
    """F1 of the mask's shadow class against the reference's, on the ``valid`` entries."""
    said, real = (codes == SHADOW) & valid, (reference == SHADOW) & valid
    tp = int((said & real).sum())
    wrong = int((said & ~real).sum()) + int((~said & real).sum())
    return 2 * tp / (2 * tp + wrong) if tp + wrong else float("nan")


class SiteSolve(NamedTuple):
    """One site's whole series solved once with the default (``capped``, its ground bounded as
    the pipeline's) and, for the looks that read it, floored at the median date (``floored``,
    the same first solve), with the default's codes ``(pixels, dates)``."""

    name: str
    series: WholeSeries
    capped: Solved
    floored: Solved | None
    codes: np.ndarray

    def frames(self, x: np.ndarray) -> np.ndarray:
        """``(pixels, dates)`` → ``(dates, rows, cols)``."""
        return x.T.reshape(x.shape[1], *self.series.frame)


def solve_sites(floored: bool) -> list[SiteSolve]:
    """Every site solved once (:class:`SiteSolve`), ``floored`` too where a look needs it."""
    spec, rule = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig()).rule
    specs = [spec, dataclasses.replace(spec, floor=0.5)] if floored else [spec]
    out = []
    for name in site_names():
        series = whole_series(name)
        solved = solve_specs(series.D, series.observed, specs, series.frame)
        capped = solved[spec.name]
        low = solved[specs[-1].name] if floored else None
        out.append(SiteSolve(name, series, capped, low, series.codes(capped, rule)))
    return out


def _pooled_table(sites: list[SiteSolve]) -> None:
    """Per site, the pooled darkness of the reference shadows and D/L there."""
    print("| site | shadow entries | D / clear level, per band | D / ground L, per band |")
    print("|---|---|---|---|")
    for site in sites:
        # (bands, pixels, dates), (pixels, dates)
        D, reference = site.series.D, site.series.reference
        shadow, clear = reference == SHADOW, reference == CLEAR
        if not shadow.any():
            continue
        ratio = D / clear_level(D, reference)[:, :, None]
        per_date = np.stack([_nanmedian(np.where(clear, r, np.nan), axis=0) for r in ratio])
        darkness = [
            float(_nanmedian((r / d)[shadow], axis=0)) for r, d in zip(ratio, per_date, strict=True)
        ]
        taken = [
            float(_nanmedian((b / np.maximum(g, 1e-3))[shadow], axis=0))
            for b, g in zip(D, site.capped.ground, strict=True)
        ]
        print(
            f"| {site.name} | {int(shadow.sum())} | {', '.join(f'{v:.2f}' for v in darkness)} "
            f"| {', '.join(f'{v:.2f}' for v in taken)} |"
        )


def _date_tables(sites: list[SiteSolve]) -> None:
    """Per date, the reference shadows' darkness and the mask's calls; per site, the F1."""
    spec, step = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig())
    print(f"\nThe default's mask ({spec.name} | {step.rule_name}):\n")
    print("| site | date | shadow px | cloud px | s | c | s / c | called shadow, cloud, clear |")
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for site in sites:
        series, codes = site.series, site.codes
        if not (series.reference == SHADOW).any():
            continue
        reference = series.scored_reference
        dates = shadow_dates(series.D, reference, codes, series.observed)
        for d in dates:
            calls = ", ".join(str(v) for v in d.called.values())
            print(
                f"| {site.name} | {d.date} | {d.shadow} | {d.cloud} | {d.s:.2f} | {d.c:.2f} "
                f"| {d.s / d.c:.2f} | {calls} |"
            )
        valid = reference != NODATA
        row = [shadow_f1(codes, reference, valid)]
        for factor in FACTORS:
            darker = np.zeros(reference.shape[1], bool)
            darker[[d.date for d in dates if d.s <= factor * d.c]] = True
            row.append(shadow_f1(codes, reference, valid & darker[None, :]))
        real = (reference == SHADOW) & valid
        flagged = float(np.isin(codes[real], (SHADOW, CLOUD)).mean())
        summary.append((site.name, row, flagged, int(real.sum())))
    print(
        "\n| site | shadow F1, every date | "
        + " | ".join(f"F1, dates with s ≤ {f:g} c" for f in FACTORS)
        + " | reference shadows flagged (shadow or cloud) |"
    )
    print("|---" * (len(FACTORS) + 3) + "|")
    for name, row, flagged, count in summary:
        cells = " | ".join(f"{v:.3f}" for v in row)
        print(f"| {name} | {cells} | {flagged:.2f} of {count} |")


def cloud_distances(reference: np.ndarray, frame: tuple[int, int]) -> np.ndarray:
    """Each reference shadow entry's distance (px) to the nearest reference cloud of its date;
    ``inf`` where its date has no cloud in the frame. ``reference`` is ``(pixels, dates)``."""
    frames = reference.T.reshape(reference.shape[1], *frame)
    out = []
    for codes in frames:
        shadow, cloud = codes == SHADOW, codes == CLOUD
        if not shadow.any():
            continue
        if not cloud.any():
            out.append(np.full(int(shadow.sum()), np.inf))
            continue
        out.append(ndimage.distance_transform_edt(~cloud)[shadow])
    return np.concatenate(out) if out else np.zeros(0)


def _distance_table(sites: list[SiteSolve]) -> None:
    """Per site, where its reference shadows lie from their dates' reference clouds."""
    print("\nThe reference shadows and the reference clouds of their dates (no model):\n")
    reaches = " | ".join(f"within {k} px" for k in REACHES)
    print(f"| site | frame | shadow px | on a date with no cloud in the frame | {reaches} |")
    print("|---" * (len(REACHES) + 4) + "|")
    for site in sites:
        series = site.series
        distance = cloud_distances(series.scored_reference, series.frame)
        if distance.size == 0:
            continue
        rows, cols = series.frame
        gsd = load_site(site.name).gsd
        shares = " | ".join(f"{np.mean(distance <= k):.2f}" for k in REACHES)
        print(
            f"| {site.name} | {rows} × {cols} px, {rows * gsd / 1000:g} × {cols * gsd / 1000:g} km "
            f"| {distance.size} | {np.mean(np.isinf(distance)):.2f} | {shares} |"
        )


def _floor_near(sites: list[SiteSolve], sigmas: list[float]) -> None:
    """The in-sample look at a shadow beside its cloud read off the floored ground."""
    rule = PostStep.of(MaskConfig()).rule
    print(
        "\nA shadow beside its cloud read off the ground floored at its median date, in sample:\n"
    )
    print("| site | σ | entries added | of them reference-clear | reference-shadow | shadow F1 |")
    print("|---|---|---|---|---|---|")
    for site in sites:
        assert site.floored is not None  # solve_sites(floored=True)
        capped, codes = site.capped, site.codes
        reference = site.series.scored_reference
        valid = reference != NODATA
        seen = site.frames(site.series.observed)
        white, flat = whiteness_tests(capped.whiteness, rule, capped.bands)
        dark = np.nan_to_num(site.floored.dark).astype(np.float32)
        for sigma in sigmas:
            near = dataclasses.replace(rule, shadow=np.inf, shadow_near=sigma, shadow_flat=0.0)
            found = classify_scores(capped.bright, dark, seen, near, white, flat)
            added = (found.reshape(found.shape[0], -1).T == SHADOW) & (codes == CLEAR)
            both = np.where(added, SHADOW, codes)
            counts = [added & (reference == c) for c in (CLEAR, SHADOW)]
            before, after = (shadow_f1(c, reference, valid) for c in (codes, both))
            print(
                f"| {site.name} | {sigma:g} | {int(added.sum())} | {int(counts[0].sum())} "
                f"| {int(counts[1].sum())} | {before:.3f} → {after:.3f} |"
            )


def _flat_dark_codes(
    codes: np.ndarray,
    floored: Solved,
    D: np.ndarray,
    seen: np.ndarray,
    setting: tuple[float, float, int],
    date: int | None = None,
) -> np.ndarray:
    """``codes`` ``(dates, rows, cols)`` with the flat darkening's shadows added where clear;
    ``D`` ``(bands, pixels, dates)``; ``date`` None: every date, else that one alone."""
    sigma, q, reach = setting
    pick = slice(None) if date is None else slice(date, date + 1)
    n = codes.shape[0]
    dark = np.nan_to_num(floored.dark[pick])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = D[:, :, pick] / np.maximum(floored.ground[:, :, pick], 1e-4)
    darkest = np.nan_to_num(ratio.max(axis=0), nan=np.inf).T.reshape(n, *codes.shape[1:])
    near = dilate(codes == CLOUD, reach)
    added = (dark >= sigma) & (darkest <= q) & (codes == CLEAR) & seen & near
    return np.where(added, SHADOW, codes).astype(codes.dtype)


def _flat_dark(sites: list[SiteSolve]) -> None:
    """The in-sample look at the flat darkening: the whole series' F1, the pairs' r."""
    label = {s: f"{s[0]:g}σ, ≤ {s[1]:g}, {s[2]} px" for s in FLAT_DARK}
    print("\nThe flat darkening, in sample (shadow F1 on every date; pairs: r, fidelity r):\n")
    print("| site | the default | " + " | ".join(label.values()) + " |")
    print("|---" * (len(FLAT_DARK) + 2) + "|")
    for site in sites:
        assert site.floored is not None  # solve_sites(floored=True)
        seen = site.frames(site.series.observed)
        codes = site.frames(site.codes)
        reference = site.frames(site.series.scored_reference)
        valid = reference != NODATA
        f1 = [shadow_f1(codes, reference, valid)] + [
            shadow_f1(
                _flat_dark_codes(codes, site.floored, site.series.D, seen, s), reference, valid
            )
            for s in FLAT_DARK
        ]
        pairs = _flat_dark_pairs(site.name)
        cells = [f"{f:.3f}; {r:.3f}, {fid:.3f}" for f, (r, fid) in zip(f1, pairs, strict=True)]
        print(f"| {site.name} | " + " | ".join(cells) + " |")


def _flat_dark_pairs(name: str) -> list[tuple[float, float]]:
    """(prediction r, fidelity r) over the site's pairs, source dropped: the default, then
    each of :data:`FLAT_DARK`."""
    spec, step = SolveSpec.of(SolverConfig()), PostStep.of(MaskConfig())
    floored_spec = dataclasses.replace(spec, floor=0.5)
    site = load_site(name)
    frame = site.series.frame
    sums = np.zeros((len(FLAT_DARK) + 1, 4))
    for pair, kept, solved in dropped_pairs(site, [spec, floored_spec]):
        t = kept.target
        seen = kept.observed[:, t].reshape(1, *frame)
        codes = solved[spec.name].codes(step.rule, seen, t)
        variants = [codes] + [
            _flat_dark_codes(codes, solved[floored_spec.name], kept.D, seen, s, t)
            for s in FLAT_DARK
        ]
        ground = written_ground(kept.D, kept.days, t, solved[spec.name], step)
        for k, c in enumerate(variants):
            out = compose_target(kept.D[:, :, t], ground, c, step, frame)
            e = error_sums(out, pair.truth, pair.scored, pair.clear)
            sums[k] += [e["pred_num"], e["pred_den"], e["fid_num"], e["fid_den"]]
    return [(float(np.sqrt(a / b)), float(np.sqrt(c / d))) for a, b, c, d in sums]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--floor-near", type=float, nargs="*", default=[], metavar="SIGMAS")
    parser.add_argument("--flat-dark", action="store_true", help="the flat darkening's look")
    args = parser.parse_args()
    sites = solve_sites(floored=bool(args.floor_near) or args.flat_dark)
    _pooled_table(sites)
    _date_tables(sites)
    _distance_table(sites)
    if args.floor_near:
        _floor_near(sites, args.floor_near)
    if args.flat_dark:
        _flat_dark(sites)


if __name__ == "__main__":
    main()
