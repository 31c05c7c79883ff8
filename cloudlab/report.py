"""The report of one run: its statistics as CSV, the paper's tables in ``tables.md``, figures.

Reads the ``results.csv`` / ``trials.csv`` written by :func:`run_experiment` and writes, in the
run's output directory:

* ``summary.csv``: mean and sd of r, time, iterations per (image, n, method, MC, λ);
* ``tables.md``: the paper's Tables of mean/sd r and mean/sd time for the 9 λ around λ₀ = 1/√d,
  the MC t-tests (Table "testMC"), the zones against the λ bounds, the best λ and its fit;
* ``ttests.csv``, ``aatm_vs_rpca.csv``, ``zones.csv``, ``best_lambda.csv``,
  ``best_lambda_fit.csv``;
* ``figures/``: r and time against log λ with ±1 sd bars, and √d·λ* against n with the fit.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pandas as pd

from cloudlab.bestlambda import best_lambdas, fit_table
from cloudlab.plots import plot_best_lambda, plot_vs_lambda
from cloudlab.stats import mc_ttests, method_comparison, zones
from cloudlab.summary import case_rows, load_run, summarise
from cloudlab.tables import best_table, fit_md_table, paper_table, ttest_table, zones_table

__all__ = ["RunTables", "cases", "write_report"]


class RunTables:
    """One run directory's tables and the statistics derived from them, each computed once.

    Parameters
    ----------
    run
        A directory holding ``results.csv`` and ``trials.csv``.
    """

    def __init__(self, run: str | Path) -> None:
        self.path = Path(run)
        self.results, self.trials = load_run(self.path)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """Mean and sd over trials (:func:`summarise`)."""
        return summarise(self.results)

    @cached_property
    def tests(self) -> pd.DataFrame:
        """MC against no MC (:func:`mc_ttests`)."""
        return mc_ttests(self.results, self.summary)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        """aATM against RPCA (:func:`method_comparison`)."""
        return method_comparison(self.results, self.summary)

    @cached_property
    def zones(self) -> pd.DataFrame:
        """The failure and clamping zones (:func:`zones`)."""
        return zones(self.summary, self.trials)

    @cached_property
    def best(self) -> pd.DataFrame:
        """The best λ per (image, n, method) (:func:`best_lambdas`)."""
        return best_lambdas(self.summary)

    @cached_property
    def fits(self) -> pd.DataFrame:
        """The fits of √d·λ* in n (:func:`fit_table`), empty with fewer than two n."""
        best = self.best
        return fit_table(best) if len(best) and best.n.nunique() >= 2 else pd.DataFrame()


def cases(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """The (image, n) pairs of a table, sorted.

    Parameters
    ----------
    frame
        Any table with ``image`` and ``n`` columns.

    Returns
    -------
    list of (str, int)
    """
    return sorted({(str(i), int(k)) for i, k in zip(frame.image, frame.n, strict=True)})


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
    run = RunTables(out)
    _write_csvs(run, out)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    parts = [f"# {title}", ""]
    if wall_seconds is not None:
        parts += [f"Wall time {wall_seconds:.0f} s; {run.trials.shape[0]} trials.", ""]
    for image, n in cases(run.summary):
        parts += _case_section(run, image, n, figures)
    parts += _statistics_sections(run, figures)
    path = out / "tables.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _write_csvs(run: RunTables, out: Path) -> None:
    """The summary and every statistic as CSV, for readers other than this report."""
    run.summary.to_csv(out / "summary.csv", index=False)
    run.tests.to_csv(out / "ttests.csv", index=False)
    run.comparison.to_csv(out / "aatm_vs_rpca.csv", index=False)
    run.zones.to_csv(out / "zones.csv", index=False)
    run.best.to_csv(out / "best_lambda.csv", index=False)
    run.fits.to_csv(out / "best_lambda_fit.csv", index=False)


def _case_section(run: RunTables, image: str, n: int, figures: Path) -> list[str]:
    """The figures and the paper's four Tables (mean/sd of r and time) of one (image, n)."""
    summary = run.summary
    stem = f"{image}-n{n}"
    if (case_rows(summary, image, n).lam_kind == "grid").any():
        plot_vs_lambda(summary, run.trials, image, n, "r", figures / f"r-{stem}.png")
        plot_vs_lambda(summary, run.trials, image, n, "t", figures / f"time-{stem}.png")
    parts = [f"## {image}, n = {n}", ""]
    for value, name, digits in (
        ("r_mean", "Mean r", 4),
        ("r_std", "Sd of r", 4),
        ("t_mean", "Mean time (s)", 3),
        ("t_std", "Sd of time (s)", 3),
    ):
        parts += [f"### {name}", "", paper_table(summary, image, n, value, digits), ""]
    return parts


def _statistics_sections(run: RunTables, figures: Path) -> list[str]:
    """The MC t-tests, the zones, the best λ and its fit (with its figure), each if any."""
    parts: list[str] = []
    if len(run.tests):
        parts += [
            "## MC against no MC at the best λ (H0: mean(r_MC − r_noMC) ≤ 0)",
            "",
            ttest_table(run.tests, "best"),
            "",
            "## The same at λ₀ = 1/√d",
            "",
            ttest_table(run.tests, "lam0"),
            "",
        ]
    if len(run.zones):
        parts += [
            "## Failure and clamping zones against the λ bounds (all λ as λ·√d)",
            "",
            zones_table(run.zones),
            "",
        ]
    if len(run.best):
        parts += ["## Best λ per n", "", best_table(run.best), ""]
    if len(run.fits):
        plot_best_lambda(run.best, run.fits, figures / "best-lambda.png")
        parts += ["## Fit √d·λ* = a·ln(ln n) + b", "", fit_md_table(run.fits, "paper"), ""]
    return parts
