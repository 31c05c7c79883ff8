"""Which clear pixels does the default change, and why: the mask's false clouds on real sites.

Per site of the held-out benchmark (``cloudlab.sites``), over its (clear target, cloudy source)
pairs with the source dropped (``cloudlab.sitescore``), on the target's reference-clear pixels:
how many the default's mask flags (and so fills), their share of the fidelity error, and the
colour of those it calls cloud or haze against the pasted real clouds' — the shortest band's
brightening D − L over the largest of any band's (clouds are white, haze bluish: near 1; a
ground that greened or was laid bare: near 0). Run with the default post-step without and with
its whiteness test (``mask.white``). Where a site keeps its reference's raw classes (Sen2Cor
SCL), the classes of the flagged pixels and how many lie within 3 px of the reference's snow.

A cloud drifts; the ground stays. So for the clear pixels the default calls cloud or haze, the
bands' mean brightening over the ground (in σ, as the mask reads it) on the kept dates just
before and after the target, against those dates' median over every pixel: a brightening that
is there on the neighbouring dates too is the ground's (snow, a bright field), not a cloud's.
``--figure PATH`` draws, a row a site, its pair with the most such pixels: the dates before and
after, the target, and the target with its flagged clear pixels marked.

``--rho`` solves with another growth of the ALM's step μ than the pipeline's ``solver.rho``
(:func:`cloudcore._growth.mu_growth`; docs/REAL-CLOUDS.md, "The ALM's growth ρ").

Usage::

    python benchmarks/clear_changes.py     # about 5 s
    python benchmarks/clear_changes.py --rho 1.5
    python benchmarks/clear_changes.py --figure docs/figures/clear-changes.png
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from cloudcore._growth import check_growth, mu_growth
from cloudcore._morphology import dilate
from cloudcore.masks import CLOUD, HAZE
from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import dropped_pairs, error_sums, written_target
from pipeline.config import MaskConfig, SolverConfig

SITES_DIR = Path(__file__).resolve().parents[1] / "cloudlab" / "data" / "real-clouds"
#: Sen2Cor SCL's surface classes: 4 vegetation, 5 not vegetated.
SURFACE_CLASSES = (4, 5)
#: Sen2Cor SCL's snow and ice class.
SCL_SNOW = 11
#: How near (px, a square) a flagged clear pixel is counted as beside the reference's snow.
NEAR_SNOW = 3


@dataclasses.dataclass
class _Worst:
    """A site's pair with the most clear pixels called cloud or haze, for ``--figure``: the
    kept dates around the target and the target drawn (``images``, ``titles``), which of them
    is the target, and the pixels ``flagged`` there."""

    site: str
    images: tuple[np.ndarray, ...]
    titles: tuple[str, ...]
    target: int
    flagged: np.ndarray

    @property
    def count(self) -> int:
        return int(self.flagged.sum())


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
    parser.add_argument("--figure", type=Path, default=None, help="draw the worst pair here")
    args = parser.parse_args()
    with mu_growth(args.rho):
        worst = _table()
    if args.figure is not None:
        _draw(worst, args.figure)


def _neighbours(dates: int, target: int) -> list[int]:
    """The kept dates just before and just after ``target`` of ``dates`` (indices), where there
    are."""
    return [u for u in (target - 1, target + 1) if 0 <= u < dates]


def _colour_bands(bands: tuple[str, ...]) -> tuple[list[int], str]:
    """The bands drawn as red, green, blue: those where the site has them, else its first three
    (false colour), and a label that says which."""
    order = [bands.index(b) for b in ("red", "green", "blue") if b in bands]
    if len(order) == 3:
        return order, "true colour"
    order = list(range(min(3, len(bands))))
    return order, "false colour: " + ", ".join(bands[i] for i in order)


def _rgb(values: np.ndarray, order: list[int], top: float) -> np.ndarray:
    """``(bands, rows, cols)`` as an image of the bands ``order``, ``top`` drawn white."""
    rgb = np.moveaxis(values[order], 0, -1)
    return np.clip(np.nan_to_num(rgb) / top, 0.0, 1.0)


def _draw(worst: list[_Worst], path: Path) -> None:
    """One row a site with a flagged clear pixel: its pair with the most (:class:`_Worst`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not worst:
        raise SystemExit("no clear pixel was called cloud or haze: nothing to draw")
    fig, axes = plt.subplots(len(worst), 4, figsize=(12.8, 3.4 * len(worst)), squeeze=False)
    for row, w in zip(axes, worst, strict=True):
        for ax, image, title in zip(row, w.images, w.titles, strict=False):
            ax.imshow(image, interpolation="nearest")
            ax.set_title(f"{w.site}\n{title}", fontsize=8)
        marked = w.images[w.target].copy()
        marked[w.flagged] = (1.0, 0.0, 1.0)
        row[-1].imshow(marked, interpolation="nearest")
        row[-1].set_title(
            f"{w.count} clear pixels the default\ncalls cloud or haze (magenta)", fontsize=8
        )
        for ax in row:
            ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    print(f"figure: {path}")


def _table() -> list[_Worst]:
    spec = SolveSpec.of(SolverConfig())
    worst: list[_Worst] = []
    persistence_lines = []
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
        scl = raw is not None and "SCL" in site.reference_source
        site_worst: _Worst | None = None
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
        # The default's flagged clear pixels on the neighbouring dates: their brightening, the
        # dates' median brightening, and how many lie beside the reference's snow.
        around: dict[str, list[Any]] = {"flagged": [], "dates": [], "near_snow": [0, 0]}
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
                out = written_target(kept.D, kept.days, tt, solved, codes, step, frame)
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
                if step is default:
                    called_cloud = flagged & bright
                    snow = raw if scl else None
                    _around(around, solved, kept, tt, called_cloud, snow, pair.target, frame)
                    most = 0 if site_worst is None else site_worst.count
                    if called_cloud.sum() > most:
                        site_worst = _worst(site, kept, tt, called_cloud)
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
        persistence_lines.append(_persistence_line(name, around))
        worst += [] if site_worst is None else [site_worst]
    print()
    print("\n".join(raw_lines))
    print(
        "\nThe default's clear pixels called cloud or haze, on the kept dates just before and "
        "after the target: their bands' mean brightening (σ), median, against those dates' "
        "median over every pixel\n"
    )
    print("\n".join(persistence_lines))
    return worst


def _around(
    around: dict[str, list[Any]],
    solved: Any,
    kept: Any,
    target: int,
    flagged: np.ndarray,
    raw: np.ndarray | None,
    date: int,
    frame: tuple[int, int],
) -> None:
    """Add one pair's flagged clear pixels' brightening on the neighbouring kept dates."""
    if not flagged.any():
        return
    for u in _neighbours(kept.keep.size, target):
        bright = solved.bright[u].reshape(-1)
        seen = kept.observed[:, u]
        around["flagged"].append(bright[flagged & seen])
        around["dates"].append(bright[seen])
    if raw is not None:
        near = dilate((raw[:, date] == SCL_SNOW).reshape(frame), NEAR_SNOW).reshape(-1)
        around["near_snow"][0] += int((flagged & near).sum())
        around["near_snow"][1] += int(flagged.sum())


def _persistence_line(name: str, around: dict[str, list[Any]]) -> str:
    if not around["flagged"]:
        return f"- {name}: no clear pixel called cloud or haze"
    flagged, dates = np.concatenate(around["flagged"]), np.concatenate(around["dates"])
    line = (
        f"- {name}: {np.nanmedian(flagged):.1f}σ against {np.nanmedian(dates):.1f}σ "
        f"({flagged.size} pixel-dates)"
    )
    near, of = around["near_snow"]
    return line + (f"; within {NEAR_SNOW} px of the reference's snow: {near} of {of}" if of else "")


def _worst(site: Any, kept: Any, target: int, flagged: np.ndarray) -> _Worst:
    """The figure's panels of one pair: the neighbouring kept dates and the ``target`` (an
    index into the kept dates), one stretch for all of them (the target's 98th percentile), so
    their brightness compares."""
    series, frame = site.series, site.series.frame
    date = int(kept.keep[target])
    order = sorted([date, *(int(kept.keep[u]) for u in _neighbours(kept.keep.size, target))])
    bands, colour = _colour_bands(series.bands)
    top = float(np.nanpercentile(series.values[date][bands], 98))
    top = top if np.isfinite(top) and top > 0 else 1.0
    return _Worst(
        site=f"{site.name} ({colour})",
        images=tuple(_rgb(series.values[d], bands, top) for d in order),
        titles=tuple(f"{series.dates[d]}" + (" (target)" if d == date else "") for d in order),
        target=order.index(date),
        flagged=flagged.reshape(frame),
    )


if __name__ == "__main__":
    main()
