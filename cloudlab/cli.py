"""Command line of the lab: ``python -m cloudlab experiment CONFIG``, ``heldout`` and ``report``.

``experiment CONFIG`` runs the paper's simulation trials, or scores solvers on real clouds for a
``kind: real-clouds`` config (docs/REAL-CLOUDS.md); ``report`` rewrites the tables and figures
of experiment runs, or the generated block of docs/EXPERIMENTS.md.

The global options (``--debug``, ``-q``) and the exit codes are the pipeline's
(:func:`pipeline.cli.common_options`, :func:`pipeline.cli.execute`): 0 success; 1 internal
error; 2 a :class:`~pipeline.errors.PipelineError` the user can fix (bad configuration), printed
as one line ``error: …``; 3 the experiment finished but some trials failed (listed on stderr).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.cli import EXIT_OK, EXIT_TILES_FAILED, common_options, execute

__all__ = ["main"]


def _site_arguments(parser: argparse.ArgumentParser, out: Path) -> None:
    """The arguments of the commands that score the real-cloud sites."""
    parser.add_argument("--out", type=Path, default=out, help="output dir")
    parser.add_argument("--site", action="append", default=None, help="only this site (repeatable)")
    parser.add_argument("--pairs", type=int, default=4, help="(target, source) pairs per site")


def _parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="python -m cloudlab",
        description="Experiments on the cloud-removal solvers: the paper's simulation study and "
        "scores on real clouds, with their reports.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    experiment = add(
        "experiment",
        help="randomised simulation trials over a λ grid (the paper's λ and MC study), or, "
        "for a `kind: real-clouds` config, scores on real clouds with a reference mask",
    )
    experiment.add_argument(
        "config", type=Path, help="YAML experiment config (configs/experiment-*)"
    )
    experiment.add_argument(
        "--out", type=Path, default=None, help="output dir (default: the config's `output`)"
    )
    experiment.add_argument("--no-report", action="store_true", help="write only the CSV tables")

    heldout = add(
        "heldout",
        help="the held-out real-cloud benchmark: every candidate default on every bundled "
        "site, defaults chosen by leave-one-site-out (docs/REAL-CLOUDS.md)",
    )
    _site_arguments(heldout, Path("runs/heldout"))
    heldout.add_argument("--workers", type=int, default=2, help="sites scored at once")
    heldout.add_argument(
        "--shadow-model",
        action="store_true",
        help="also score aATM with a shadow layer (measured, not among the defaults' candidates; "
        "docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--floor",
        action="store_true",
        help="also score every capped solve with its ground floored (solver.floor_ground; "
        "measured, not among the defaults' candidates; docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--persist",
        action="store_true",
        help="also offer ground that stays (mask.persist) in a fifth stage (measured, not among "
        "the defaults' candidates: it keeps real clouds in place on other days; "
        "docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--rethreshold",
        action="store_true",
        help="also offer the mask's thresholds again in an eighth stage, given the seven before "
        "(docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--scale-statistic",
        choices=("median", "quartile"),  # cloudcore.anomaly.SCALE_STATISTICS, without numba
        default="median",
        help="the statistic of the masks' anomaly scale over the entries below the ground "
        "(quartile: measured, not the default; docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--rho",
        type=_growth,
        default=None,
        help="the ALM's growth of mu per iteration in every solve (default: the pipeline's "
        "solver.rho, 2; the paper's is 1.5; docs/REAL-CLOUDS.md)",
    )
    heldout.add_argument(
        "--summarise-only",
        action="store_true",
        help="choose and report again from the tables already in --out",
    )

    provider = add(
        "provider",
        help="what a provider's mask buys: every site's pasted series as a STAC catalog, run "
        "blind and with inputs.quality (docs/REAL-CLOUDS.md)",
    )
    _site_arguments(provider, Path("runs/provider"))

    report = add(
        "report", help="rewrite an experiment run's tables and figures, or docs/EXPERIMENTS.md"
    )
    report.add_argument(
        "--run",
        type=Path,
        action="append",
        default=[],
        help="rewrite tables.md and figures of this experiment run directory (repeatable)",
    )
    report.add_argument("--doc", type=Path, help="EXPERIMENTS.md to regenerate")
    report.add_argument("--grid", type=Path, help="output dir of the λ-grid run")
    report.add_argument("--bestlambda", type=Path, help="output dir of the best-λ run")
    report.add_argument("--figures", type=Path, help="folder for the document's figures")
    report.add_argument("--grid-command", action="append", default=[])
    report.add_argument("--bestlambda-command", action="append", default=[])
    return parser


def _experiment(args: argparse.Namespace) -> int:
    from cloudlab import experiment_kind, load_experiment_config, run_experiment

    if experiment_kind(args.config) == "real-clouds":
        return _real_clouds(args)
    cfg = load_experiment_config(args.config)
    logging.getLogger("cloudlab").info("experiment configuration:\n%s", cfg.to_yaml())
    result = run_experiment(cfg, output=args.out, report=not args.no_report)
    print(
        f"{result.trials} trials, {result.rows} rows in {result.seconds:.1f} s -> {result.output}"
    )
    if result.ok:
        return EXIT_OK
    for key, message in sorted(result.failures.items()):
        print(f"error: trial {key} failed: {message}", file=sys.stderr)
    return EXIT_TILES_FAILED


def _real_clouds(args: argparse.Namespace) -> int:
    """``experiment`` of a ``kind: real-clouds`` config (docs/REAL-CLOUDS.md)."""
    from cloudlab import load_real_clouds_config, run_real_clouds

    cfg = load_real_clouds_config(args.config)
    logging.getLogger("cloudlab").info("real-clouds configuration:\n%s", cfg.to_yaml())
    result = run_real_clouds(cfg, output=args.out, report=not args.no_report)
    print(
        f"{result.pairs} pairs, {result.solves} solves in {result.seconds:.1f} s -> {result.output}"
    )
    if result.mask_note:
        print(f"note: {result.mask_note}")
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from cloudlab import write_experiments_md, write_report

    for run in args.run:
        print(write_report(run, title=run.name))
    if args.doc:
        doc = write_experiments_md(
            args.doc,
            grid_run=args.grid,
            bestlambda_run=args.bestlambda,
            figures=args.figures,
            grid_commands=args.grid_command,
            bestlambda_commands=args.bestlambda_command,
        )
        print(doc)
    return EXIT_OK


def _growth(text: str) -> float:
    """``--rho``: a growth of μ per iteration (:func:`cloudcore._growth.check_growth`)."""
    from cloudcore._growth import check_growth

    try:
        return check_growth(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a finite number > 1 (the paper's is 1.5)"
        ) from None


def _heldout(args: argparse.Namespace) -> int:
    """``heldout``: score the sites (or only summarise), choose, write ``report.md``."""
    from cloudlab.heldout import run_heldout, summarise

    if args.summarise_only:
        summary = summarise(args.out)
    else:
        summary = run_heldout(
            args.out,
            args.site,
            pairs=args.pairs,
            workers=args.workers,
            shadow_model=args.shadow_model,
            floor=args.floor,
            persist=args.persist,
            rethreshold=args.rethreshold,
            scale_statistic=args.scale_statistic,
            rho=args.rho,
        )
    growth = "" if args.rho is None else f" (every solve with rho {args.rho:g})"
    print(f"default {summary['pipeline_default']}{growth} -> {args.out / 'report.md'}")
    return EXIT_OK


def _provider(args: argparse.Namespace) -> int:
    """``provider``: the sites through ``inputs.kind: stac``, blind and with their mask."""
    from cloudlab.provider import run_provider

    run_provider(args.out, args.site, pairs=args.pairs)
    print((args.out / "provider.md").read_text(), end="")
    return EXIT_OK


_COMMANDS = {
    "experiment": _experiment,
    "report": _report,
    "heldout": _heldout,
    "provider": _provider,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m cloudlab``; returns the exit code.

    Parameters
    ----------
    argv
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 success, 1 internal error, 2 user-fixable error, 3 some trials failed.
    """
    args = _parser().parse_args(argv)
    return execute(_COMMANDS[args.command], args)
