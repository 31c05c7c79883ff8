"""Tables, figures and tests of an experiment run, in the form of the paper's, and EXPERIMENTS.md.

Reads the ``results.csv`` / ``trials.csv`` written by :mod:`pipeline.experiment` and produces, in
the run's output directory:

* ``summary.csv``: mean and sd of r, time, iterations per (image, n, method, MC, λ);
* ``tables.md``: the paper's Tables of mean/sd r and mean/sd time for the 9 λ around λ₀ = 1/√d,
  the MC t-tests (Table "testMC"), aATM vs RPCA, the zones against the λ bounds, the best λ;
* ``ttests.csv``, ``zones.csv``, ``best_lambda.csv``, ``best_lambda_fit.csv``;
* ``figures/``: r and time against log λ with ±1 sd bars, and √d·λ* against n with the fit.

``python -m pipeline.report`` regenerates ``docs/EXPERIMENTS.md`` from one grid run and one
best-λ run, keeping the hand-written text outside the generated block.
"""

from __future__ import annotations

import argparse
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "PAPER",
    "PairedTest",
    "best_lambdas",
    "fit_best_lambda",
    "load_run",
    "mc_ttests",
    "paired_ttest",
    "summarise",
    "write_experiments_md",
    "write_report",
    "zones",
]

log = logging.getLogger(__name__)

#: Significance level of the paper's one-sided t-tests.
ALPHA = 1e-5
#: Mean ‖L‖_F/‖D‖_F below this is "L = 0" (failure zone).
FAILURE_L_REL = 0.01

LABELS = {
    "aatm": "aATM",
    "rpca": "RPCA",
    "nnrpca": "NN-RPCA",
    "atm": "ATM",
    "median": "temporal median",
    "cloudy": "cloudy input",
}
METHOD_ORDER = ("aatm", "atm", "rpca", "nnrpca")
COLOURS = {"aatm": "tab:green", "atm": "tab:blue", "rpca": "tab:orange", "nnrpca": "tab:purple"}

BEGIN = "<!-- BEGIN GENERATED: python -m pipeline.report; edit outside this block -->"
END = "<!-- END GENERATED -->"


@dataclass(frozen=True)
class _Paper:
    """Numbers the paper reports (tyrol-w1, 1024², SPEC-NOTES §5 and the paper's Tables)."""

    # λ·√d of the columns of Tables mean/std (λ ×1e-3: 0.6162 … 1.2874, √d = 1024).
    lam_sqrt_d: tuple[float, ...] = (
        0.6310,
        0.6918,
        0.7586,
        0.8318,
        0.9120,
        1.0,
        1.0965,
        1.2023,
        1.3183,
    )
    mean_r_n7: Any = None
    std_r_n7: Any = None
    mean_time_n7: Any = None
    ttest: Any = None
    fit: tuple[float, float] = (-0.5682, 1.0747)


PAPER = _Paper(
    mean_r_n7={
        ("aatm", True): (0.2436, 0.1392, 0.1440, 0.1506, 0.1596, 0.1712, 0.1860, 0.1990, 0.2145),
        ("atm", True): (0.4262, 0.2358, 0.1867, 0.2152, 0.2618, 0.3118, 0.3567, 0.3847, 0.4054),
        ("rpca", True): (0.2543, 0.1714, 0.1771, 0.1826, 0.1896, 0.1958, 0.2058, 0.2111, 0.2217),
        ("aatm", False): (0.1106, 0.0941, 0.1033, 0.1172, 0.1374, 0.1625, 0.1928, 0.2203, 0.2504),
        ("atm", False): (0.4063, 0.2985, 0.2075, 0.2304, 0.2820, 0.3297, 0.3687, 0.3908, 0.4078),
        ("rpca", False): (0.1700, 0.1652, 0.1729, 0.1806, 0.1905, 0.1996, 0.2142, 0.2288, 0.2531),
    },
    std_r_n7={
        ("aatm", True): (0.0176, 0.0082, 0.0104, 0.0120, 0.0144, 0.0132, 0.0149, 0.0177, 0.0188),
        ("atm", True): (0.0360, 0.0112, 0.0191, 0.0246, 0.0381, 0.0369, 0.0348, 0.0360, 0.0329),
        ("rpca", True): (0.0138, 0.0127, 0.0154, 0.0166, 0.0193, 0.0173, 0.0182, 0.0204, 0.0203),
        ("aatm", False): (0.0059, 0.0091, 0.0126, 0.0138, 0.0181, 0.0171, 0.0195, 0.0237, 0.0255),
        ("atm", False): (0.0175, 0.0118, 0.0182, 0.0278, 0.0386, 0.0348, 0.0318, 0.0330, 0.0307),
        ("rpca", False): (0.0134, 0.0153, 0.0183, 0.0192, 0.0221, 0.0198, 0.0203, 0.0239, 0.0253),
    },
    mean_time_n7={
        ("aatm", False): (9.84, 9.56, 9.06, 9.18, 8.82, 8.35, 5.77, 5.71, 6.25),
        ("atm", False): (127.17, 130.38, 104.43, 97.66, 90.77, 80.95, 51.69, 46.87, 45.81),
        ("rpca", False): (6.45, 6.58, 6.64, 6.70, 6.61, 6.42, 3.75, 3.30, 3.47),
        ("aatm", True): (14.59, 14.32, 13.85, 13.97, 13.54, 12.73, 8.69, 8.63, 9.49),
        ("atm", True): (131.92, 135.02, 108.91, 102.17, 95.06, 84.95, 54.37, 49.49, 48.61),
        ("rpca", True): (11.26, 11.43, 11.42, 11.51, 11.34, 10.94, 6.72, 6.24, 6.69),
    },
    # (method, n) -> (p-value, one-sided CI lower bound) of H0: mean(r_MC − r_noMC) ≤ 0.
    ttest={
        ("aatm", 7): (1.4973e-58, 0.0430),
        ("atm", 7): (1.0000, -0.0234),
        ("rpca", 7): (1.7878e-17, 0.0039),
        ("aatm", 15): (1.0251e-74, 0.0629),
        ("atm", 15): (5.8915e-31, 0.0155),
        ("rpca", 15): (7.7511e-44, 0.0126),
    },
)


def _label(method: str, mc: bool = False) -> str:
    return LABELS.get(method, method) + ("+MC" if mc else "")


# --------------------------------------------------------------------------------------------
# loading and summarising
# --------------------------------------------------------------------------------------------


def load_run(out_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``results.csv`` and ``trials.csv`` of a run directory."""
    out = Path(out_dir)
    results = pd.read_csv(out / "results.csv")
    trials = pd.read_csv(out / "trials.csv")
    # CSV booleans come back as bool already; make sure of it for hand-edited files.
    results["mc"] = results["mc"].astype(bool)
    return results, trials


_GROUP = ["image", "n", "method", "mc", "lam_kind", "lam"]


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over trials per (image, n, method, mc, lam_kind, lam).

    Parameters
    ----------
    results
        ``results.csv`` rows.

    Returns
    -------
    pandas.DataFrame
        Columns ``r_mean r_std t_mean t_std it_mean c_nonzero l_rel converged trials lam_sqrt_d``.
        Baselines (no λ) have ``lam`` NaN.
    """
    grouped = results.groupby(_GROUP, dropna=False, sort=True)
    out = grouped.agg(
        r_mean=("r", "mean"),
        r_std=("r", "std"),
        t_mean=("seconds", "mean"),
        t_std=("seconds", "std"),
        it_mean=("iterations", "mean"),
        c_nonzero=("c_nonzero", "max"),
        l_rel=("l_rel", "mean"),
        converged=("converged", "mean"),
        trials=("r", "size"),
        lam_sqrt_d=("lam_sqrt_d", "mean"),
    )
    return out.reset_index()


def _grid(summary: pd.DataFrame, image: str, n: int, method: str, mc: bool) -> pd.DataFrame:
    sel = summary[
        (summary.image == image)
        & (summary.n == n)
        & (summary.method == method)
        & (summary.mc == mc)
        & (summary.lam_kind == "grid")
    ]
    return sel.sort_values("lam")


def _table_lams(summary: pd.DataFrame, image: str, n: int, width: int = 9) -> list[float]:
    """The ``width`` grid λ around λ₀ = 1/√d (the paper's table columns)."""
    lams = np.sort(
        summary[
            (summary.image == image) & (summary.n == n) & (summary.lam_kind == "grid")
        ].lam.unique()
    )
    sqrt_d = (
        float(
            summary[
                (summary.image == image) & (summary.n == n) & (summary.lam_kind == "grid")
            ].lam_sqrt_d.iloc[0]
            / lams[0]
        )
        if lams.size
        else 1.0
    )
    if not lams.size:
        return []
    centre = int(np.argmin(np.abs(np.log(lams * sqrt_d))))
    # The paper's layout: λ₀ is the 6th of 9 columns (5 below, 3 above).
    lo = max(min(centre - width // 2 - 1, lams.size - width), 0)
    return [float(v) for v in lams[lo : lo + width]]


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------


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
        return PairedTest(
            float(diff.mean()) if diff.size else math.nan,
            math.nan,
            math.nan,
            math.nan,
            False,
            int(diff.size),
        )
    if np.all(diff == diff[0]):  # zero variance: t is ±inf or undefined, decide on the mean
        p = 0.0 if diff[0] > 0 else 1.0
        return PairedTest(
            float(diff[0]),
            math.copysign(math.inf, diff[0]) if diff[0] else math.nan,
            p,
            float(diff[0]),
            p < alpha,
            int(diff.size),
        )
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
    keys = ["image", "n", "repeat"]
    x = results[sel_x].set_index(keys).r
    y = results[sel_y].set_index(keys).r
    joined = pd.concat([x.rename("x"), y.rename("y")], axis=1, join="inner").sort_index()
    return joined.x.to_numpy(), joined.y.to_numpy()


def best_lambdas(summary: pd.DataFrame, *, mc: bool = False) -> pd.DataFrame:
    """λ* = the grid λ with the minimum mean r, per (image, n, method).

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
        at0 = g.iloc[int(np.argmin(np.abs(np.log(g.lam_sqrt_d.to_numpy()))))]
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


def mc_ttests(results: pd.DataFrame, summary: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Paired one-sided t-tests of r with MC against r without, per (image, n, method).

    Tested at the method's best λ without MC (the paper's "optimal λ") and at λ₀ = 1/√d.
    H0: mean(r_MC − r_noMC) ≤ 0; a small p-value means MC makes r *worse*.
    """
    rows = []
    best = best_lambdas(summary)
    grid = results[results.lam_kind == "grid"]
    for b in best.itertuples():
        g = grid[(grid.image == b.image) & (grid.n == b.n) & (grid.method == b.method)]
        if not g.mc.any():
            continue
        lam0 = g.lam.to_numpy()[np.argmin(np.abs(np.log(g.lam_sqrt_d.to_numpy())))]
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
    """
    rows = []
    best = best_lambdas(summary).set_index(["image", "n", "method"])
    grid = results[(results.lam_kind == "grid") & ~results.mc]
    for (image, n), g in grid.groupby(["image", "n"], sort=True):
        if not {a, b} <= set(g.method):
            continue
        lam0 = g.lam.to_numpy()[np.argmin(np.abs(np.log(g.lam_sqrt_d.to_numpy())))]
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


# --------------------------------------------------------------------------------------------
# markdown
# --------------------------------------------------------------------------------------------


def _fmt(v: float, digits: int = 4) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def _fmt_p(p: float) -> str:
    return "–" if not np.isfinite(p) else (f"{p:.4e}" if p < 1e-3 else f"{p:.4f}")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def paper_table(summary: pd.DataFrame, image: str, n: int, value: str, digits: int = 4) -> str:
    """One of the paper's Tables (mean/sd of r or time) for the 9 λ around λ₀, as markdown.

    Column-wise best is in italics, the overall best in bold, as in the paper; the λ₀ column is
    marked with ‖ ‖. Baseline rows (median, cloudy input) are constant across λ.
    """
    lams = _table_lams(summary, image, n)
    if not lams:
        return "(no grid λ in this run)"
    sub = summary[(summary.image == image) & (summary.n == n)]
    sqrt_d = float(
        sub[sub.lam_kind == "grid"].lam_sqrt_d.iloc[0] / sub[sub.lam_kind == "grid"].lam.iloc[0]
    )
    methods = [m for m in METHOD_ORDER if m in set(sub.method)]
    order = [(m, True) for m in methods if sub[(sub.method == m)].mc.any()]
    order += [(m, False) for m in methods]
    values = np.full((len(order), len(lams)), np.nan)
    for i, (m, mc) in enumerate(order):
        g = _grid(summary, image, n, m, mc).set_index("lam")
        for j, lam in enumerate(lams):
            if lam in g.index:
                values[i, j] = g.loc[lam, value]
    cells = [[_fmt(v, digits) for v in row] for row in values]
    if np.isfinite(values).any():
        for j in range(len(lams)):
            if np.isfinite(values[:, j]).any():
                i = int(np.nanargmin(values[:, j]))
                cells[i][j] = f"*{cells[i][j]}*"
        bi, bj = (int(v) for v in np.unravel_index(int(np.nanargmin(values)), values.shape))
        cells[bi][bj] = f"**{cells[bi][bj].strip('*')}**"
    centre = int(np.argmin(np.abs(np.log(np.asarray(lams) * sqrt_d))))
    header = ["λ (×10⁻³) / λ√d"] + [
        (
            f"‖{lam * 1e3:.4f} / {lam * sqrt_d:.3f}‖"
            if j == centre
            else f"{lam * 1e3:.4f} / {lam * sqrt_d:.3f}"
        )
        for j, lam in enumerate(lams)
    ]
    rows = [[_label(m, mc), *c] for (m, mc), c in zip(order, cells, strict=True)]
    for base in ("median", "cloudy"):
        b = sub[sub.method == base]
        if len(b):
            v = _fmt(float(b[value].iloc[0]), digits)
            rows.append([_label(base), *[v] * len(lams)])
    return _md_table(header, rows)


def _paper_vs_ours(summary: pd.DataFrame, image: str, n: int) -> str:
    lams = _table_lams(summary, image, n)
    sub = summary[(summary.image == image) & (summary.n == n) & (summary.lam_kind == "grid")]
    if not lams:
        return ""
    sqrt_d = float(sub.lam_sqrt_d.iloc[0] / sub.lam.iloc[0])
    ours_cols = [lam * sqrt_d for lam in lams]
    header = ["method", *[f"{v:.3f}" for v in PAPER.lam_sqrt_d]]
    rows = []
    for (m, mc), paper_vals in PAPER.mean_r_n7.items():
        if not ((sub.method == m) & (sub.mc == mc)).any():
            continue
        g = _grid(summary, image, n, m, mc)
        ours = []
        for target in PAPER.lam_sqrt_d:
            j = int(np.argmin(np.abs(np.log(np.asarray(ours_cols) / target))))
            match = g[np.isclose(g.lam, lams[j])]
            close = abs(math.log(ours_cols[j] / target)) < 0.01 and len(match)
            ours.append(_fmt(float(match.r_mean.iloc[0])) if close else "–")
        rows.append([f"{_label(m, mc)} paper", *[f"{v:.4f}" for v in paper_vals]])
        rows.append([f"{_label(m, mc)} ours", *ours])
    return _md_table(header, rows)


def _ttest_table(tests: pd.DataFrame, at: str) -> str:
    sel = tests[tests["where"] == at]
    rows = []
    for t in sel.itertuples():
        paper = PAPER.ttest.get((t.method, t.n)) if at == "best" else None
        rows.append(
            [
                _label(t.method),
                str(t.n),
                f"{t.lam_sqrt_d:.3f}",
                _fmt(t.r_mc),
                _fmt(t.r_nomc),
                _fmt(t.mean_diff),
                _fmt_p(t.p),
                f"[{_fmt(t.ci_low)}, ∞)",
                "rejected" if t.reject_h0 else "kept",
                str(t.pairs),
                f"{_fmt_p(paper[0])}, [{paper[1]:.4f}, ∞)" if paper else "–",
            ]
        )
    return _md_table(
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


def _zones_table(z: pd.DataFrame) -> str:
    rows = [
        [
            _label(t.method),
            str(t.n),
            f"{t.lower / t.lam0:.3f}",
            f"{t.failure_edge / t.lam0:.3f}" if np.isfinite(t.failure_edge) else "none in grid",
            _fmt(t.failure_edge_over_lower, 2),
            f"{t.upper / t.lam0:.3f} ± {t.upper_sd / t.lam0:.3f}",
            f"{t.upper_asymptotic / t.lam0:.3f}",
            f"{t.clamp_start / t.lam0:.3f}" if np.isfinite(t.clamp_start) else "none in grid",
            _fmt(t.clamp_start_over_upper, 2),
            _fmt(t.r_at_clamp_start),
            _fmt(t.r_cloudy),
        ]
        for t in z.itertuples()
    ]
    return _md_table(
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


def _best_table(best: pd.DataFrame) -> str:
    rows = [
        [
            t.image,
            str(t.n),
            _label(t.method),
            f"{t.lam_star:.4e}",
            f"{t.lam_star_sqrt_d:.3f}",
            _fmt(t.r_min),
            _fmt(t.r_at_lam0),
            "yes" if t.at_edge else "",
        ]
        for t in best.itertuples()
    ]
    return _md_table(
        ["image", "n", "method", "λ*", "√d·λ*", "min mean r", "r at λ₀", "at grid edge"], rows
    )


def fit_table(best: pd.DataFrame) -> pd.DataFrame:
    """The (a, b) fits of √d·λ* = a ln ln n + b, per method and pooled over methods."""
    rows = []
    usable = best[~best.at_edge]
    groups = [(_label(m), usable[usable.method == m]) for m in METHOD_ORDER]
    groups.append(("all methods (pooled)", usable))
    for name, g in groups:
        if g.n.nunique() < 2:
            continue
        a, b = fit_best_lambda(g.n.to_numpy(), g.lam_star_sqrt_d.to_numpy())
        pred = a * np.log(np.log(g.n.to_numpy())) + b
        rmse = float(np.sqrt(np.mean((pred - g.lam_star_sqrt_d.to_numpy()) ** 2)))
        rows.append({"fit": name, "a": a, "b": b, "rmse": rmse, "points": len(g)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


def _plot_vs_lambda(
    summary: pd.DataFrame, trials: pd.DataFrame, image: str, n: int, value: str, path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sub = summary[(summary.image == image) & (summary.n == n)]
    has_mc = bool(sub.mc.any())
    fig, axes = plt.subplots(
        1, 2 if has_mc else 1, figsize=(12 if has_mc else 6.5, 4.5), sharey=True, squeeze=False
    )
    tr = trials[(trials.image == image) & (trials.n == n)]
    for ax, mc in zip(axes[0], [False, True] if has_mc else [False], strict=True):
        for m in METHOD_ORDER:
            g = _grid(summary, image, n, m, mc)
            if len(g):
                ax.errorbar(
                    g.lam,
                    g[f"{value}_mean"],
                    yerr=g[f"{value}_std"].fillna(0),
                    label=_label(m, mc),
                    color=COLOURS[m],
                    marker=".",
                    capsize=2,
                    lw=1,
                )
        if value == "r":
            for base, style in (("cloudy", "--"), ("median", ":")):
                b = sub[sub.method == base]
                if len(b):
                    ax.axhline(
                        float(b.r_mean.iloc[0]), color="grey", ls=style, lw=1, label=_label(base)
                    )
        for x, name, style in (
            (tr.lower.mean(), "1/√(dn)", ":"),
            (tr.lam0.mean(), "1/√d", "-"),
            (tr.upper.mean(), "‖UVᵀ‖∞", "--"),
            (tr.upper_asymptotic.mean(), "2√3/(√d−√n)", "-."),
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
        ax.set_xscale("log")
        ax.set_xlabel("λ (log scale)")
        ax.set_title(f"{image}, n = {n}, {'with' if mc else 'without'} MC")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("r (mean ± 1 sd)" if value == "r" else "time (s, mean ± 1 sd)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_best_lambda(best: pd.DataFrame, fits: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    ns = np.linspace(2, max(float(best.n.max()), 3.0), 400)
    for m in METHOD_ORDER:
        g = best[best.method == m].sort_values("n")
        if len(g):
            for ax, x in ((left, g.n), (right, np.log(np.log(g.n)))):
                ax.plot(x, g.lam_star_sqrt_d, marker="o", ls="", color=COLOURS[m], label=_label(m))
    curves = [("paper", *PAPER.fit, "red")]
    pooled = fits[fits.fit == "all methods (pooled)"]
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


# --------------------------------------------------------------------------------------------
# the run report
# --------------------------------------------------------------------------------------------


def write_report(
    out_dir: str | Path, *, title: str = "experiment", wall_seconds: float | None = None
) -> Path:
    """Write summary CSVs, ``tables.md`` and ``figures/*.png`` for one run directory.

    Parameters
    ----------
    out_dir
        A directory holding ``results.csv`` and ``trials.csv``.
    title
        Heading of ``tables.md``.
    wall_seconds
        Wall time of the run, stated in the tables if given.

    Returns
    -------
    pathlib.Path
        The ``tables.md`` written.
    """
    out = Path(out_dir)
    results, trials = load_run(out)
    summary = summarise(results)
    summary.to_csv(out / "summary.csv", index=False)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    parts = [f"# {title}", ""]
    if wall_seconds is not None:
        parts += [f"Wall time {wall_seconds:.0f} s; {trials.shape[0]} trials.", ""]
    tests = mc_ttests(results, summary)
    tests.to_csv(out / "ttests.csv", index=False)
    comparison = method_comparison(results, summary)
    comparison.to_csv(out / "aatm_vs_rpca.csv", index=False)
    z = zones(summary, trials)
    z.to_csv(out / "zones.csv", index=False)
    best = best_lambdas(summary)
    best.to_csv(out / "best_lambda.csv", index=False)
    fits = fit_table(best) if len(best) and best.n.nunique() >= 2 else pd.DataFrame()
    fits.to_csv(out / "best_lambda_fit.csv", index=False)

    for image, n in sorted(
        {(str(i), int(k)) for i, k in zip(summary.image, summary.n, strict=True)}
    ):
        stem = f"{image}-n{n}"
        if (summary[(summary.image == image) & (summary.n == n)].lam_kind == "grid").any():
            _plot_vs_lambda(summary, trials, image, n, "r", figures / f"r-{stem}.png")
            _plot_vs_lambda(summary, trials, image, n, "t", figures / f"time-{stem}.png")
        parts += [f"## {image}, n = {n}", ""]
        for value, name, digits in (
            ("r_mean", "Mean r", 4),
            ("r_std", "Sd of r", 4),
            ("t_mean", "Mean time (s)", 3),
            ("t_std", "Sd of time (s)", 3),
        ):
            parts += [f"### {name}", "", paper_table(summary, image, n, value, digits), ""]
    if len(tests):
        parts += [
            "## MC against no MC at the best λ (H0: mean(r_MC − r_noMC) ≤ 0)",
            "",
            _ttest_table(tests, "best"),
            "",
            "## The same at λ₀ = 1/√d",
            "",
            _ttest_table(tests, "lam0"),
            "",
        ]
    if len(z):
        parts += [
            "## Failure and clamping zones against the λ bounds (all λ as λ·√d)",
            "",
            _zones_table(z),
            "",
        ]
    if len(best):
        parts += ["## Best λ per n", "", _best_table(best), ""]
    if len(fits):
        _plot_best_lambda(best, fits, figures / "best-lambda.png")
        rows = [
            [f.fit, f"{f.a:.4f}", f"{f.b:.4f}", f"{f.rmse:.4f}", str(f.points)]
            for f in fits.itertuples()
        ]
        rows.append(["paper", f"{PAPER.fit[0]:.4f}", f"{PAPER.fit[1]:.4f}", "–", "–"])
        parts += [
            "## Fit √d·λ* = a·ln(ln n) + b",
            "",
            _md_table(["fit", "a", "b", "rmse", "points"], rows),
            "",
        ]
    path = out / "tables.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# docs/EXPERIMENTS.md
# --------------------------------------------------------------------------------------------


def _keep_hand_written(path: Path) -> tuple[str, str]:
    """Text before BEGIN and after END of an existing file (the hand-written parts)."""
    if not path.exists():
        return "# Experiments\n\n", ""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text:
        return text.rstrip() + "\n\n", ""
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    return head, tail


def _copy_figures(src: Path, dest: Path, prefix: str, pattern: str = "*.png") -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for png in sorted((src / "figures").glob(pattern)):
        target = dest / f"{prefix}{png.name}"
        target.write_bytes(png.read_bytes())
        names.append(target.name)
    return names


def _grid_section(run: Path, figures: Path, rel: str, commands: Sequence[str]) -> list[str]:
    results, trials = load_run(run)
    summary = summarise(results)
    cfg_text = (
        (run / "config.yaml").read_text(encoding="utf-8") if (run / "config.yaml").exists() else ""
    )
    _copy_figures(run, figures, "grid-", "r-*.png")
    _copy_figures(run, figures, "grid-", "time-*.png")
    tests = mc_ttests(results, summary)
    comp = method_comparison(results, summary)
    z = zones(summary, trials)
    best = best_lambdas(summary)
    out = [
        "## Single-image λ grid (reduced run)",
        "",
        "Reproduce with:",
        "",
        "```sh",
        *commands,
        "```",
        "",
        f"Trials: {trials.shape[0]} (images × n × repeats); d = "
        f"{', '.join(str(v) for v in sorted(trials.d.unique()))}; "
        f"mean cloud cover {trials.cloud_cover.mean():.3f}; mean r of the cloudy input "
        f"{trials.r_cloudy.mean():.4f}.",
        "",
    ]
    if cfg_text:
        out += [
            "<details><summary>resolved configuration</summary>",
            "",
            "```yaml",
            cfg_text.rstrip(),
            "```",
            "",
            "</details>",
            "",
        ]

    out += ["### aATM against RPCA", ""]
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
            else f"best: aATM {c.lam_a * math.sqrt(trials.d.iloc[0]):.3f}/√d, "
            f"RPCA {c.lam_b * math.sqrt(trials.d.iloc[0]):.3f}/√d"
        )
        rows.append(
            [
                str(c.n),
                lam,
                _fmt(c.r_aatm),
                _fmt(c.r_rpca),
                f"{100 * c.reduction:.1f} %",
                _fmt_p(c.p),
                paper,
            ]
        )
    out += [
        _md_table(
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
        ),
        "",
    ]

    for image, n in sorted({(str(i), int(k)) for i, k in zip(trials.image, trials.n, strict=True)}):
        stem = f"{image}-n{n}"
        out += [
            f"### {image}, n = {n}",
            "",
            f"![r against λ]({rel}/grid-r-{stem}.png)",
            "",
            f"![time against λ]({rel}/grid-time-{stem}.png)",
            "",
            'Mean r (the paper\'s Table "mean"; italics: column best, bold: overall best, '
            "‖·‖: λ₀):",
            "",
            paper_table(summary, image, n, "r_mean"),
            "",
            "Sd of r:",
            "",
            paper_table(summary, image, n, "r_std"),
            "",
            "Mean time (s, this machine, one single-threaded process per core):",
            "",
            paper_table(summary, image, n, "t_mean", 3),
            "",
            "Sd of time (s):",
            "",
            paper_table(summary, image, n, "t_std", 3),
            "",
        ]
        if n == 7:
            out += [
                "Paper (1024², 50 trials) against ours, mean r, by λ√d:",
                "",
                _paper_vs_ours(summary, image, n),
                "",
            ]
        med = summary[(summary.image == image) & (summary.n == n) & (summary.method == "median")]
        b = best[(best.image == image) & (best.n == n)]
        if len(med) and len(b):
            star = summary[
                (summary.image == image)
                & (summary.n == n)
                & ~summary.mc
                & (summary.lam_kind == "star")
            ].set_index("method")
            star_sqrt_d = f"{star.lam_sqrt_d.iloc[0]:.3f}" if len(star) else "–"
            rows = [
                [
                    _label(t.method),
                    _fmt(t.r_at_lam0),
                    _fmt(float(star.r_mean[t.method])) if t.method in star.index else "–",
                    _fmt(t.r_min),
                    f"{t.lam_star_sqrt_d:.3f}",
                ]
                for t in b.itertuples()
            ]
            rows.append([_label("median"), _fmt(float(med.r_mean.iloc[0])), "–", "–", "–"])
            out += [
                "The λ rules and the temporal median (no MC):",
                "",
                _md_table(
                    [
                        "method",
                        "mean r at λ₀",
                        f"mean r at λ̂* (λ̂*√d = {star_sqrt_d})",
                        "best mean r on the grid",
                        "best λ√d",
                    ],
                    rows,
                ),
                "",
            ]

    out += [
        '### Does MC help? (paper\'s Table "testMC")',
        "",
        "Paired one-sided t-tests, H0: mean(r_MC − r_noMC) ≤ 0, α = 1e-5; a rejected H0 "
        "means MC makes r worse. At each method's best λ without MC:",
        "",
        _ttest_table(tests, "best"),
        "",
        "At λ₀ = 1/√d:",
        "",
        _ttest_table(tests, "lam0"),
        "",
        "### Failure and clamping zones against the λ bounds",
        "",
        "All λ in units of λ₀ = 1/√d. Failure: mean ‖L‖_F/‖D‖_F < 0.01 (L = 0, r ≈ 1). "
        "Clamping: C = 0 in every trial at this and every larger grid λ. "
        "Bounds are trial means.",
        "",
        _zones_table(z),
        "",
    ]
    return out


def _bestlambda_section(run: Path, figures: Path, rel: str, commands: Sequence[str]) -> list[str]:
    results, trials = load_run(run)
    summary = summarise(results)
    _copy_figures(run, figures, "bestlambda-", "best-lambda.png")
    best = best_lambdas(summary)
    fits = fit_table(best)
    rows = [
        [f.fit, f"{f.a:.4f}", f"{f.b:.4f}", f"{f.rmse:.4f}", str(f.points)]
        for f in fits.itertuples()
    ]
    rows.append(
        ["paper (n = 2…250, 1024²)", f"{PAPER.fit[0]:.4f}", f"{PAPER.fit[1]:.4f}", "–", "–"]
    )
    ns = sorted(int(v) for v in trials.n.unique())
    pivot = best.pivot_table(index="n", columns="method", values="lam_star_sqrt_d")
    prow = []
    for n in ns:
        paper = (PAPER.fit[0] * math.log(math.log(n)) + PAPER.fit[1]) if n >= 2 else math.nan
        floor = 1 / math.sqrt(n)
        prow.append(
            [
                str(n),
                *[f"{pivot.loc[n, m]:.3f}" if m in pivot.columns else "–" for m in METHOD_ORDER],
                f"{max(paper, floor):.3f}",
                f"{floor:.3f}",
            ]
        )
    return [
        "## Best λ against n (reduced run)",
        "",
        "Reproduce with:",
        "",
        "```sh",
        *commands,
        "```",
        "",
        f"n = {', '.join(map(str, ns))}; d = {int(trials.d.iloc[0])}; "
        f"{int(trials.groupby('n').size().min())} trials per n; methods without MC.",
        "",
        f"![best λ against n]({rel}/bestlambda-best-lambda.png)",
        "",
        "√d·λ* (grid λ of minimum mean r) per n and method, with the paper's λ̂*·√d "
        "(floored at 1/√n) and the floor 1/√n:",
        "",
        _md_table(["n", *[_label(m) for m in METHOD_ORDER], "paper λ̂*·√d", "1/√n"], prow),
        "",
        "Least-squares fit √d·λ* = a·ln(ln n) + b (minima at a grid edge left out):",
        "",
        _md_table(["fit", "a", "b", "rmse", "points"], rows),
        "",
    ]


def write_experiments_md(
    path: str | Path,
    *,
    grid_run: str | Path | None = None,
    bestlambda_run: str | Path | None = None,
    figures: str | Path | None = None,
    grid_commands: Sequence[str] = (),
    bestlambda_commands: Sequence[str] = (),
) -> Path:
    """(Re)generate ``docs/EXPERIMENTS.md`` from run directories, keeping hand-written text.

    Everything before the ``BEGIN GENERATED`` marker and after the ``END GENERATED`` marker is
    kept; the block between is rewritten. Figures are copied into ``figures`` (default
    ``docs/figures`` next to the file).

    Parameters
    ----------
    path
        The markdown file.
    grid_run, bestlambda_run
        Output directories of the λ-grid run and of the best-λ run (either may be None).
    figures
        Folder to copy the PNGs into.
    grid_commands, bestlambda_commands
        Shell commands that reproduce each run, shown in the document.

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    fig_dir = Path(figures) if figures is not None else path.parent / "figures"
    rel = Path(_relpath(fig_dir, path.parent)).as_posix()
    head, tail = _keep_hand_written(path)
    body: list[str] = []
    if grid_run is not None:
        body += _grid_section(Path(grid_run), fig_dir, rel, grid_commands)
    if bestlambda_run is not None:
        body += _bestlambda_section(Path(bestlambda_run), fig_dir, rel, bestlambda_commands)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        head + BEGIN + "\n\n" + "\n".join(body).rstrip() + "\n\n" + END + tail, encoding="utf-8"
    )
    return path


def _relpath(target: Path, start: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), start.resolve())


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipeline.report``: regenerate EXPERIMENTS.md (or one run's tables)."""
    parser = argparse.ArgumentParser(prog="python -m pipeline.report", description=__doc__)
    parser.add_argument(
        "--run",
        type=Path,
        action="append",
        default=[],
        help="rewrite tables.md and figures of this run directory (repeatable)",
    )
    parser.add_argument("--doc", type=Path, help="EXPERIMENTS.md to regenerate")
    parser.add_argument("--grid", type=Path, help="output dir of the λ-grid run")
    parser.add_argument("--bestlambda", type=Path, help="output dir of the best-λ run")
    parser.add_argument("--figures", type=Path, help="folder for the document's figures")
    parser.add_argument("--grid-command", action="append", default=[])
    parser.add_argument("--bestlambda-command", action="append", default=[])
    args = parser.parse_args(argv)
    for run in args.run:
        print(write_report(run, title=run.name))
    if args.doc:
        print(
            write_experiments_md(
                args.doc,
                grid_run=args.grid,
                bestlambda_run=args.bestlambda,
                figures=args.figures,
                grid_commands=args.grid_command,
                bestlambda_commands=args.bestlambda_command,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
