"""The best λ: the grid λ of minimum mean r, and its fit √d·λ* = a·ln(ln n) + b in n."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from cloudlab.paper import METHOD_ORDER, label
from cloudlab.summary import lam0_position

__all__ = ["POOLED", "best_lambdas", "fit_best_lambda", "fit_table"]

#: Name of the fit over every method's best λ in :func:`fit_table`.
POOLED = "all methods (pooled)"


def best_lambdas(summary: pd.DataFrame, *, mc: bool = False) -> pd.DataFrame:
    """λ* = the grid λ with the minimum mean r, per (image, n, method).

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    mc
        Best λ of the runs with the MC post-step instead of those without.

    Returns
    -------
    pandas.DataFrame
        Columns ``image n method lam_star lam_star_sqrt_d r_min r_at_lam0 at_edge``; ``at_edge``
        marks a minimum at the end of the grid (the true λ* may lie outside it).
    """
    rows = []
    grid = summary[
        (summary.lam_kind == "grid") & (summary.mc == mc) & summary.method.isin(METHOD_ORDER)
    ]
    for (image, n, method), g in grid.groupby(["image", "n", "method"], sort=True):
        g = g.sort_values("lam").reset_index(drop=True)
        i = int(g.r_mean.idxmin())
        at0 = g.iloc[lam0_position(g)]
        rows.append(
            {
                "image": image,
                "n": int(n),
                "method": method,
                "lam_star": float(g.lam[i]),
                "lam_star_sqrt_d": float(g.lam_sqrt_d[i]),
                "r_min": float(g.r_mean[i]),
                "r_at_lam0": float(at0.r_mean),
                "at_edge": i in (0, len(g) - 1),
            }
        )
    return pd.DataFrame(rows)


def fit_best_lambda(n: ArrayLike, lam_sqrt_d: ArrayLike) -> tuple[float, float]:
    """Least-squares fit of √d·λ* = a·ln(ln n) + b, the paper's form (eq. bestlambda).

    Parameters
    ----------
    n
        Numbers of dates (≥ 2).
    lam_sqrt_d
        √d·λ* for each n.

    Returns
    -------
    (a, b)
        Slope and intercept; the paper has (−0.5682, 1.0747).
    """
    x = np.log(np.log(np.asarray(n, dtype=np.float64)))
    y = np.asarray(lam_sqrt_d, dtype=np.float64)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError("fit_best_lambda needs at least two different n")
    a, b = np.polyfit(x, y, 1)
    return float(a), float(b)


def fit_table(best: pd.DataFrame) -> pd.DataFrame:
    """The (a, b) fits of √d·λ* = a ln ln n + b, per method and pooled over methods.

    Minima at a grid edge are left out (the true λ* may lie beyond the grid); a method with
    fewer than two n left is not fitted.

    Parameters
    ----------
    best
        What :func:`best_lambdas` returned.

    Returns
    -------
    pandas.DataFrame
        Columns ``fit a b rmse points``.
    """
    rows = []
    usable = best[~best.at_edge]
    groups = [(label(m), usable[usable.method == m]) for m in METHOD_ORDER]
    groups.append((POOLED, usable))
    for name, g in groups:
        if g.n.nunique() < 2:
            continue
        a, b = fit_best_lambda(g.n.to_numpy(), g.lam_star_sqrt_d.to_numpy())
        pred = a * np.log(np.log(g.n.to_numpy())) + b
        rmse = float(np.sqrt(np.mean((pred - g.lam_star_sqrt_d.to_numpy()) ** 2)))
        rows.append({"fit": name, "a": a, "b": b, "rmse": rmse, "points": len(g)})
    return pd.DataFrame(rows)
