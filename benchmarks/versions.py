"""Two commits of the pipeline end to end, each with its own defaults, back to back (#45).

``pipeline_run.py --settings 264e0ee`` runs an earlier version's *settings* on this version's
code, so every exact speed-up made since (compiled kernels, fewer copies, faster reads) counts
for both sides. This script runs the earlier *commit* itself, as a user who upgrades would
compare: each commit is checked out in a git worktree, and ``python -m pipeline run`` runs from
it (its own code first on the path, its own defaults: the configuration names only the inputs,
the output, the tiling and the cluster). Each commit first runs once untimed on a small series,
so that its compiled kernels are in its own cache before the timed runs; before each timed run
the inputs are dropped from the page cache (:func:`pipeline_run.evict_inputs`). Runs alternate
between the commits. Per run: wall time, CPU seconds of the run's processes and the peak of
their summed resident memory (``pipeline_run.PeakMemory``), with each process's share at the
peak. This script's own process is left out of both: it imports the pipeline (about 0.2 GiB)
and, where it simulated the series first, holds more.

    python benchmarks/versions.py 264e0ee HEAD --size 10240 --data /path/to/cache

The series are ``pipeline_run.py``'s simulated GF-4 products (made once in ``--data``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from pipeline_run import (  # this folder's
    ONE_BLAS_THREAD,
    PeakMemory,
    evict_inputs,
    products,
    run_sections,
)

REPO = Path(__file__).resolve().parent.parent


def checkout(commit: str, where: Path) -> str:
    """Check ``commit`` out as a detached worktree at ``where``; returns its full hash."""
    full = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), full],
        check=True,
        capture_output=True,
    )
    return full


def write_config(paths: list[Path], out: Path, workers: int, at: Path) -> Path:
    """A run configuration naming only what both commits read alike: each keeps its defaults."""
    at.write_text(yaml.safe_dump(run_sections(paths, out, workers, tile_size=1024, overlap=128)))
    return at


def run_commit(tree: Path, config: Path, out: Path, log: Path) -> dict[str, Any]:
    """``python -m pipeline run config`` from ``tree``; its wall time, CPU and peak memory (the
    run's processes only, this script's own left out), and each process's RSS at the peak."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, **ONE_BLAS_THREAD, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "pipeline", "run", str(config)]
    with PeakMemory(children_only=True) as memory, log.open("w") as sink:
        t0 = time.perf_counter()
        code = subprocess.run(command, cwd=tree, env=env, stdout=sink, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
    if code.returncode != 0:
        raise SystemExit(f"{tree}: the run failed (exit {code.returncode}); see {log}")
    return {
        "wall": wall,
        "cpu": memory.cpu_seconds,
        "peak_gib": memory.peak / 2**30,
        "peak_by_process_gib": [round(g, 2) for g in memory.shares()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+", help="commits to compare, e.g. 264e0ee HEAD")
    parser.add_argument("--size", type=int, default=10240)
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--warmup-size", type=int, default=1024, help="untimed first run (0: none)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path("bench-output/data"))
    parser.add_argument("--out", type=Path, default=Path("bench-output/versions"))
    args = parser.parse_args()
    if len(set(args.commits)) != len(args.commits):
        parser.error("name each commit once: its worktree, outputs and logs are named after it")

    args.out.mkdir(parents=True, exist_ok=True)
    paths = products(args.data, args.size, args.dates)
    trees = []
    try:
        for i, commit in enumerate(args.commits):
            tree = args.out.resolve() / f"tree{i}-{commit}"
            trees.append((checkout(commit, tree), tree))
        if args.warmup_size:
            small = products(args.data, args.warmup_size, args.dates)
            for (_, tree), commit in zip(trees, args.commits, strict=True):
                out = args.out.resolve() / f"warmup-{commit}"
                config = write_config(small, out, args.workers, args.out / f"warmup-{commit}.yaml")
                run_commit(tree, config, out, args.out / f"warmup-{commit}.log")
                shutil.rmtree(out, ignore_errors=True)
        rows: list[dict[str, Any]] = []
        for repeat in range(args.repeat):
            for (full, tree), commit in zip(trees, args.commits, strict=True):
                out = args.out.resolve() / f"run-{commit}"
                config = write_config(paths, out, args.workers, args.out / f"run-{commit}.yaml")
                evict_inputs(paths)
                started = time.strftime("%H:%M:%S", time.gmtime())
                measured = run_commit(tree, config, out, args.out / f"run-{commit}-{repeat}.log")
                row = {"commit": commit, "hash": full[:12], "started_utc": started, **measured}
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(out, ignore_errors=True)
    finally:
        for _, tree in trees:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)])
    print(f"\n{args.size}² × {args.dates} dates, {args.workers} workers, each commit's defaults")
    print("| commit | started (UTC) | wall | CPU, all processes | peak | at the peak, by process |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        split = " + ".join(f"{g:.2f}" for g in r["peak_by_process_gib"])
        print(
            f"| {r['commit']} ({r['hash']}) | {r['started_utc']} | {r['wall']:.1f} s "
            f"| {r['cpu']:.1f} s | {r['peak_gib']:.2f} GiB | {split} GiB |"
        )
    first = [r["wall"] for r in rows if r["commit"] == args.commits[0]]
    for commit in args.commits[1:]:
        walls = [r["wall"] for r in rows if r["commit"] == commit]
        ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(first, walls, strict=True))
        print(f"{args.commits[0]} / {commit}, wall, run by run: {ratios}")


if __name__ == "__main__":
    main()
