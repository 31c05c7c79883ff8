"""``docs/EXPERIMENTS.md``: its generated block, rewritten from a λ-grid run and a best-λ run.

Everything before the ``BEGIN GENERATED`` marker and after the ``END GENERATED`` marker is
hand-written and kept; the block between is rewritten, and the runs' figures are copied next to
the page.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from cloudlab.report import RunTables, cases
from cloudlab.tables import (
    best_vs_n_table,
    comparison_table,
    fit_md_table,
    paper_table,
    paper_vs_ours,
    rules_table,
    ttest_table,
    zones_table,
)

__all__ = ["BEGIN", "END", "write_experiments_md"]

BEGIN = "<!-- BEGIN GENERATED: python -m cloudlab report; edit outside this block -->"
END = "<!-- END GENERATED -->"
#: Markers older pages begin their block with (the report was once ``python -m pipeline report``,
#: and before that its own module), still read.
_OLD_BEGINS = (
    "<!-- BEGIN GENERATED: python -m pipeline report; edit outside this block -->",
    "<!-- BEGIN GENERATED: python -m pipeline.report; edit outside this block -->",
)


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
        The file written.
    """
    path = Path(path)
    fig_dir = Path(figures) if figures is not None else path.parent / "figures"
    rel = Path(os.path.relpath(fig_dir.resolve(), path.parent.resolve())).as_posix()
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


def _keep_hand_written(path: Path) -> tuple[str, str]:
    """Text before BEGIN and after END of an existing file (the hand-written parts)."""
    if not path.exists():
        return "# Experiments\n\n", ""
    text = path.read_text(encoding="utf-8")
    begin = next((marker for marker in (BEGIN, *_OLD_BEGINS) if marker in text), None)
    if begin is None:
        return text.rstrip() + "\n\n", ""
    head, rest = text.split(begin, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    return head, tail


def _copy_figures(src: Path, dest: Path, prefix: str, pattern: str) -> None:
    """Copy a run's figures matching ``pattern`` into ``dest``, their names prefixed."""
    dest.mkdir(parents=True, exist_ok=True)
    for png in sorted((src / "figures").glob(pattern)):
        (dest / f"{prefix}{png.name}").write_bytes(png.read_bytes())


def _reproduce(title: str, commands: Sequence[str]) -> list[str]:
    """A section heading and the shell commands that reproduce its run."""
    return [f"## {title}", "", "Reproduce with:", "", "```sh", *commands, "```", ""]


# --------------------------------------------------------------------------------------------
# the λ-grid run
# --------------------------------------------------------------------------------------------


def _grid_section(run: Path, figures: Path, rel: str, commands: Sequence[str]) -> list[str]:
    """The λ-grid run: trials, aATM against RPCA, the Tables per (image, n), MC, zones."""
    tables = RunTables(run)
    _copy_figures(run, figures, "grid-", "r-*.png")
    _copy_figures(run, figures, "grid-", "time-*.png")
    trials = tables.trials
    out = _reproduce("Single-image λ grid (reduced run)", commands)
    out += _grid_intro(run, tables)
    sqrt_d = math.sqrt(trials.d.iloc[0])
    out += ["### aATM against RPCA", "", comparison_table(tables.comparison, sqrt_d), ""]
    for image, n in cases(trials):
        out += _grid_case(tables, image, n, rel)
    out += _grid_mc_and_zones(tables)
    return out


def _grid_intro(run: Path, tables: RunTables) -> list[str]:
    """What the trials were, and the run's resolved configuration folded away."""
    trials = tables.trials
    out = [
        f"Trials: {trials.shape[0]} (images × n × repeats); d = "
        f"{', '.join(str(v) for v in sorted(trials.d.unique()))}; "
        f"mean cloud cover {trials.cloud_cover.mean():.3f}; mean r of the cloudy input "
        f"{trials.r_cloudy.mean():.4f}.",
        "",
    ]
    config = run / "config.yaml"
    cfg_text = config.read_text(encoding="utf-8") if config.exists() else ""
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
    return out


def _grid_case(tables: RunTables, image: str, n: int, rel: str) -> list[str]:
    """One (image, n): its figures, the paper's four Tables, ours against the paper's, λ rules."""
    summary = tables.summary
    stem = f"{image}-n{n}"
    out = [
        f"### {image}, n = {n}",
        "",
        f"![r against λ]({rel}/grid-r-{stem}.png)",
        "",
        f"![time against λ]({rel}/grid-time-{stem}.png)",
        "",
        'Mean r (the paper\'s Table "mean"; italics: column best, bold: overall best, ‖·‖: λ₀):',
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
    if n == 7:  # the paper reports its Tables for n = 7 only
        out += [
            "Paper (1024², 50 trials) against ours, mean r, by λ√d:",
            "",
            paper_vs_ours(summary, image, n),
            "",
        ]
    rules = rules_table(summary, tables.best, image, n)
    if rules is not None:
        out += ["The λ rules and the temporal median (no MC):", "", rules, ""]
    return out


def _grid_mc_and_zones(tables: RunTables) -> list[str]:
    """The MC t-tests at the best λ and at λ₀, and the zones against the λ bounds."""
    return [
        '### Does MC help? (paper\'s Table "testMC")',
        "",
        "Paired one-sided t-tests, H0: mean(r_MC − r_noMC) ≤ 0, α = 1e-5; a rejected H0 "
        "means MC makes r worse. At each method's best λ without MC:",
        "",
        ttest_table(tables.tests, "best"),
        "",
        "At λ₀ = 1/√d:",
        "",
        ttest_table(tables.tests, "lam0"),
        "",
        "### Failure and clamping zones against the λ bounds",
        "",
        "All λ in units of λ₀ = 1/√d. Failure: mean ‖L‖_F/‖D‖_F < 0.01 (L = 0, r ≈ 1). "
        "Clamping: C = 0 in every trial at this and every larger grid λ. "
        "Bounds are trial means.",
        "",
        zones_table(tables.zones),
        "",
    ]


# --------------------------------------------------------------------------------------------
# the best-λ run
# --------------------------------------------------------------------------------------------


def _bestlambda_section(run: Path, figures: Path, rel: str, commands: Sequence[str]) -> list[str]:
    """The best-λ run: √d·λ* per n and method against the paper's rule, and the fits."""
    tables = RunTables(run)
    _copy_figures(run, figures, "bestlambda-", "best-lambda.png")
    trials = tables.trials
    ns = sorted(int(v) for v in trials.n.unique())
    return [
        *_reproduce("Best λ against n (reduced run)", commands),
        f"n = {', '.join(map(str, ns))}; d = {int(trials.d.iloc[0])}; "
        f"{int(trials.groupby('n').size().min())} trials per n; methods without MC.",
        "",
        f"![best λ against n]({rel}/bestlambda-best-lambda.png)",
        "",
        "√d·λ* (grid λ of minimum mean r) per n and method, with the paper's λ̂*·√d "
        "(floored at 1/√n) and the floor 1/√n:",
        "",
        best_vs_n_table(tables.best, ns),
        "",
        "Least-squares fit √d·λ* = a·ln(ln n) + b (minima at a grid edge left out):",
        "",
        fit_md_table(tables.fits, "paper (n = 2…250, 1024²)"),
        "",
    ]
