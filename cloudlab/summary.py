"""A run's tables read back from disk, the per-λ summary, and the views the report takes of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "case_rows",
    "grid_of",
    "grid_rows",
    "lam0_position",
    "load_run",
    "sqrt_d_of",
    "summarise",
    "table_lams",
]

#: The keys of one summary row: trials are averaged over everything else.
_GROUP = ["image", "n", "method", "mc", "lam_kind", "lam"]


def load_run(out_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``results.csv`` and ``trials.csv`` of a run directory.

    Parameters
    ----------
    out_dir
        A directory written by :func:`run_experiment`.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        One row per trial × method × λ, and one row per trial.
    """
    out = Path(out_dir)
    results = pd.read_csv(out / "results.csv")
    trials = pd.read_csv(out / "trials.csv")
    # CSV booleans come back as bool already; make sure of it for hand-edited files.
    results["mc"] = results["mc"].astype(bool)
    return results, trials


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


def case_rows(frame: pd.DataFrame, image: str, n: int) -> pd.DataFrame:
    """The rows of one (image, n) of a table with ``image`` and ``n`` columns.

    Parameters
    ----------
    frame
        The summary, ``trials.csv``, the best λ, ...
    image, n
        The image label and number of dates.

    Returns
    -------
    pandas.DataFrame
    """
    return frame[(frame.image == image) & (frame.n == n)]


def grid_rows(summary: pd.DataFrame, image: str, n: int) -> pd.DataFrame:
    """The summary rows of one (image, n) on the λ grid (not λ̂*, not the baselines).

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.

    Returns
    -------
    pandas.DataFrame
    """
    rows = case_rows(summary, image, n)
    return rows[rows.lam_kind == "grid"]


def grid_of(summary: pd.DataFrame, image: str, n: int, method: str, mc: bool) -> pd.DataFrame:
    """The grid rows of one method (with or without MC), by ascending λ.

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.
    method, mc
        The method and whether with the MC post-step.

    Returns
    -------
    pandas.DataFrame
    """
    sel = grid_rows(summary, image, n)
    return sel[(sel.method == method) & (sel.mc == mc)].sort_values("lam")


def sqrt_d_of(summary: pd.DataFrame, image: str, n: int) -> float:
    """√d of one (image, n), read back from the λ·√d column (1.0 when it has no grid rows).

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.

    Returns
    -------
    float
    """
    sel = grid_rows(summary, image, n)
    return float(sel.lam_sqrt_d.iloc[0] / sel.lam.iloc[0]) if len(sel) else 1.0


def table_lams(summary: pd.DataFrame, image: str, n: int, width: int = 9) -> list[float]:
    """The ``width`` grid λ around λ₀ = 1/√d (the paper's table columns).

    Parameters
    ----------
    summary
        What :func:`summarise` returned.
    image, n
        The image label and number of dates.
    width
        How many columns.

    Returns
    -------
    list of float
        Ascending; empty when the run has no grid λ for (image, n).
    """
    lams = np.sort(grid_rows(summary, image, n).lam.unique())
    if not lams.size:
        return []
    centre = int(np.argmin(np.abs(np.log(lams * sqrt_d_of(summary, image, n)))))
    # The paper's layout: λ₀ is the 6th of 9 columns (5 below, 3 above).
    lo = max(min(centre - width // 2 - 1, lams.size - width), 0)
    return [float(v) for v in lams[lo : lo + width]]


def lam0_position(rows: pd.DataFrame) -> int:
    """Position (0-based) of the first row whose λ is nearest λ₀ = 1/√d.

    Parameters
    ----------
    rows
        Rows of ``results.csv`` or of the summary, with a ``lam_sqrt_d`` column.

    Returns
    -------
    int
    """
    return int(np.argmin(np.abs(np.log(rows.lam_sqrt_d.to_numpy()))))
