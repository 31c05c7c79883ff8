"""Pipeline benchmark: GF-4-like scene series end to end on a LocalCluster.

For each scene size (default ¼, ½ and full GF-4 PMS size, 2560², 5120² and 10240² px; 7 dates ×
5 bands) it simulates the L1A products once (cached under ``--data``), then runs
``python -m pipeline run`` machinery on them and reports wall time, the split by phase (stage =
read + RPC warp, solve = solve and blend, products = COGs + quicklooks), the task seconds of
the solve phase summed over its tasks (reading halos, solving, and the rest of the row and
seam tasks: blending and writing), peak memory of the driver plus all worker processes (RSS
sampled every 0.2 s), and solver throughput.

Usage::

    python benchmarks/pipeline.py --sizes 2560 5120          # the ¼ and ½ runs
    python benchmarks/pipeline.py --sizes 10240               # full size (needs ~8 GB of disk)
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import threading
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# ``pipeline`` package: drop the folder before importing it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import psutil  # noqa: E402

from pipeline.config import Config, parse  # noqa: E402
from pipeline.inputs.synthetic import make_gf4_series  # noqa: E402
from pipeline.run import run  # noqa: E402


class PeakMemory:
    """Peak summed RSS of this process and its children (the LocalCluster workers)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak = 0
        self.peak_at = 0.0  # seconds after the start
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass  # a process ended between listing and reading
            if total > self.peak:
                self.peak, self.peak_at = total, time.perf_counter() - self._started
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def products(data: Path, size: int, dates: int) -> list[Path]:
    """The simulated series for ``size`` (generated once, then reused)."""
    folder = data / f"gf4-{size}-{dates}"
    done = folder / "COMPLETE"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        t0 = time.perf_counter()
        sim = make_gf4_series(folder, n_dates=dates, size=size, seed=0, cloud_style="reference")
        done.write_text("\n".join(str(p) for p in sim.paths))
        print(f"  simulated {dates} dates of {size}² px in {time.perf_counter() - t0:.0f} s")
    return [Path(p) for p in done.read_text().split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2560, 5120, 10240])
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--tile-size", type=int, default=1024)
    parser.add_argument("--overlap", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", type=Path, default=Path("bench-output/data"))
    parser.add_argument("--out", type=Path, default=Path("bench-output/runs"))
    args = parser.parse_args()

    rows = []
    for size in args.sizes:
        paths = products(args.data, size, args.dates)
        out = args.out / f"gf4-{size}"
        shutil.rmtree(out, ignore_errors=True)
        config = parse(
            {
                "inputs": {"kind": "gf4", "paths": [str(p) for p in paths]},
                "output": {"path": str(out)},
                "tiling": {"tile_size": args.tile_size, "overlap": args.overlap},
                "cluster": {"n_workers": args.workers, "threads_per_worker": 1, "dashboard": False},
            },
            Config,
        )
        with PeakMemory() as memory:
            t0 = time.perf_counter()
            summary = run(config, overwrite=True)
            wall = time.perf_counter() - t0
        assert summary.ok, summary.describe()
        with open(out / "diagnostics.csv") as fh:
            diag = list(csv.DictReader(fh))
        solve_cpu = sum(float(r["seconds"]) for r in diag)
        pixel_dates = sum(int(r["d"]) * int(r["n"]) for r in diag)
        phases = dict(summary.phase_seconds)
        rows.append((size, summary, wall, phases, memory.peak, solve_cpu, pixel_dates))
        tasks = _task_seconds(out / "work" / "done")
        print(
            f"  {size}²: {wall:.1f} s, peak {memory.peak / 2**30:.2f} GiB "
            f"(in {_phase_at(memory.peak_at, summary.phase_seconds)}); "
            + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
            + "\n  task seconds summed over workers: "
            + ", ".join(f"{k} {v:.1f}" for k, v in tasks.items())
        )

    print(
        f"\n{'scene':>8}{'tiles':>7}{'wall s':>9}{'stage':>8}{'solve+blend':>12}"
        f"{'products':>9}{'peak GiB':>10}{'solver Mpx·date/s':>19}"
    )
    for size, summary, wall, phases, peak, solve_cpu, pixel_dates in rows:
        print(
            f"{size:>7}²{summary.tiles * summary.bands:>7}{wall:>9.1f}"
            f"{phases.get('stage', 0):>8.1f}{phases.get('solve', 0):>12.1f}"
            f"{phases.get('products', 0):>9.1f}"
            f"{peak / 2**30:>10.2f}{pixel_dates / solve_cpu / 1e6:>19.1f}"
        )
    print("\nsolver throughput = pixel·dates of all halos / summed in-task solver seconds")


def _phase_at(seconds: float, phases: tuple[tuple[str, float], ...]) -> str:
    """The phase of the run that was under way ``seconds`` after it started."""
    elapsed = 0.0
    for name, length in phases:
        elapsed += length
        if seconds <= elapsed:
            return name
    return "the end"


def _task_seconds(done: Path) -> dict[str, float]:
    """Seconds inside the row and seam tasks, summed, from their completion markers."""
    totals = {"read halos": 0.0, "solve": 0.0, "blend+write rows": 0.0, "seams": 0.0}
    for marker in done.glob("*.json"):
        record = json.loads(marker.read_text())
        if "tiles" in record:  # a row task
            read = sum(float(t["read_seconds"]) for t in record["tiles"])
            solve = sum(float(t["seconds"]) for t in record["tiles"])
            totals["read halos"] += read
            totals["solve"] += solve
            totals["blend+write rows"] += float(record["seconds"]) - read - solve
        elif "seam" in record:
            totals["seams"] += float(record["seconds"])
    return totals


if __name__ == "__main__":
    main()
