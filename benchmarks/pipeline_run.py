"""Pipeline benchmark: GF-4-like scene series end to end on a LocalCluster, against its bare solver.

For each scene size (default ¼, ½ and full GF-4 PMS size, 2560², 5120² and 10240² px; 7 dates ×
5 bands) it simulates the L1A products once (cached under ``--data``), then, for each solver
scope (``--scopes tile scene``), runs the pipeline on them (:func:`pipeline.run.run`, a local
cluster of ``--workers`` single-threaded workers; each run in a fresh process) and reports

* wall time (the inputs dropped from the page cache first: :func:`evict_inputs`), the split
  by phase (setup, stage = read + RPC warp, solve = solve and blend and,
  in tile scope, the bands' COGs and the provenance they write; mask+products = the mask
  layer, the mask COGs and quicklooks (and scene scope's band COGs); publish), peak memory of the
  driver plus all worker processes (RSS sampled every 0.2 s);
* the seconds and CPU seconds inside each stage's tasks summed over the workers (the run
  summary's ``task_seconds``), and of the row tasks: reading halos, solving, blending and
  writing (their completion markers); in tile scope each worker's seconds in tasks against
  the span of all tasks, and the span perfectly packed (:meth:`pipeline.control.status.RunSummary.
  packing`);
* the **bare reference**, measured in this process right after the run, on the run's own
  staged ``input.zarr``: the run's own solver (:func:`pipeline.solve.tile.solve_matrix`, i.e.
  :func:`cloudcore.decompose` and, for the default, :func:`cloudcore.refine`) on each tile's
  halo matrix (tile scope: the same d × n and data as the pipeline's tiles, so the same
  iterations), one at a time on one thread, no I/O; in scene scope
  :func:`cloudcore.scene.solve_blocks` of each band's cores in this process on one thread (as
  ``benchmarks/scene_scope.py``; it holds a band's state once more: about 20 GB at full GF-4
  size, beyond a 24 GB machine after the run). Tiles beyond
  ``--bare-tiles`` are not all solved again: the bare time of the others is the sample's
  seconds per iteration and pixel × their d × iterations; for the tiles solved bare, the
  solving thread's CPU, kernel seconds, page faults and preemptions in the run (the tile
  records) against bare (:class:`pipeline.cluster.usage.CpuUsage`);
* the two ratios of issue #17, side by side from this one run:
  *per iteration* = in-pipeline seconds per iteration and pixel / bare (tile scope: over the
  tiles solved bare; scene scope: the band's wall per iteration × workers / bare), and
  *wall* = wall time / (bare solve time of all tiles (bands) / workers); and the wall ratio's
  floor that the run's own work sets (:func:`wall_ratio_floor`): the bare solve plus the CPU
  of everything else the run did, on the machine's cores never idle;
* with ``--contention``, how much of the per-iteration ratio is two solves sharing the memory
  bandwidth: the first band's tiles solved bare in one worker-like process alone, then in two
  at once (both with the workers' environment).

Usage::

    python benchmarks/pipeline_run.py --sizes 2560 --data /work/bench-data   # ¼ size, both scopes
    python benchmarks/pipeline_run.py --sizes 10240 --scopes tile --bare-tiles 40   # full size
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import os
import shutil
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from pipeline.cluster.usage import CpuUsage
from pipeline.config import Config, SolverConfig, parse
from pipeline.inputs.synthetic import make_gf4_series
from pipeline.run import run
from pipeline.store.cube import advise_files


class PeakMemory:
    """Peak summed RSS of this process and its children (the LocalCluster workers), and the CPU
    seconds they used (children as last sampled: a worker's last 0.2 s may be missed).

    With ``children_only`` this process is left out of both: a benchmark that runs the
    pipeline as a subprocess (``versions.py``) measures that run, not its own ~0.2 GiB of
    imported libraries.
    """

    #: Samples between two listings of the children (5 s at the default interval).
    CHILDREN_EVERY = 25

    def __init__(self, interval: float = 0.2, *, children_only: bool = False) -> None:
        self.interval = interval
        self.children_only = children_only
        self.peak = 0
        self.times: dict[int, Any] = {}  # pid → its CPU times (psutil) at the last sample
        self._before: Any = None  # this process's CPU times on entering
        self.peak_at = 0.0  # seconds after the start
        self.at_peak: dict[int, int] = {}  # pid → RSS at the peak
        # This process's own highest RSS and when: the driver's high-water mark may come at
        # another moment than the sum's, when the workers hold less.
        self.driver_highest = (0, 0.0)
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        procs: list[psutil.Process] = []
        for count in itertools.count():
            if self._stop.is_set():
                break
            # Listing the children reads every process of the machine: 1.3 ms of CPU a sample
            # where reading our few processes takes a fraction of that, and the sampler runs on
            # the cores it measures. The workers live as long as the run, so the list is
            # refreshed every CHILDREN_EVERY samples.
            if count % self.CHILDREN_EVERY == 0:
                procs = [*([] if self.children_only else [me]), *me.children(recursive=True)]
            rss: dict[int, int] = {}
            for proc in procs:
                try:
                    with proc.oneshot():
                        rss[proc.pid] = proc.memory_info().rss
                        self.times[proc.pid] = proc.cpu_times()
                except psutil.Error:
                    pass  # a process ended between listing and reading
            total = sum(rss.values())
            if rss.get(me.pid, 0) > self.driver_highest[0]:
                self.driver_highest = (rss[me.pid], time.perf_counter() - self._started)
            if total > self.peak:
                self.peak, self.peak_at = total, time.perf_counter() - self._started
                self.at_peak = rss
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._started = time.perf_counter()
        # Children started inside count from zero; this process from here, unless left out.
        self._before = None if self.children_only else psutil.Process().cpu_times()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def shares(self, leave_out: int | None = None) -> list[float]:
        """Each process's RSS at the peak, GiB, largest first (not the process ``leave_out``)."""
        return sorted((v / 2**30 for k, v in self.at_peak.items() if k != leave_out), reverse=True)

    def split(self) -> str:
        """The peak's RSS by process: this one (client and scheduler), then the others."""
        mine = self.at_peak.get(os.getpid(), 0)
        others = self.shares(leave_out=os.getpid())
        return f"driver {mine / 2**30:.2f}, others " + " + ".join(f"{g:.2f}" for g in others)

    def _seconds(self, pids: Any, user: bool = True) -> float:
        """System (and user) CPU seconds of ``pids`` since entering (this process's)."""

        def cpu(t: Any) -> float:
            return t.system + (t.user if user else 0.0)

        before = 0.0 if self._before is None else cpu(self._before)
        return sum(cpu(self.times[p]) for p in pids if p in self.times) - before

    @property
    def driver_cpu(self) -> float:
        """CPU seconds of this process since entering (the client and the scheduler)."""
        return self._seconds([os.getpid()])

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds of this process (since entering) and of its children."""
        return self._seconds(self.times)

    @property
    def system_seconds(self) -> float:
        """Of :attr:`cpu_seconds`, those spent in the kernel (page faults, file I/O, fsync)."""
        return self._seconds(self.times, user=False)


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


def evict_inputs(paths: list[Path]) -> None:
    """Drop the input products' files from the page cache.

    Every run then reads its inputs from the disk, as a cluster reading a shared file system
    does: otherwise whether the frames of the last run are still cached (8.8 GB at full size,
    against 23 GB of memory and a cube larger than that) decides how long the scan of their
    DN and staging wait, and two runs of the same code differ by tens of seconds.
    ``posix_fadvise(DONTNEED)`` drops clean pages only and needs no privileges.
    """
    if not hasattr(os, "POSIX_FADV_DONTNEED"):
        return
    inside = (f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))))
    advise_files([f for f in inside if f.is_file()], os.POSIX_FADV_DONTNEED)


# --- the bare reference ------------------------------------------------------------------------


@dataclass(frozen=True)
class TileCase:
    """One (band, tile) solve of the run: where its halo is, and what the pipeline measured."""

    band_index: int
    rows: tuple[int, int]  # halo rows [start, stop)
    cols: tuple[int, int]
    d: int
    iterations: int
    seconds: float  # in the pipeline (the tile record's ``seconds``)
    usage: CpuUsage  # in the pipeline: the solving thread's (``cpu_seconds`` ...)


def halo_matrix(store: str, case: TileCase, dtype: str) -> tuple[np.ndarray, np.ndarray, int]:
    """D (d × n kept dates, a transposed view), its mask and n, as the run's tile solve builds
    them (:func:`pipeline.solve.tile.tile_matrix`)."""
    import zarr

    from pipeline.solve.tile import tile_matrix

    source = zarr.open_array(store=store, path="observed", mode="r")
    (r0, r1), (c0, c1) = case.rows, case.cols
    stack: np.ndarray = np.asarray(source[:, case.band_index, r0:r1, c0:c1])
    D, mask, kept = tile_matrix(stack, dtype)
    return D, mask, max(kept.size, 2)


def bare_tile(store: str, case: TileCase, solver: SolverConfig) -> tuple[float, CpuUsage, int]:
    """Seconds, the solving thread's usage (CPU seconds, kernel seconds, page faults,
    preemptions) and iterations of the run's solve (:func:`pipeline.solve.tile.solve_matrix`:
    decompose, then refine when the solver refines; then
    :func:`~pipeline.solve.tile.written_layers`: the ground clipped and, with the cap, capped;
    with ``solver.shadow_free_fill`` its second solve) of the tile's halo matrix, on one thread,
    without reading or writing."""
    return solve_bare(halo_matrix(store, case, solver.dtype), case, solver)


def solve_bare(
    matrix: tuple[np.ndarray, np.ndarray, int], case: TileCase, solver: SolverConfig
) -> tuple[float, CpuUsage, int]:
    """:func:`bare_tile` of a halo matrix already read (:func:`halo_matrix`)."""
    from pipeline.solve.tile import solve_matrix, solver_lambda, written_layers

    D, mask, n = matrix
    lam = solver_lambda(solver, case.d, n)
    shape = (case.rows[1] - case.rows[0], case.cols[1] - case.cols[0])
    started, usage = time.perf_counter(), CpuUsage.of_thread()
    result = solve_matrix(D, mask, solver, shape, lam, threads=1)
    written_layers(result, D, mask, solver, threads=1)  # a second solve's iterations not counted
    return time.perf_counter() - started, CpuUsage.of_thread() - usage, int(result.iterations)


def bare_tiles(
    store: str, cases: list[TileCase], solver: SolverConfig
) -> list[tuple[float, CpuUsage, int]]:
    """:func:`bare_tile` of each case, after one untimed warm-up solve (numba's cache)."""
    bare_tile(store, cases[0], solver)
    return [bare_tile(store, c, solver) for c in cases]


def _worker_like_pool(processes: int) -> ProcessPoolExecutor:
    """Fresh processes with the Dask workers' environment (glibc malloc, GDAL cache)."""
    from pipeline.cluster.backends import WORKER_ENV, spawn_environment

    with spawn_environment(WORKER_ENV):  # read by glibc at process start: set while spawning
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(processes, mp_context=ctx)
        list(pool.map(time.sleep, [0.0] * processes))  # start them now
    return pool


def contention(
    store: str, cases: list[TileCase], solver: SolverConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Summed bare (seconds, CPU seconds) of ``cases`` in one worker-like process alone, and
    the mean of two such processes solving them at the same time."""

    def summed(results: list[tuple[float, CpuUsage, int]]) -> np.ndarray:
        return np.array([sum(r[0] for r in results), sum(r[1].cpu_seconds for r in results)])

    with _worker_like_pool(2) as pool:
        alone = summed(pool.submit(bare_tiles, store, cases, solver).result())
        both = [pool.submit(bare_tiles, store, cases, solver) for _ in range(2)]
        first, second = (summed(f.result()) for f in both)
        together = (first + second) / 2
    return alone, together


def row_markers(out: Path) -> list[dict[str, Any]]:
    """The completion records of a tile-scope run's row tasks (one read of ``work/done``)."""
    records = (json.loads(m.read_text()) for m in (out / "work" / "done").glob("*.json"))
    return [r for r in records if "tiles" in r and "scope" not in r]


def run_bands(out: Path) -> list[str]:
    """The bands of a finished run, in the order of its staged input's band axis."""
    return list(json.loads((out / "COMPLETE.json").read_text())["bands"])


def tile_cases(out: Path, plan_bands: list[str], rows: list[dict[str, Any]]) -> list[TileCase]:
    """Every (band, tile) of a tile-scope run, from its row markers ``rows`` and its tiling."""
    from pipeline.grid.tiling import TileGrid

    attrs = json.loads((out / "cube.zarr" / "zarr.json").read_text())["attributes"]
    tiling = attrs["tiling"]
    source = json.loads((out / "work" / "input.zarr" / "observed" / "zarr.json").read_text())
    height, width = source["shape"][-2:]
    grid = TileGrid(height, width, tiling["tile_size"], tiling["overlap"])
    halos = {(t.row, t.col): t.halo for t in grid}
    cases = []
    for record in (tile for row in rows for tile in row["tiles"]):
        halo = halos[record["row"], record["col"]]
        cases.append(
            TileCase(
                band_index=plan_bands.index(record["band"]),
                rows=(halo.row_off, halo.row_end),
                cols=(halo.col_off, halo.col_end),
                d=int(record["d"]),
                iterations=int(record["iterations"]),
                seconds=float(record["seconds"]),
                usage=CpuUsage.from_record(record),
            )
        )
    return cases


def sample(cases: list[TileCase], count: int) -> list[TileCase]:
    """All cases, or ``count`` of them evenly strided (every band and tile row represented)."""
    if len(cases) <= count:
        return cases
    picks = np.linspace(0, len(cases) - 1, count).round().astype(int)
    return [cases[i] for i in sorted(set(picks))]


@dataclass
class Ratios:
    """The bare reference of one run and the two ratios of issue #17, in wall seconds; and the
    same in CPU seconds, which other processes on a shared machine do not inflate."""

    bare_seconds: float  # bare solve time of every tile (band), summed
    per_iteration: float
    wall: float
    bare_cpu: float = float("nan")  # bare CPU seconds of every tile, summed
    per_iteration_cpu: float = float("nan")  # in-pipeline / bare CPU seconds, same tiles
    notes: list[str] = field(default_factory=list)
    #: The solving thread's usage over the tiles solved bare, in the pipeline and bare.
    solve_usage: tuple[CpuUsage, CpuUsage] | None = None


def tile_ratios(
    out: Path, cases: list[TileCase], wall: float, solver: SolverConfig, workers: int, count: int
) -> Ratios:
    """Bare reference and ratios of a tile-scope run (see the module docstring)."""
    store = str(out / "work" / "input.zarr")
    solved = [c for c in cases if c.iterations > 0]
    picked = sample(solved, count)
    bare = bare_tiles(store, picked, solver)
    for case, (_, _, it) in zip(picked, bare, strict=True):
        if it != case.iterations:
            print(f"  note: bare solve took {it} iterations, the pipeline {case.iterations}")
    work = sum(c.d * c.iterations for c in picked)  # pixel-iterations of the sample
    # Tiles not solved bare: the sample's seconds per pixel-iteration × their own work.
    rest = sum(c.d * c.iterations for c in solved if c not in set(picked)) / work
    bare_wall = sum(b[0] for b in bare)
    in_run = sum((c.usage for c in picked), CpuUsage())
    alone = sum((b[1] for b in bare), CpuUsage())
    bare_cpu = alone.cpu_seconds
    return Ratios(
        bare_seconds=bare_wall * (1 + rest),
        per_iteration=sum(c.seconds for c in picked) / bare_wall,
        wall=wall / (bare_wall * (1 + rest) / workers),
        bare_cpu=bare_cpu * (1 + rest),
        per_iteration_cpu=in_run.cpu_seconds / bare_cpu,
        notes=[f"bare: {len(picked)} of {len(solved)} tile solves measured"],
        solve_usage=(in_run, alone),
    )


def scene_ratios(
    out: Path, bands: list[str], wall: float, solver: SolverConfig, workers: int
) -> Ratios:
    """Bare reference and ratios of a scene-scope run: each band's cores solved block-wise in
    this process on one thread (``benchmarks/scene_scope.py``'s reference)."""
    import zarr

    from cloudcore.scene import Block, BlockGroup, LocalShards
    from pipeline.grid.tiling import TileGrid
    from pipeline.solve.scene_scope import solve_shards

    attrs = json.loads((out / "cube.zarr" / "zarr.json").read_text())["attributes"]
    source = zarr.open_array(store=str(out / "work" / "input.zarr"), path="observed", mode="r")
    n, _, height, width = source.shape
    # D as float32, as the shards hold it: this benchmark's inputs are GF-4 L1A products, warped
    # from their RPCs, whose values are no DN quotients (cloudcore.scene.Block's max_dn).
    grid = TileGrid(height, width, attrs["tiling"]["tile_size"], 0)
    bare_total, bare_cpu, pipe_iter, bare_iter = 0.0, 0.0, 0.0, 0.0
    for b, band in enumerate(bands):
        marker = next((out / "work" / "done").glob(f"blended-{band}-*.json"), None)
        record = json.loads(marker.read_text()) if marker else None
        blocks = [
            Block(np.asarray(source[:, b, t.core.row_off : t.core.row_end,
                                    t.core.col_off : t.core.col_end]),
                  solver.dtype, origin=(t.core.row_off, t.core.col_off))
            for t in grid
        ]  # fmt: skip
        group = LocalShards([BlockGroup(blocks, threads=1)])
        started, cpu = time.perf_counter(), time.thread_time()
        outcome = solve_shards(group, height * width, n, solver)
        bare_total += time.perf_counter() - started
        bare_cpu += time.thread_time() - cpu
        bare_iter += outcome.seconds_per_iteration
        if record is not None:
            pipe_iter += record["seconds_per_iteration"]
        del blocks, group
    return Ratios(
        bare_seconds=bare_total,
        per_iteration=pipe_iter * workers / bare_iter,
        wall=wall / (bare_total / workers),
        bare_cpu=bare_cpu,
        notes=["per iteration: band wall per iteration × workers / bare per iteration"],
    )


# --- the run -----------------------------------------------------------------------------------


def run_sections(
    paths: list[Path], out: Path, workers: int, tile_size: int, overlap: int
) -> dict[str, Any]:
    """A run's configuration sections other than the solver's and the mask's: the inputs, the
    output, the tiling and the cluster (``workers`` of one thread, no dashboard)."""
    return {
        "inputs": {"kind": "gf4", "paths": [str(p) for p in paths]},
        "output": {"path": str(out)},
        "tiling": {"tile_size": tile_size, "overlap": overlap},
        "cluster": {"n_workers": workers, "threads_per_worker": 1, "dashboard": False},
    }


def run_once(
    paths: list[Path], out: Path, scope: str, args: argparse.Namespace, settings: str = "default"
) -> dict[str, Any]:
    """Run the pipeline once with :data:`SETTINGS` ``settings`` and measure it; returns the row
    of the summary table."""
    shutil.rmtree(out, ignore_errors=True)
    evict_inputs(paths)
    sections = run_sections(paths, out, args.workers, args.tile_size, args.overlap)
    sections["tiling"].update(SETTINGS[settings].get("tiling", {}))
    sections["solver"] = {"scope": scope, **SETTINGS[settings]["solver"]}
    sections["mask"] = SETTINGS[settings]["mask"]
    config = parse(sections, Config)
    with PeakMemory() as memory:
        t0 = time.perf_counter()
        summary = run(config, overwrite=True)
        wall = time.perf_counter() - t0
    assert summary.ok, summary.describe()
    phases = dict(summary.phase_seconds)
    by_stage = summary.task_seconds
    rows = row_markers(out)
    rows_split = _solve_task_seconds(rows)
    driver = memory.driver_cpu  # client + scheduler
    driver_rss, driver_at = memory.driver_highest  # client + scheduler, seconds in
    in_tasks = sum(c for _, _, c, _ in by_stage)
    cores = len(os.sched_getaffinity(0))  # the cores this run may use
    print(
        f"  {scope} scope: {wall:.1f} s, peak {memory.peak / 2**30:.2f} GiB "
        f"(in {_phase_at(memory.peak_at, summary.phase_seconds)}: {memory.split()} GiB); "
        + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
        + f"; before them (discovery, the inputs' DN scan) {wall - sum(phases.values()):.1f} s"
        + "\n  task seconds (CPU seconds, of which in the kernel) summed over workers, by stage: "
        + ", ".join(f"{k} {w:.1f} ({c:.1f}, {sys_:.1f})" for k, w, c, sys_ in by_stage)
        + (
            "; of the row tasks: " + ", ".join(f"{k} {v:.1f}" for k, v in rows_split.items() if v)
            if any(rows_split.values())
            else ""
        )
        + f"\n  CPU outside tasks: driver (client, scheduler) {driver:.1f} s, worker and nanny "
        f"processes {memory.cpu_seconds - driver - in_tasks:.1f} s"
        + (" (the scene solve's actors among them)" if scope == "scene" else "")
        + f"\n  the driver's own highest RSS: {driver_rss / 2**30:.2f} GiB at {driver_at:.0f} s "
        f"(in {_phase_at(driver_at, summary.phase_seconds)})"
        + (f"\n  {summary.packing()}" if scope == "tile" else "")  # scene scope: actors
    )
    bands = run_bands(out)
    cases = tile_cases(out, bands, rows) if scope == "tile" else []
    if scope == "tile":
        ratios = tile_ratios(out, cases, wall, config.solver, args.workers, args.bare_tiles)
    else:
        ratios = scene_ratios(out, bands, wall, config.solver, args.workers)
    print(
        f"  bare solve time {ratios.bare_seconds:.1f} s (ideal wall "
        f"{ratios.bare_seconds / args.workers:.1f} s on {args.workers} workers); "
        f"per-iteration ratio {ratios.per_iteration:.2f}, wall ratio {ratios.wall:.2f} "
        f"({'; '.join(ratios.notes)})\n"
        f"  in CPU seconds: bare {ratios.bare_cpu:.1f}, per-iteration ratio "
        f"{_ratio_or_dash(ratios.per_iteration_cpu)}; the run's processes used "
        f"{memory.cpu_seconds:.1f} CPU s "
        f"({memory.cpu_seconds / wall:.2f} cores on average of {cores}): work ratio "
        f"{memory.cpu_seconds / ratios.bare_cpu:.2f} (= the wall ratio on a quiet machine "
        f"with the workers always busy); in the kernel {memory.system_seconds:.1f} CPU s "
        f"(page faults, file I/O)"
    )
    # Everything the run did but solve: in tile scope all CPU less the solving threads'; in scene
    # scope the tasks' and the driver's CPU only (the workers' own housekeeping runs in the same
    # processes as the actors' solve and cannot be told apart), so its floor is a lower bound.
    if scope == "tile":
        other_cpu = memory.cpu_seconds - rows_split["solve CPU"]
    else:
        other_cpu = in_tasks + driver
    floor = wall_ratio_floor(ratios, other_cpu, args.workers, cores)
    print(
        f"  the wall ratio's floor from this run's own work: {floor:.2f} (the bare solve's "
        f"{ratios.bare_cpu:.1f} CPU s plus the {other_cpu:.1f} CPU s of everything else the run "
        f"did{' in its tasks and driver' if scope == 'scene' else ''}, on {cores} cores "
        "never idle)"
    )
    if ratios.solve_usage is not None:
        in_run, bare = ratios.solve_usage
        print(
            f"  the solving thread, same tiles, in the run against bare: CPU "
            f"{in_run.cpu_seconds:.1f} against {bare.cpu_seconds:.1f} s, of which in the kernel "
            f"{in_run.kernel_seconds:.1f} against {bare.kernel_seconds:.1f} s; page faults "
            f"{in_run.page_faults} against {bare.page_faults}; preempted {in_run.preempted} "
            f"against {bare.preempted} times"
        )
    if args.contention and scope == "tile":
        first = [c for c in cases if c.band_index == 0 and c.iterations]
        alone, together = contention(str(out / "work" / "input.zarr"), first, config.solver)
        slower = together / alone
        print(
            f"  memory bandwidth: band {bands[0]}'s {len(first)} tiles bare in one worker-like "
            f"process {alone[0]:.1f} s ({alone[1]:.1f} CPU s), two at once {together[0]:.1f} s "
            f"({together[1]:.1f} CPU s) each: {slower[0]:.2f}× the wall, {slower[1]:.2f}× the CPU"
        )
    return {
        "wall": wall,
        "phases": phases,
        "peak": memory.peak,
        "tiles": summary.tiles * summary.bands,
        "ratios": ratios,
        "work": memory.cpu_seconds / ratios.bare_cpu,
        "floor": floor,
    }


def wall_ratio_floor(ratios: Ratios, other_cpu: float, workers: int, cores: int) -> float:
    """The smallest wall ratio a run's own work allows on ``cores`` cores.

    Parameters
    ----------
    ratios
        The run's bare reference.
    other_cpu
        CPU seconds of everything the run did besides solving.
    workers, cores
        The run's workers, and the cores they and everything else ran on.

    Returns
    -------
    float
        (bare CPU + ``other_cpu``) / ``cores``, the wall of the solve at exactly its bare cost
        with every core always busy, over the ideal wall (bare seconds / ``workers``). Where
        the workers are the cores, work that is not the solve can only raise the wall ratio
        above 1 by its share of the bare solve, however it is scheduled.
    """
    return (ratios.bare_cpu + other_cpu) / cores / (ratios.bare_seconds / workers)


def run_fresh(
    paths: list[Path], out: Path, scope: str, args: argparse.Namespace, settings: str = "default"
) -> dict[str, Any]:
    """:func:`run_once` in a process of its own, as ``python -m pipeline run`` would be: the
    driver's share of the peak must not include what an earlier run and its bare reference left
    in this process (a 2560² scene-scope run after the tile-scope one: driver 0.74 GiB, against
    0.39 GiB alone)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(run_once, paths, out, scope, args, settings).result()


#: ``--settings``: the defaults of this version, and those of 264e0ee (issue #45's baseline:
#: rpca 1/√d refined, the mask thresholds 6/4/3 with a 1 px opening, observations not kept).
#: The variants "without X" or "before X" change X alone: every other setting is today's (ρ = 2
#: since 2026-11-30 included), not the default of the day X came.
SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {"solver": {}, "mask": {}},
    # Today's default without the date's offset (mask.offset): what the offset costs.
    "no-offset": {"solver": {}, "mask": {"offset": 0}},
    # Today's default without the mask's whiteness gate (mask.white; its white clouds stay).
    "no-white": {"solver": {}, "mask": {"white": 0}},
    # The default before white clouds (mask.white_cloud 0, mask.white 0.2): what they cost.
    "no-white-clouds": {"solver": {}, "mask": {"white_cloud": 0, "white": 0.2}},
    # The default before a shadow beside its cloud (mask.shadow_near 0): what it costs.
    "no-shadow-near": {"solver": {}, "mask": {"shadow_near": 0}},
    # The default before a shadow dark in every band (mask.shadow_flat 0): what it costs.
    "no-shadow-flat": {"solver": {}, "mask": {"shadow_flat": 0}},
    # The default before the pixel's own departure from its clear dates (mask.interpolate).
    "no-interpolate": {"solver": {}, "mask": {"interpolate": False}},
    # Today's default without the ground's cap (solver.cap_ground): what the cap costs.
    "no-cap": {"solver": {"cap_ground": False}, "mask": {}},
    # Today's default with the ground floored (solver.floor_ground, an option): what it costs.
    "floor": {"solver": {"floor_ground": 0.25}, "mask": {}},
    # Today's default with the shadow-free fill (solver.shadow_free_fill, an option).
    "shadow-free-fill": {"solver": {"shadow_free_fill": True}, "mask": {}},
    # Today's default with the paper's growth of μ (the default before 2026-11-30).
    "rho1.5": {"solver": {"rho": 1.5}, "mask": {}},
    # Today's default stopped at a looser tolerance (solver.tol; #45, item 1).
    "tol1e-4": {"solver": {"tol": 1e-4}, "mask": {}},
    # Today's default with 1280 px tiles (tiling.tile_size; #45, item 3: the same 128 px halo
    # is a smaller share of a larger tile). A setting's "tiling" overrides --tile-size.
    "tile1280": {"solver": {}, "mask": {}, "tiling": {"tile_size": 1280}},
    "264e0ee": {
        "solver": {
            "method": "rpca",
            "lam": "auto",
            "refine": True,
            "tol": 1e-7,
            "cap_ground": False,
            "rho": 1.5,  # the paper's growth of μ, which every solve had then
        },
        # shadow_near and shadow_flat 0: as measured before they were the default (the
        # reference stays the same).
        "mask": {
            "cloud": 6.0,
            "haze": 4.0,
            "shadow": 3.0,
            "radius": 1,
            "keep_clear": False,
            "shadow_near": 0,
            "shadow_flat": 0,
        },
    },
}


#: BLAS threads of the processes this one spawns: one, as in the Dask workers (the nanny sets the
#: same), or the bare reference's small least-squares in the refit spin on a busy 2-core machine.
ONE_BLAS_THREAD = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")


def main() -> None:
    # Before any process is spawned: each run and its bare reference run in a process of their
    # own (run_fresh), which reads these at start. This process only simulates the inputs,
    # whose bytes do not depend on the BLAS threads (checked: 2048², 3 dates, 1 and 2 threads).
    for var, value in ONE_BLAS_THREAD.items():
        os.environ.setdefault(var, value)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2560, 5120, 10240])
    parser.add_argument("--scopes", nargs="+", default=["tile", "scene"], choices=["tile", "scene"])
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--tile-size", type=int, default=1024)
    parser.add_argument("--overlap", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bare-tiles", type=int, default=64, help="tile solves redone bare")
    parser.add_argument("--contention", action="store_true", help="one vs two bare solves")
    parser.add_argument("--data", type=Path, default=Path("bench-output/data"))
    parser.add_argument("--out", type=Path, default=Path("bench-output/runs"))
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["default"],
        choices=list(SETTINGS),
        help="run with these settings, alternated (264e0ee: issue #45's baseline)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each setting, alternated")
    parser.add_argument(
        "--keep-outputs", action="store_true", help="keep each run's output (deleted once measured)"
    )
    args = parser.parse_args()

    rows = []
    for size in args.sizes:
        paths = products(args.data, size, args.dates)
        for scope in args.scopes:
            for _, settings in itertools.product(range(args.repeat), args.settings):
                print(f"{size}², {scope} scope, settings {settings}:")
                out = args.out / f"gf4-{size}-{scope}-{settings}"
                row = run_fresh(paths, out, scope, args, settings)
                rows.append((size, f"{scope} {settings}", row))
                if not args.keep_outputs:
                    # A full-size run writes about 42 GB: two side by side fill a 64 GB disk.
                    shutil.rmtree(out, ignore_errors=True)

    print(
        f"\n{'scene':>8}{'scope':>7}{'tiles':>7}{'wall s':>8}{'setup':>7}{'stage':>7}"
        f"{'solve':>7}{'mask+products':>14}{'peak GiB':>9}{'bare s':>8}{'it. ratio':>10}"
        f"{'wall ratio':>11}{'it. CPU':>8}{'work':>6}{'floor':>6}"
    )
    for size, scope, r in rows:
        p = r["phases"]
        print(
            f"{size:>7}²{scope:>7}{r['tiles']:>7}{r['wall']:>8.1f}{p.get('setup', 0):>7.1f}"
            f"{p.get('stage', 0):>7.1f}{p.get('solve', 0):>7.1f}{p.get('mask+products', 0):>14.1f}"
            f"{r['peak'] / 2**30:>9.2f}{r['ratios'].bare_seconds:>8.1f}"
            f"{r['ratios'].per_iteration:>10.2f}{r['ratios'].wall:>11.2f}"
            f"{_ratio_or_dash(r['ratios'].per_iteration_cpu):>8}{r['work']:>6.2f}{r['floor']:>6.2f}"
        )


def _ratio_or_dash(ratio: float) -> str:
    """A ratio to two decimals, or "—" where it was not measured (scene scope's CPU per
    iteration: its shards are actors, whose threads' CPU is not recorded per band)."""
    return "—" if math.isnan(ratio) else f"{ratio:.2f}"


def _phase_at(seconds: float, phases: tuple[tuple[str, float], ...]) -> str:
    """The phase of the run that was under way ``seconds`` after it started."""
    elapsed = 0.0
    for name, length in phases:
        elapsed += length
        if seconds <= elapsed:
            return name
    return "the end"


def _solve_task_seconds(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds inside the row tasks split into reading, solving and the rest, from their
    completion records ``rows`` (tile scope)."""
    totals = dict.fromkeys(("read halos", "solve tiles", "blend+write rows", "solve CPU"), 0.0)
    for record in rows:
        read = sum(float(t["read_seconds"]) for t in record["tiles"])
        solve = sum(float(t["seconds"]) for t in record["tiles"])
        totals["read halos"] += read
        totals["solve tiles"] += solve
        totals["blend+write rows"] += float(record["seconds"]) - read - solve
        totals["solve CPU"] += sum(float(t["cpu_seconds"]) for t in record["tiles"])
    return totals


if __name__ == "__main__":
    main()
