"""Figures of a run: r and time against λ with the λ bounds, and the best λ against n."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudlab.bestlambda import POOLED
from cloudlab.paper import COLOURS, METHOD_ORDER, PAPER, label
from cloudlab.summary import case_rows, grid_of

__all__ = ["plot_best_lambda", "plot_vs_lambda"]


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (workers and CI have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_vs_lambda(
    summary: pd.DataFrame, trials: pd.DataFrame, image: str, n: int, value: str, path: Path
) -> None:
    """Mean ± 1 sd of r or time against λ (log scale), one panel without MC and one with.

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    trials
        ``trials.csv`` rows: the λ bounds drawn as vertical lines.
    image, n
        The image label and number of dates.
    value
        ``r`` or ``t``.
    path
        The PNG to write.
    """
    plt = _pyplot()
    sub = case_rows(summary, image, n)
    has_mc = bool(sub.mc.any())
    fig, axes = plt.subplots(
        1, 2 if has_mc else 1, figsize=(12 if has_mc else 6.5, 4.5), sharey=True, squeeze=False
    )
    tr = case_rows(trials, image, n)
    for ax, mc in zip(axes[0], [False, True] if has_mc else [False], strict=True):
        for m in METHOD_ORDER:
            g = grid_of(summary, image, n, m, mc)
            if len(g):
                ax.errorbar(
                    g.lam,
                    g[f"{value}_mean"],
                    yerr=g[f"{value}_std"].fillna(0),
                    label=label(m, mc),
                    color=COLOURS[m],
                    marker=".",
                    capsize=2,
                    lw=1,
                )
        if value == "r":
            for base, style in (("cloudy", "--"), ("median", ":"), ("min", "-.")):
                b = sub[sub.method == base]
                if len(b):
                    ax.axhline(
                        float(b.r_mean.iloc[0]), color="grey", ls=style, lw=1, label=label(base)
                    )
        _draw_bounds(ax, tr)
        ax.set_xscale("log")
        ax.set_xlabel("λ (log scale)")
        ax.set_title(f"{image}, n = {n}, {'with' if mc else 'without'} MC")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("r (mean ± 1 sd)" if value == "r" else "time (s, mean ± 1 sd)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _draw_bounds(ax: Any, trials: pd.DataFrame) -> None:
    """The trial-mean λ bounds and λ₀ as labelled vertical lines."""
    for x, name, style in (
        (trials.lower.mean(), "1/√(dn)", ":"),
        (trials.lam0.mean(), "1/√d", "-"),
        (trials.upper.mean(), "‖UVᵀ‖∞", "--"),
        (trials.upper_asymptotic.mean(), "2√3/(√d−√n)", "-."),
    ):
        ax.axvline(x, color="black", ls=style, lw=0.7, alpha=0.6)
        ax.annotate(
            name,
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=7,
        )


def plot_best_lambda(best: pd.DataFrame, fits: pd.DataFrame, path: Path) -> None:
    """√d·λ* against n and against ln(ln n), with the paper's fit and our pooled fit.

    Parameters
    ----------
    best
        What :func:`best_lambdas` returned.
    fits
        What :func:`fit_table` returned.
    path
        The PNG to write.
    """
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    ns = np.linspace(2, max(float(best.n.max()), 3.0), 400)
    for m in METHOD_ORDER:
        g = best[best.method == m].sort_values("n")
        if len(g):
            for ax, x in ((left, g.n), (right, np.log(np.log(g.n)))):
                ax.plot(x, g.lam_star_sqrt_d, marker="o", ls="", color=COLOURS[m], label=label(m))
    curves = [("paper", *PAPER.fit, "red")]
    pooled = fits[fits.fit == POOLED]
    if len(pooled):
        curves.append(("ours (pooled)", float(pooled.a.iloc[0]), float(pooled.b.iloc[0]), "k"))
    for name, a, b, colour in curves:
        y = a * np.log(np.log(ns)) + b
        left.plot(ns, y, color=colour, label=f"{name}: {a:.4f}·ln ln n + {b:.4f}")
        right.plot(np.log(np.log(ns)), y, color=colour, label=name)
    left.set_xlabel("n")
    right.set_xlabel("ln(ln n)")
    for ax in (left, right):
        ax.set_ylabel("√d · λ*")
        ax.legend(fontsize=7)
    fig.suptitle("best λ (minimum mean r) against n")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
