"""Command line of the pipeline.

``python -m pipeline run CONFIG`` (the main job), ``plan CONFIG`` (which tiles a run would compute:
new / done / stale), ``status CONFIG`` (progress of a running or stopped run, and what is
published), ``batch ARCHIVE_CONFIG`` (reprocess an archive), ``experiment CONFIG`` (the paper's
simulation trials), ``simulate OUT_DIR`` (GF-4-like test data).

Exit codes: 0 success; 1 internal error (traceback with ``--debug``); 2 a :class:`PipelineError`
the user can fix (bad configuration or input, unreachable cluster), printed as one line
``error: …``; 3 the run finished but some tiles (``batch``: some series) failed (listed on
stderr; rerun to retry them).
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import PipelineError

__all__ = ["main"]

EXIT_OK, EXIT_INTERNAL, EXIT_USER, EXIT_TILES_FAILED = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline",
        description="Remove clouds and haze from GF-4 image time series (aATM) on Dask.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the pipeline described by a YAML configuration")
    run.add_argument("config", type=Path, help="YAML configuration (see configs/)")
    run.add_argument("--overwrite", action="store_true", help="redo all tiles, ignore markers")

    plan = sub.add_parser(
        "plan", help="list the tiles a run would compute (new, stale) or skip (done); no compute"
    )
    plan.add_argument("config", type=Path, help="YAML configuration")
    plan.add_argument(
        "--summary", action="store_true", help="print the counts only, not one line per tile"
    )
    status = sub.add_parser(
        "status", help="progress of a running or stopped run and what is published"
    )
    status.add_argument("config", type=Path, help="YAML configuration")

    from pipeline.batch import add_batch_parser
    from pipeline.experiment import add_experiment_parser

    add_batch_parser(sub)
    add_experiment_parser(sub)

    sim = sub.add_parser("simulate", help="write a simulated GF-4-like product series")
    sim.add_argument("out_dir", type=Path)
    sim.add_argument("--dates", type=int, default=7, help="number of dates (default 7)")
    sim.add_argument("--size", type=int, default=512, help="frame size in pixels (default 512)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--sensor", choices=["PMS", "IRS", "PMI"], default="PMS")
    sim.add_argument("--archive", action="store_true", help="write .tar.gz archives")
    sim.add_argument(
        "--style",
        choices=["moving", "perlin", "reference", "none"],
        default="moving",
        help="cloud simulation (default moving)",
    )
    return parser


def _run(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.run import run

    summary = run(load_config(args.config), overwrite=args.overwrite)
    print(summary.describe())
    if summary.ok:
        return EXIT_OK
    print(
        f"error: {len(summary.failures)} tile task(s) failed (see above); rerun the same "
        "command to retry only those",
        file=sys.stderr,
    )
    return EXIT_TILES_FAILED


def _plan(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.plan import describe_plan, make_plan, tile_states

    plan = make_plan(load_config(args.config))
    text = describe_plan(plan, tile_states(plan))
    if args.summary:
        text = "\n".join(
            line for line in text.splitlines() if not line.startswith(("stage ", "solve "))
        )
    print(text)
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.outputs import Layout
    from pipeline.plan import describe_status

    print(describe_status(Layout(Path(load_config(args.config).output.path))))
    return EXIT_OK


def _simulate(args: argparse.Namespace) -> int:
    from pipeline.fixtures import make_gf4_series

    made = make_gf4_series(
        args.out_dir,
        n_dates=args.dates,
        size=args.size,
        seed=args.seed,
        sensor=args.sensor,
        cloud_style=args.style,
        archive=args.archive,
    )
    for path in made.paths:
        print(path)
    print(f"truth: {made.truth_path}")
    return EXIT_OK


def _quiet_distributed() -> None:
    """Keep the terminal for progress: distributed logs every worker start and stop at INFO."""
    import distributed  # noqa: F401  (its import sets the levels we override)

    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipeline``; returns the exit code.

    Parameters
    ----------
    argv
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 success, 1 internal error, 2 user-fixable error, 3 some tiles (or series) failed.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    _quiet_distributed()
    try:
        if args.command == "batch":
            from pipeline.batch import run_batch_command

            return int(run_batch_command(args))
        if args.command == "experiment":
            from pipeline.experiment import run_experiment_command

            return int(run_experiment_command(args))
        commands = {"run": _run, "plan": _plan, "status": _status, "simulate": _simulate}
        return commands[args.command](args)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        else:
            print(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                "traceback)",
                file=sys.stderr,
            )
        return EXIT_INTERNAL
