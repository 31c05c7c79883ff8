"""Markdown tables of a run, laid out like the paper's and set beside its numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cloudlab.paper import ALPHA, METHOD_ORDER, PAPER, label
from cloudlab.summary import case_rows, grid_of, grid_rows, sqrt_d_of, table_lams

__all__ = [
    "best_table",
    "best_vs_n_table",
    "comparison_table",
    "fit_md_table",
    "fmt",
    "fmt_p",
    "md_table",
    "paper_table",
    "paper_vs_ours",
    "rules_table",
    "ttest_table",
    "zones_table",
]


def fmt(v: float, digits: int = 4) -> str:
    """A number with ``digits`` decimals, ``–`` for a missing or infinite one."""
    return "–" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def fmt_p(p: float) -> str:
    """A p-value: scientific notation below 1e-3."""
    return "–" if not np.isfinite(p) else (f"{p:.4e}" if p < 1e-3 else f"{p:.4f}")


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of already formatted cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def paper_table(summary: pd.DataFrame, image: str, n: int, value: str, digits: int = 4) -> str:
    """One of the paper's Tables (mean/sd of r or time) for the 9 λ around λ₀, as markdown.

    Column-wise best is in italics, the overall best in bold, as in the paper; the λ₀ column is
    marked with ‖ ‖. Baseline rows (median, cloudy input) are constant across λ.

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.
    value
        The summary column shown: ``r_mean``, ``r_std``, ``t_mean`` or ``t_std``.
    digits
        Decimals shown.

    Returns
    -------
    str
    """
    lams = table_lams(summary, image, n)
    if not lams:
        return "(no grid λ in this run)"
    sub = case_rows(summary, image, n)
    sqrt_d = sqrt_d_of(summary, image, n)
    methods = [m for m in METHOD_ORDER if m in set(sub.method)]
    order = [(m, True) for m in methods if sub[(sub.method == m)].mc.any()]
    order += [(m, False) for m in methods]
    values = np.full((len(order), len(lams)), np.nan)
    for i, (m, mc) in enumerate(order):
        g = grid_of(summary, image, n, m, mc).set_index("lam")
        for j, lam in enumerate(lams):
            if lam in g.index:
                values[i, j] = g.loc[lam, value]
    cells = _mark_best(values, [[fmt(v, digits) for v in row] for row in values])
    centre = int(np.argmin(np.abs(np.log(np.asarray(lams) * sqrt_d))))
    header = ["λ (×10⁻³) / λ√d"] + [
        (
            f"‖{lam * 1e3:.4f} / {lam * sqrt_d:.3f}‖"
            if j == centre
            else f"{lam * 1e3:.4f} / {lam * sqrt_d:.3f}"
        )
        for j, lam in enumerate(lams)
    ]
    rows = [[label(m, mc), *c] for (m, mc), c in zip(order, cells, strict=True)]
    for base in ("median", "min", "cloudy"):
        b = sub[sub.method == base]
        if len(b):
            v = fmt(float(b[value].iloc[0]), digits)
            rows.append([label(base), *[v] * len(lams)])
    return md_table(header, rows)


def _mark_best(values: np.ndarray, cells: list[list[str]]) -> list[list[str]]:
    """The paper's marks: each column's minimum in italics, the overall minimum in bold."""
    if np.isfinite(values).any():
        for j in range(values.shape[1]):
            if np.isfinite(values[:, j]).any():
                i = int(np.nanargmin(values[:, j]))
                cells[i][j] = f"*{cells[i][j]}*"
        bi, bj = (int(v) for v in np.unravel_index(int(np.nanargmin(values)), values.shape))
        cells[bi][bj] = f"**{cells[bi][bj].strip('*')}**"
    return cells


def paper_vs_ours(summary: pd.DataFrame, image: str, n: int) -> str:
    """The paper's mean r (n = 7) and ours at the same λ·√d, row by row.

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.

    Returns
    -------
    str
        Empty when the run has no grid λ for (image, n).
    """
    lams = table_lams(summary, image, n)
    sub = grid_rows(summary, image, n)
    if not lams:
        return ""
    sqrt_d = sqrt_d_of(summary, image, n)
    ours_cols = [lam * sqrt_d for lam in lams]
    header = ["method", *[f"{v:.3f}" for v in PAPER.lam_sqrt_d]]
    rows = []
    for (m, mc), paper_vals in PAPER.mean_r_n7.items():
        if not ((sub.method == m) & (sub.mc == mc)).any():
            continue
        g = grid_of(summary, image, n, m, mc)
        ours = []
        for target in PAPER.lam_sqrt_d:
            j = int(np.argmin(np.abs(np.log(np.asarray(ours_cols) / target))))
            match = g[np.isclose(g.lam, lams[j])]
            close = abs(math.log(ours_cols[j] / target)) < 0.01 and len(match)
            ours.append(fmt(float(match.r_mean.iloc[0])) if close else "–")
        rows.append([f"{label(m, mc)} paper", *[f"{v:.4f}" for v in paper_vals]])
        rows.append([f"{label(m, mc)} ours", *ours])
    return md_table(header, rows)


def ttest_table(tests: pd.DataFrame, at: str) -> str:
    """The MC t-tests (:func:`mc_ttests`) at ``best`` or ``lam0``, with the paper's beside."""
    sel = tests[tests["where"] == at]
    rows = []
    for t in sel.itertuples():
        paper = PAPER.ttest.get((t.method, t.n)) if at == "best" else None
        rows.append(
            [
                label(t.method),
                str(t.n),
                f"{t.lam_sqrt_d:.3f}",
                fmt(t.r_mc),
                fmt(t.r_nomc),
                fmt(t.mean_diff),
                fmt_p(t.p),
                f"[{fmt(t.ci_low)}, ∞)",
                "rejected" if t.reject_h0 else "kept",
                str(t.pairs),
                f"{fmt_p(paper[0])}, [{paper[1]:.4f}, ∞)" if paper else "–",
            ]
        )
    return md_table(
        [
            "method",
            "n",
            "λ√d",
            "r MC",
            "r no MC",
            "mean diff",
            "p-value",
            f"CI (1−α, α={ALPHA:g})",
            "H0",
            "pairs",
            "paper p, CI",
        ],
        rows,
    )


def zones_table(z: pd.DataFrame) -> str:
    """The zones (:func:`zones`), every λ in units of λ₀."""
    rows = [
        [
            label(t.method),
            str(t.n),
            f"{t.lower / t.lam0:.3f}",
            f"{t.failure_edge / t.lam0:.3f}" if np.isfinite(t.failure_edge) else "none in grid",
            fmt(t.failure_edge_over_lower, 2),
            f"{t.upper / t.lam0:.3f} ± {t.upper_sd / t.lam0:.3f}",
            f"{t.upper_asymptotic / t.lam0:.3f}",
            f"{t.clamp_start / t.lam0:.3f}" if np.isfinite(t.clamp_start) else "none in grid",
            fmt(t.clamp_start_over_upper, 2),
            fmt(t.r_at_clamp_start),
            fmt(t.r_cloudy),
        ]
        for t in z.itertuples()
    ]
    return md_table(
        [
            "method",
            "n",
            "1/√(dn) ·√d",
            "failure edge ·√d",
            "edge / 1/√(dn)",
            "‖UVᵀ‖∞ ·√d",
            "asymptotic ·√d",
            "clamping from ·√d",
            "clamp / ‖UVᵀ‖∞",
            "r there",
            "r cloudy input",
        ],
        rows,
    )


def best_table(best: pd.DataFrame) -> str:
    """The best λ per (image, n, method) (:func:`best_lambdas`)."""
    rows = [
        [
            t.image,
            str(t.n),
            label(t.method),
            f"{t.lam_star:.4e}",
            f"{t.lam_star_sqrt_d:.3f}",
            fmt(t.r_min),
            fmt(t.r_at_lam0),
            "yes" if t.at_edge else "",
        ]
        for t in best.itertuples()
    ]
    return md_table(
        ["image", "n", "method", "λ*", "√d·λ*", "min mean r", "r at λ₀", "at grid edge"], rows
    )


def fit_md_table(fits: pd.DataFrame, paper_name: str) -> str:
    """The fits of √d·λ* in n (:func:`fit_table`), the paper's last under ``paper_name``."""
    rows = [
        [f.fit, f"{f.a:.4f}", f"{f.b:.4f}", f"{f.rmse:.4f}", str(f.points)]
        for f in fits.itertuples()
    ]
    rows.append([paper_name, f"{PAPER.fit[0]:.4f}", f"{PAPER.fit[1]:.4f}", "–", "–"])
    return md_table(["fit", "a", "b", "rmse", "points"], rows)


def comparison_table(comp: pd.DataFrame, sqrt_d: float) -> str:
    """aATM against RPCA (:func:`method_comparison`), with the paper's n = 7 numbers."""
    rows = []
    for c in comp.itertuples():
        paper = (
            "0.1625 vs 0.1996: 18.6 %"
            if c.where == "lam0" and c.n == 7
            else "0.0941 vs 0.1652: 43.0 %"
            if c.where == "best" and c.n == 7
            else "–"
        )
        lam = (
            "λ₀ = 1/√d"
            if c.where == "lam0"
            else f"best: aATM {c.lam_a * sqrt_d:.3f}/√d, RPCA {c.lam_b * sqrt_d:.3f}/√d"
        )
        rows.append(
            [
                str(c.n),
                lam,
                fmt(c.r_aatm),
                fmt(c.r_rpca),
                f"{100 * c.reduction:.1f} %",
                fmt_p(c.p),
                paper,
            ]
        )
    return md_table(
        [
            "n",
            "λ",
            "mean r aATM",
            "mean r RPCA",
            "aATM lower by",
            "p (H0: r_RPCA − r_aATM ≤ 0)",
            "paper (n = 7)",
        ],
        rows,
    )


def rules_table(summary: pd.DataFrame, best: pd.DataFrame, image: str, n: int) -> str | None:
    """Mean r at λ₀, at λ̂* and at the best grid λ, with the temporal median, without MC.

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    best
        What :func:`best_lambdas` returned.
    image, n
        The image label and number of dates.

    Returns
    -------
    str or None
        None when the run has no median baseline or no best λ for (image, n).
    """
    sub = case_rows(summary, image, n)
    med = sub[sub.method == "median"]
    b = case_rows(best, image, n)
    if not (len(med) and len(b)):
        return None
    star = sub[~sub.mc & (sub.lam_kind == "star")].set_index("method")
    star_sqrt_d = f"{star.lam_sqrt_d.iloc[0]:.3f}" if len(star) else "–"
    rows = [
        [
            label(t.method),
            fmt(t.r_at_lam0),
            fmt(float(star.r_mean[t.method])) if t.method in star.index else "–",
            fmt(t.r_min),
            f"{t.lam_star_sqrt_d:.3f}",
        ]
        for t in b.itertuples()
    ]
    rows.append([label("median"), fmt(float(med.r_mean.iloc[0])), "–", "–", "–"])
    low = sub[sub.method == "min"]
    if len(low):
        rows.append([label("min"), fmt(float(low.r_mean.iloc[0])), "–", "–", "–"])
    header = [
        "method",
        "mean r at λ₀",
        f"mean r at λ̂* (λ̂*√d = {star_sqrt_d})",
        "best mean r on the grid",
        "best λ√d",
    ]
    return md_table(header, rows)


def best_vs_n_table(best: pd.DataFrame, ns: Sequence[int]) -> str:
    """√d·λ* per n and method, with the paper's λ̂*·√d (floored at 1/√n) and the floor."""
    pivot = best.pivot_table(index="n", columns="method", values="lam_star_sqrt_d")
    rows = []
    for n in ns:
        paper = (PAPER.fit[0] * math.log(math.log(n)) + PAPER.fit[1]) if n >= 2 else math.nan
        floor = 1 / math.sqrt(n)
        rows.append(
            [
                str(n),
                *[f"{pivot.loc[n, m]:.3f}" if m in pivot.columns else "–" for m in METHOD_ORDER],
                f"{max(paper, floor):.3f}",
                f"{floor:.3f}",
            ]
        )
    return md_table(["n", *[label(m) for m in METHOD_ORDER], "paper λ̂*·√d", "1/√n"], rows)
