"""The paper's tests on a run: MC against no MC, aATM against RPCA, and the λ zones."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from cloudlab.bestlambda import best_lambdas
from cloudlab.paper import ALPHA, METHOD_ORDER
from cloudlab.summary import lam0_position

__all__ = [
    "FAILURE_L_REL",
    "PairedTest",
    "mc_ttests",
    "method_comparison",
    "paired_ttest",
    "zones",
]

#: Mean ‖L‖_F/‖D‖_F below this is "L = 0" (failure zone).
FAILURE_L_REL = 0.01


@dataclass(frozen=True)
class PairedTest:
    """One-sided paired t-test of H0: mean(x − y) ≤ 0 against H1: mean(x − y) > 0.

    Attributes
    ----------
    mean
        Mean of the differences x − y.
    t, p
        t statistic and one-sided p-value.
    ci_low
        Lower end of the one-sided (1 − α) confidence interval [ci_low, ∞) of the mean difference.
    reject
        p < α: the data say x is larger than y on average.
    count
        Number of pairs.
    """

    mean: float
    t: float
    p: float
    ci_low: float
    reject: bool
    count: int


def paired_ttest(x: ArrayLike, y: ArrayLike, alpha: float = ALPHA) -> PairedTest:
    """One-sided paired t-test that x exceeds y on average (the paper's Table "testMC").

    Parameters
    ----------
    x, y
        Paired samples (same trials, same order), e.g. r with MC and r without.
    alpha
        Significance level; the confidence interval has level 1 − α.

    Returns
    -------
    PairedTest
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be 1-D of equal length, got {a.shape}, {b.shape}")
    diff = a - b
    if diff.size < 2:
        mean = float(diff.mean()) if diff.size else math.nan
        return PairedTest(mean, math.nan, math.nan, math.nan, False, int(diff.size))
    if np.all(diff == diff[0]):  # zero variance: t is ±inf or undefined, decide on the mean
        p = 0.0 if diff[0] > 0 else 1.0
        t = math.copysign(math.inf, diff[0]) if diff[0] else math.nan
        return PairedTest(float(diff[0]), t, p, float(diff[0]), p < alpha, int(diff.size))
    with warnings.catch_warnings():
        # Nearly constant differences trip scipy's precision warning; the result is still right.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_1samp(diff, 0.0, alternative="greater")
    ci = res.confidence_interval(confidence_level=1.0 - alpha)
    return PairedTest(
        float(diff.mean()),
        float(res.statistic),
        float(res.pvalue),
        float(ci.low),
        bool(res.pvalue < alpha),
        int(diff.size),
    )


def _paired(results: pd.DataFrame, sel_x: pd.Series, sel_y: pd.Series) -> tuple[Any, Any]:
    """r of two selections of rows, matched by trial (image, n, repeat)."""
    keys = ["image", "n", "repeat"]
    x = results[sel_x].set_index(keys).r
    y = results[sel_y].set_index(keys).r
    joined = pd.concat([x.rename("x"), y.rename("y")], axis=1, join="inner").sort_index()
    return joined.x.to_numpy(), joined.y.to_numpy()


def mc_ttests(results: pd.DataFrame, summary: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Paired one-sided t-tests of r with MC against r without, per (image, n, method).

    Tested at the method's best λ without MC (the paper's "optimal λ") and at λ₀ = 1/√d.
    H0: mean(r_MC − r_noMC) ≤ 0; a small p-value means MC makes r *worse*.

    Parameters
    ----------
    results
        ``results.csv`` rows.
    summary
        What :func:`summarise` returned for them.
    alpha
        Significance level.

    Returns
    -------
    pandas.DataFrame
        One row per (image, n, method, where) with ``where`` ``best`` or ``lam0``.
    """
    rows = []
    best = best_lambdas(summary)
    grid = results[results.lam_kind == "grid"]
    for b in best.itertuples():
        g = grid[(grid.image == b.image) & (grid.n == b.n) & (grid.method == b.method)]
        if not g.mc.any():
            continue
        lam0 = g.lam.to_numpy()[lam0_position(g)]
        for where, lam in (("best", b.lam_star), ("lam0", lam0)):
            at = g.lam == lam
            x, y = _paired(g, at & g.mc, at & ~g.mc)
            t = paired_ttest(x, y, alpha)
            rows.append(
                {
                    "image": b.image,
                    "n": b.n,
                    "method": b.method,
                    "where": where,
                    "lam": float(lam),
                    "lam_sqrt_d": float(g[at].lam_sqrt_d.iloc[0]),
                    "r_mc": float(np.mean(x)),
                    "r_nomc": float(np.mean(y)),
                    "mean_diff": t.mean,
                    "t": t.t,
                    "p": t.p,
                    "ci_low": t.ci_low,
                    "reject_h0": t.reject,
                    "pairs": t.count,
                }
            )
    return pd.DataFrame(rows)


def method_comparison(
    results: pd.DataFrame,
    summary: pd.DataFrame,
    a: str = "aatm",
    b: str = "rpca",
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """Method ``a`` against ``b`` (no MC) at λ₀ and each at its best λ, paired over trials.

    ``reduction`` is 1 − mean r_a / mean r_b; the t-test is H0: mean(r_b − r_a) ≤ 0.

    Parameters
    ----------
    results
        ``results.csv`` rows.
    summary
        What :func:`summarise` returned for them.
    a, b
        The two methods.
    alpha
        Significance level.

    Returns
    -------
    pandas.DataFrame
        One row per (image, n, where) with ``where`` ``lam0`` or ``best``.
    """
    rows = []
    best = best_lambdas(summary).set_index(["image", "n", "method"])
    grid = results[(results.lam_kind == "grid") & ~results.mc]
    for (image, n), g in grid.groupby(["image", "n"], sort=True):
        if not {a, b} <= set(g.method):
            continue
        lam0 = g.lam.to_numpy()[lam0_position(g)]
        cases = {
            "lam0": (lam0, lam0),
            "best": (best.loc[(image, n, a)].lam_star, best.loc[(image, n, b)].lam_star),
        }
        for where, (lam_a, lam_b) in cases.items():
            sel_b = (g.method == b) & (g.lam == lam_b)
            x, y = _paired(g, sel_b, (g.method == a) & (g.lam == lam_a))
            t = paired_ttest(x, y, alpha)
            rows.append(
                {
                    "image": image,
                    "n": int(n),
                    "where": where,
                    "lam_a": float(lam_a),
                    "lam_b": float(lam_b),
                    f"r_{a}": float(np.mean(y)),
                    f"r_{b}": float(np.mean(x)),
                    "reduction": 1.0 - np.mean(y) / np.mean(x),
                    "p": t.p,
                    "ci_low": t.ci_low,
                    "pairs": t.count,
                }
            )
    return pd.DataFrame(rows)


def zones(summary: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Where the failure (L = 0) and clamping (C = 0) zones begin, against the λ bounds.

    The failure zone is the grid λ with mean ‖L‖_F/‖D‖_F < 0.01 (r ≈ 1); its edge is the largest
    such λ. The clamping zone starts at the smallest λ from which C = 0 in every trial at every
    larger grid λ. Bounds are trial means of 1/√(dn), ‖UVᵀ‖_∞ and 2√3/(√d − √n).

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    trials
        ``trials.csv`` rows.

    Returns
    -------
    pandas.DataFrame
        One row per (image, n, method), without MC.
    """
    rows = []
    bounds = trials.groupby(["image", "n"]).agg(
        lower=("lower", "mean"),
        upper=("upper", "mean"),
        upper_sd=("upper", "std"),
        upper_asymptotic=("upper_asymptotic", "mean"),
        lam0=("lam0", "mean"),
        r_cloudy=("r_cloudy", "mean"),
    )
    for (image, n, method), g in summary[(summary.lam_kind == "grid") & ~summary.mc].groupby(
        ["image", "n", "method"], sort=True
    ):
        if method not in METHOD_ORDER:
            continue
        g = g.sort_values("lam")
        bnd = bounds.loc[(image, n)]
        failed = g[g.l_rel < FAILURE_L_REL]
        fail_edge = float(failed.lam.max()) if len(failed) else math.nan
        # Length of the run of C = 0 at the top of the grid.
        clamped = (g.c_nonzero.to_numpy() == 0)[::-1]
        run = int(np.argmin(clamped)) if not clamped.all() else clamped.size
        clamp_start = float(g.lam.to_numpy()[len(g) - run]) if run else math.nan
        r_clamp = float(g.r_mean.to_numpy()[len(g) - run]) if run else math.nan
        rows.append(
            {
                "image": image,
                "n": int(n),
                "method": method,
                "lam0": bnd.lam0,
                "lower": bnd.lower,
                "upper": bnd.upper,
                "upper_sd": bnd.upper_sd,
                "upper_asymptotic": bnd.upper_asymptotic,
                "failure_edge": fail_edge,
                "failure_edge_over_lower": fail_edge / bnd.lower,
                "clamp_start": clamp_start,
                "clamp_start_over_upper": clamp_start / bnd.upper,
                "r_at_clamp_start": r_clamp,
                "r_cloudy": bnd.r_cloudy,
            }
        )
    return pd.DataFrame(rows)
