"""Command line of the pipeline: every subcommand, its parser, and the exit codes.

``python -m pipeline run CONFIG`` (the main job), ``plan CONFIG`` (which tiles a run would compute:
new / done / stale), ``status CONFIG`` (progress of a running or stopped run, and what is
published), ``batch ARCHIVE_CONFIG`` (reprocess an archive), ``simulate OUT_DIR`` (GF-4-like
test data). The evaluation (the paper's experiments, real-cloud scores, their reports) is
``python -m cloudlab``, outside the product; it reuses :func:`common_options` and
:func:`execute`, so that both commands share their options and exit codes.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_TILES_FAILED",
    "EXIT_USER",
    "common_options",
    "execute",
    "main",
]

EXIT_OK, EXIT_INTERNAL, EXIT_USER, EXIT_TILES_FAILED = 0, 1, 2, 3


def common_options() -> argparse.ArgumentParser:
    """The global options ``--debug`` and ``-q``, as a parent parser.

    Give it as ``parents`` to the program's parser and to each subcommand's, so that the
    options are accepted before and after the subcommand (``run C --debug``).

    Returns
    -------
    argparse.ArgumentParser
        A parser without ``-h``, for ``parents=[...]``.
    """
    # SUPPRESS keeps a subcommand's unset default from overwriting one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks of internal errors",
    )
    common.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log warnings and errors only",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="python -m pipeline",
        description="Remove clouds and haze from GF-4 image time series on Dask.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    run = add("run", help="run the pipeline described by a YAML configuration")
    run.add_argument("config", type=Path, help="YAML configuration (see configs/)")
    run.add_argument("--overwrite", action="store_true", help="redo all tiles, ignore markers")

    plan = add(
        "plan", help="list the tiles a run would compute (new, stale) or skip (done); no compute"
    )
    plan.add_argument("config", type=Path, help="YAML configuration")
    plan.add_argument(
        "--summary", action="store_true", help="print the counts only, not one line per tile"
    )
    status = add("status", help="progress of a running or stopped run and what is published")
    status.add_argument("config", type=Path, help="YAML configuration")

    batch = add(
        "batch", help="reprocess an archive: group products into series, run new or changed ones"
    )
    batch.add_argument("config", type=Path, help="archive YAML (see configs/archive-example.yaml)")
    batch.add_argument("--dry-run", action="store_true", help="scan and group, process nothing")
    batch.add_argument("--force", action="store_true", help="reprocess every series")

    sim = add("simulate", help="write a simulated GF-4-like product series")
    sim.add_argument("out_dir", type=Path)
    sim.add_argument("--dates", type=int, default=7, help="number of dates (default 7)")
    sim.add_argument("--size", type=int, default=512, help="frame size in pixels (default 512)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--sensor",
        choices=["PMI", "PMS", "IRS"],
        default="PMI",
        help="product kind (default PMI: both sensors, as CRESDA delivers them)",
    )
    sim.add_argument("--archive", action="store_true", help="write .tar.gz archives")
    sim.add_argument(
        "--style",
        choices=["moving", "perlin", "reference", "none"],
        default="moving",
        help="cloud simulation (default moving)",
    )
    return parser


def _run(args: argparse.Namespace) -> int:
    from pipeline.config import Config, load
    from pipeline.run import run

    summary = run(load(args.config, Config), overwrite=args.overwrite)
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
    from pipeline.config import Config, load
    from pipeline.inputs.discovery import simulated_before
    from pipeline.plan import describe_plan, make_plan, tile_states
    from pipeline.store.layout import Layout

    config = load(args.config, Config)
    inputs = config.inputs
    if inputs.kind == "simulated" and simulated_before(inputs, Layout(config.output.path)) is None:
        # Planning must not compute: the demo's series does not exist until `run` makes it.
        print(
            f"inputs.kind simulated: `run` simulates the {inputs.n_dates} dates first (not made "
            "yet), so every tile is new"
        )
        return EXIT_OK
    plan = make_plan(config)
    text = describe_plan(plan, tile_states(plan))
    if args.summary:
        text = "\n".join(
            line for line in text.splitlines() if not line.startswith(("stage ", "solve "))
        )
    print(text)
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from pipeline.config import Config, load
    from pipeline.control.status import describe_status
    from pipeline.store.layout import Layout

    print(describe_status(Layout(Path(load(args.config, Config).output.path))))
    return EXIT_OK


def _batch(args: argparse.Namespace) -> int:
    from pipeline.batch import load_archive_config, run_batch

    summary = run_batch(load_archive_config(args.config), force=args.force, dry_run=args.dry_run)
    print(summary.describe())
    if summary.ok:
        return EXIT_OK
    print(
        f"error: {len(summary.failed)} series failed (see above); rerun the batch to retry them",
        file=sys.stderr,
    )
    return EXIT_TILES_FAILED


def _simulate(args: argparse.Namespace) -> int:
    from pipeline.inputs.synthetic import make_gf4_series

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


_COMMANDS = {
    "run": _run,
    "plan": _plan,
    "status": _status,
    "batch": _batch,
    "simulate": _simulate,
}


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
    return execute(_COMMANDS[args.command], args)


def execute(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one subcommand as a command line does: logging set up, errors turned into exit codes.

    Parameters
    ----------
    command
        The subcommand, taking the parsed arguments and returning its exit code.
    args
        The parsed arguments, with the options of :func:`common_options`.

    Returns
    -------
    int
        ``command``'s code; 2 after a :class:`~pipeline.errors.PipelineError` (printed as one
        line ``error: …``), 130 when interrupted, 1 after any other exception.
    """
    debug = getattr(args, "debug", False)
    logging.basicConfig(
        level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    _quiet_distributed()
    try:
        return command(args)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        else:
            print(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                "traceback)",
                file=sys.stderr,
            )
        return EXIT_INTERNAL
