"""Every tile of a finished tile-scope run solved again bare: the solver's own CPU time, no I/O.

Each (band, tile) halo of the run's staged ``OUT/work/input.zarr`` is solved as the run solves
it (:func:`pipeline_run.bare_tile`: :func:`pipeline.solve.tile.solve_matrix`, then
:func:`~pipeline.solve.tile.written_layers`), one at a time on one thread, for each ``--settings``
(a key of ``pipeline_run.SETTINGS``: ``default`` is today's
:class:`~pipeline.config.SolverConfig`), alternated ``--repeat`` times. It prints the summed
thread CPU seconds, split between halos with unobserved entries (a date's footprint misses part
of the halo: the solver's masked path) and fully observed ones, and the iterations.

To compare two versions of the code, run it from each checkout on the same run's output, e.g.
``PYTHONPATH=TREE python TREE/benchmarks/bare_tiles.py OUT``; the same bits give the same
iterations, so the CPU seconds compare like for like (docs/PERFORMANCE.md).

Usage (OUTPUT: a finished run's ``output.path``, which keeps ``work/``)::

    python -m pipeline run CONFIG
    python benchmarks/bare_tiles.py OUTPUT --settings default 264e0ee --repeat 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pipeline_run import (
    SETTINGS,
    TileCase,
    halo_matrix,
    row_markers,
    run_bands,
    solve_bare,
    tile_cases,
)

from pipeline.config import SolverConfig


def solve_all(out: Path, cases: list[TileCase], solver: SolverConfig) -> dict[str, float]:
    """CPU seconds of every case solved bare, split by masked and fully observed halos."""
    store = str(out / "work" / "input.zarr")
    totals = {"masked": 0.0, "full": 0.0, "wall": 0.0, "iterations": 0.0}
    for i, case in enumerate(cases):
        matrix = halo_matrix(store, case, solver.dtype)  # read once, outside the timing
        if i == 0:
            solve_bare(matrix, case, solver)  # untimed: numba's cache loaded
        seconds, usage, iterations = solve_bare(matrix, case, solver)
        totals["full" if matrix[1].all() else "masked"] += usage.cpu_seconds
        totals["wall"] += seconds
        totals["iterations"] += iterations
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a finished tile-scope run's output folder")
    parser.add_argument("--settings", nargs="+", default=["default"], choices=sorted(SETTINGS))
    parser.add_argument("--repeat", type=int, default=1, help="rounds, the settings alternated")
    args = parser.parse_args()
    cases = tile_cases(args.out, run_bands(args.out), row_markers(args.out))
    print(f"{len(cases)} (band, tile) halos of {args.out}")
    for round_ in range(1, args.repeat + 1):
        for name in args.settings:
            started = time.strftime("%H:%M:%S", time.gmtime())
            totals = solve_all(args.out, cases, SolverConfig(**SETTINGS[name]["solver"]))
            cpu = totals["masked"] + totals["full"]
            print(
                json.dumps(
                    {
                        "round": round_,
                        "settings": name,
                        "started_utc": started,
                        "cpu_s": round(cpu, 2),
                        "cpu_masked_s": round(totals["masked"], 2),
                        "cpu_full_s": round(totals["full"], 2),
                        "wall_s": round(totals["wall"], 2),
                        "iterations": int(totals["iterations"]),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
