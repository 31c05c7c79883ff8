"""Scene scope on Dask against the bare compute of the same steps: the overhead per iteration.

A paper-style series (tyrol-w1 in grey, reference clouds, ``--dates`` dates of ``--size``² px)
is written to a Zarr store laid out as the pipeline's ``input.zarr`` (time, band, y, x). It is
then solved twice with :func:`cloudcore.scene.solve_blocks`, on the same tiles:

* **scene scope**: one :class:`pipeline.solve.scene_scope.SceneShard` actor per worker of the
  pipeline's local cluster (``--workers`` processes × ``--threads`` numba threads), exactly as
  ``solver.scope: scene`` runs a band;
* **bare**: the same blocks in this process, one after the other, 1 thread, no Dask: the summed
  compute of the same element-wise steps (fused kernel per tile, SVT weights); and again with
  ``workers × threads`` numba threads (the same cores used by one process, without Dask).

Each is run twice on the same blocks and the second run is timed (the first loads the numba
kernels and touches the buffers). Reported per iteration: the scene-scope wall time, the bare
summed compute, the ideal time
bare / (workers × threads), and the overhead = wall / ideal − 1; also the compute measured
inside the actors (the slowest shard), which splits the overhead into communication and
contention. With ``--footprint`` one date sees only the left 40 % of the scene, so the refit of
partly observed dates runs too (reported apart: it is not part of the iterations).

Usage::

    python benchmarks/scene_scope.py                       # 2048² × 7, 1024 px tiles, 2 workers
    python benchmarks/scene_scope.py --quality --size 1024 # r: scene vs whole band vs tiles
    python benchmarks/scene_scope.py --size 10240 --runs 1          # full size, 2 workers

The series is DN / 1023 (GF-4 PMS's 10 bits; ``--max-dn``), so the shards hold D as 16-bit DN
as in a run (``--floats``: as float32). The full size holds 10240² × 7 × 22 B = 16.2 GB of
solver state in the workers (24 B with ``--floats``), and the bare runs the same again in this
process once the cluster is closed (skip them with ``--no-bare``), and the series on disk.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Edge of the simulated cases a larger scene is a mosaic of: one case of the full size would
#: hold its layers in float64 in this process (about 6 GB each at 10240²).
CASE_EDGE = 2048


def write_series(
    root: Path, size: int, dates: int, tile: int, footprint: bool, max_dn: float
) -> Path:
    """The observed series as ``observed`` (time, 1, y, x) float32 in ``root/input.zarr``: a
    paper-style case, or above :data:`CASE_EDGE` a mosaic of cases (the same ground, each with
    clouds of its own seed); with ``max_dn`` rounded to DN and staged as the pipeline stages
    DN (float32(DN) / float32(max_dn))."""
    import zarr

    from cloudcore.simulate import paper_case
    from pipeline.inputs.synthetic import load_demo_truth

    store = root / "input.zarr"
    array = zarr.create_array(
        store=str(store),
        name="observed",
        shape=(dates, 1, size, size),
        chunks=(dates, 1, tile, tile),
        dtype="float32",
        fill_value=np.nan,
    )
    truth = load_demo_truth()
    edge = min(size, CASE_EDGE)
    for seed, (row, col) in enumerate(
        (r, c) for r in range(0, size, edge) for c in range(0, size, edge)
    ):
        h, w = min(edge, size - row), min(edge, size - col)
        case = paper_case(truth, dates, size=edge, rng=np.random.default_rng(seed))
        obs = case.observed[:, :h, :w].astype(np.float32)
        if max_dn:
            obs = np.rint(obs * max_dn).astype(np.float32) / np.float32(max_dn)
        if footprint:
            obs[dates // 2, :, max(int(0.4 * size) - col, 0) :] = np.nan
        array[:, 0, row : row + h, col : col + w] = obs
    return store


def scene_run(
    store: Path,
    size: int,
    dates: int,
    tile: int,
    workers: int,
    threads: int,
    solve: dict[str, Any],
    max_dn: float | None,
    runs: int,
) -> dict[str, Any]:
    from distributed import Client

    from cloudcore.scene import solve_blocks
    from pipeline.cluster.backends import make_cluster
    from pipeline.config.cluster import ClusterSpec
    from pipeline.grid.tiling import TileGrid
    from pipeline.solve.scene_scope import DaskShards, start_shards

    tiles = list(TileGrid(size, size, tile, 0))
    # The pipeline's local cluster: its worker environment matters (glibc's malloc settings
    # made the kernels 3x slower under the nanny's defaults, see pipeline.cluster.backends).
    spec = ClusterSpec(n_workers=workers, threads_per_worker=threads, dashboard=False)
    with make_cluster(spec) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)  # one shard per worker, as in a run
        started = time.perf_counter()
        ids = {(t.row, t.col): t.name for t in tiles}
        futures = start_shards(client, str(store), 0, tiles, ids, "float32", "bench", max_dn=max_dn)
        shards = DaskShards([f.result() for f in futures])
        loaded = time.perf_counter() - started
        for _ in range(runs - 1):  # warm-up: numba cache, buffers
            solve_blocks(shards, d=size * size, n=dates, **solve)
        before = shards.map("shard_timing")
        outcome = solve_blocks(shards, d=size * size, n=dates, **solve)
        timings = shards.map("shard_timing")
        for f in futures:
            f.release()
    steps = [
        t["seconds"].get("step", 0.0) - b["seconds"].get("step", 0.0)
        for t, b in zip(timings, before, strict=True)
    ]
    return {
        "iterations": outcome.iterations,
        "wall_per_iteration": outcome.seconds_per_iteration,
        "wall_seconds": outcome.seconds_per_iteration * outcome.iterations,
        "actor_step_max": max(steps) / outcome.iterations,
        "actor_step_sum": sum(steps) / outcome.iterations,
        "load_seconds": loaded,
        "setup_seconds": outcome.setup_seconds,
        "refit_seconds": outcome.refit_seconds,
        "refit_rounds": outcome.refit_rounds,
        "state_bytes": [t["peak_bytes"] for t in timings],
        "shards": len(futures),
    }


def bare_run(
    store: Path,
    size: int,
    dates: int,
    tile: int,
    solve: dict[str, Any],
    threads: int,
    max_dn: float | None,
    runs: int,
) -> dict[str, Any]:
    """The same blocks and steps in this process, ``threads`` numba threads, no Dask."""
    import zarr

    from cloudcore.scene import Block, BlockGroup, LocalShards, solve_blocks
    from pipeline.grid.tiling import TileGrid

    source = zarr.open_array(store=str(store), path="observed", mode="r")
    windows = [t.core for t in TileGrid(size, size, tile, 0)]
    blocks = [
        Block(np.asarray(source[:, 0, w.row_off : w.row_end, w.col_off : w.col_end]),
              origin=(w.row_off, w.col_off), max_dn=max_dn)
        for w in windows
    ]  # fmt: skip
    group = BlockGroup(blocks, threads=threads)
    for _ in range(runs - 1):  # warm-up
        solve_blocks(LocalShards([group]), d=size * size, n=dates, **solve)
    before = group.timing()
    outcome = solve_blocks(LocalShards([group]), d=size * size, n=dates, **solve)
    seconds = group.timing()
    seconds = {k: v - before.get(k, 0.0) for k, v in seconds.items()}
    return {
        "iterations": outcome.iterations,
        "wall_per_iteration": outcome.seconds_per_iteration,
        "wall_seconds": outcome.seconds_per_iteration * outcome.iterations,
        "step_compute_per_iteration": seconds.get("step", 0.0) / outcome.iterations,
        "refit_seconds": outcome.refit_seconds,
    }


def quality(size: int, workers: int, root: Path) -> None:
    """r of scene scope against the whole band in memory, tile scope and the temporal median,
    on the footprint series of ``benchmarks/footprints.py table`` (the paper's image, reference
    clouds, seed 0, 7 dates as single-band GeoTIFFs, date 3 ending a third of the way in)."""
    # benchmarks/footprints.py, found beside this script (its folder is searched first).
    import footprints as fp
    import xarray as xr
    import zarr

    import cloudcore
    from pipeline.config import Config, parse
    from pipeline.run import run

    sim = fp.tyrol_case(size, 0)
    n, short, cols = fp.N_DATES, fp.SHORT, size // 3
    paths = fp.write_series(sim, root / "series", cols)
    truth = sim.truth.astype(np.float32)
    unseen = np.zeros((size, size), bool)
    unseen[:, cols:] = True

    def pipeline_run(name: str, tile: int, overlap: int, scope: str) -> tuple[np.ndarray, float]:
        out = root / name
        cfg = {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths], "max_dn": fp.MAX_DN},
            "output": {"path": str(out), "quicklooks": False, "cog_dtype": "float32"},
            "tiling": {"tile_size": tile, "overlap": overlap},
            "solver": {"scope": scope},
            "cluster": {"dashboard": False, "n_workers": workers, "threads_per_worker": 1},
        }
        started = time.perf_counter()
        summary = run(parse(cfg, Config))
        seconds = time.perf_counter() - started
        assert summary.ok, summary.describe()
        cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
        return cube.clear.values[:, 0], seconds

    def score(clear: np.ndarray) -> str:
        s = fp.scores(clear, truth, unseen)
        return f"{s['r']:.4f} | {s['mean']:.3f} / {s['truth']:.3f}"

    rows = []
    scene, seconds = pipeline_run("scene", 512, 128, "scene")
    rows.append(("scene scope (tiles 512, no halo)", score(scene), seconds))
    observed = np.asarray(zarr.open_array(str(root / "scene/work/input.zarr"), path="observed"))
    D = observed[:, 0].reshape(n, -1).T
    started = time.perf_counter()
    whole = cloudcore.decompose(D, lam=cloudcore.lambda_star(D.shape[0], n), mask=np.isfinite(D))
    seconds = time.perf_counter() - started
    whole_clear = whole.ground.T.reshape(n, size, size)
    rows.append(("whole band in memory (decompose, λ̂*)", score(whole_clear), seconds))
    for tile in (512, 1024):
        if tile <= size:
            clear, seconds = pipeline_run(f"tile{tile}", tile, 128, "tile")
            rows.append((f"tile scope {tile} + 128", score(clear), seconds))
    median = np.nanmedian(observed[:, 0], axis=0)
    rows.append(("per-pixel temporal median", score(np.stack([median] * n)), 0.0))
    # Where both are finite: the pipeline writes NaN where a date saw nothing (no invented
    # pixels), the whole-band ground is defined everywhere.
    m = np.isfinite(whole_clear) & np.isfinite(scene)
    diff = np.linalg.norm(scene[m] - whole_clear[m]) / np.linalg.norm(whole_clear[m])
    print(f"\n{size}² × {n}, date {short + 1} observed on its left third; {workers} workers")
    print(f"| | r (all dates, finite outputs) | date {short + 1} unseen: mean out / truth | s |")
    print("|---|---|---|---|")
    for name, text, secs in rows:
        print(f"| {name} | {text} | {secs:.1f} |")
    print(
        f"scene scope (the pipeline's default) vs the whole band's aATM λ̂* ground, where both "
        f"are finite: relative difference {diff:.1e} (different settings, not a check of agreement)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="scene edge in pixels")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--tile", type=int, default=1024, help="tile (block) edge")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="numba threads per worker")
    parser.add_argument("--footprint", action="store_true", help="one date sees 40 %% only")
    parser.add_argument("--no-bare", action="store_true", help="skip the in-process run")
    parser.add_argument(
        "--max-dn",
        type=float,
        default=1023.0,
        help="the series as DN of this scale (GF-4 PMS: 10 bit), so that the shards hold D as "
        "16-bit DN as in a run; 0: float values",
    )
    parser.add_argument(
        "--floats",
        action="store_true",
        help="the shards hold D as float32 even where it is DN / max_dn (the layout before "
        "2026-11-27: 2 bytes more per entry)",
    )
    parser.add_argument(
        "--series",
        type=Path,
        help="keep the written series in this folder and reuse it when it is there (its "
        "size, dates, tile and DN scale are those it was written with)",
    )
    parser.add_argument(
        "--runs", type=int, default=2, help="solves per measurement, the last one timed"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--quality",
        action="store_true",
        help="instead: r of scene scope against the whole band, tile scope and the median, on "
        "a --size² footprint series (the paper's image, reference clouds)",
    )
    args = parser.parse_args()
    if args.quality:
        with tempfile.TemporaryDirectory(prefix="scene-quality-") as tmp:
            quality(args.size, args.workers, Path(tmp))
        return

    from pipeline.config import SolverConfig
    from pipeline.solve.tile import solver_lambda

    # The pipeline's default solve of a whole band: its method, λ rule, stopping rule and μ's
    # growth.
    solver = SolverConfig()
    d, n = args.size**2, args.dates
    solve = {
        "method": solver.method,
        "lam": solver_lambda(solver, d, n),
        "tol": solver.tol,
        "max_iter": solver.max_iter,
        "rho": solver.rho,
    }
    max_dn = None if args.floats else args.max_dn or None
    shape = (args.size, args.dates, args.tile)
    with tempfile.TemporaryDirectory(prefix="scene-bench-") as tmp:
        started = time.perf_counter()
        root = args.series or Path(tmp)
        store = root / "input.zarr"
        if not store.exists():
            root.mkdir(parents=True, exist_ok=True)
            store = write_series(root, *shape, args.footprint, args.max_dn)
            seconds = time.perf_counter() - started
            print(f"series {args.size}² × {args.dates} written in {seconds:.1f} s")
        # Scene scope first: its workers' memory is free again before the in-process runs.
        scene = scene_run(store, *shape, args.workers, args.threads, solve, max_dn, args.runs)
        bare = par = None
        if not args.no_bare:
            bare = bare_run(store, *shape, solve, 1, max_dn, args.runs)
            cores = args.workers * args.threads
            par = bare_run(store, *shape, solve, cores, max_dn, args.runs) if cores > 1 else bare
    result: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "scene": scene}
    wall = scene["wall_per_iteration"]
    print(
        f"scene scope: {scene['shards']} shards, {scene['iterations']} iterations, "
        f"{wall * 1e3:.1f} ms/iteration (slowest actor computes {scene['actor_step_max'] * 1e3:.1f}"
        f" ms of it); load {scene['load_seconds']:.2f} s, refit {scene['refit_seconds']:.2f} s "
        f"({scene['refit_rounds']} rounds); state per shard "
        f"{[round(b / 2**20, 1) for b in scene['state_bytes']]} MiB"
    )
    if bare is not None and par is not None:
        cores = args.workers * args.threads
        ideal = bare["step_compute_per_iteration"] / cores
        overhead = wall / ideal - 1.0
        versus = wall / par["wall_per_iteration"] - 1.0
        result.update(bare=bare, parallel=par, ideal_per_iteration=ideal, overhead=overhead)
        result.update(overhead_vs_one_process=versus)
        print(
            f"bare (1 process, 1 thread): {bare['iterations']} iterations, summed compute "
            f"{bare['step_compute_per_iteration'] * 1e3:.1f} ms/iteration (wall "
            f"{bare['wall_per_iteration'] * 1e3:.1f}); refit {bare['refit_seconds']:.2f} s"
        )
        print(
            f"ideal on {args.workers} × {args.threads}: {ideal * 1e3:.1f} ms/iteration; "
            f"Dask overhead {overhead:+.0%}"
        )
        print(
            f"one process with {cores} numba threads, no Dask: "
            f"{par['wall_per_iteration'] * 1e3:.1f} ms/iteration; scene scope vs it {versus:+.0%}"
        )
        assert bare["iterations"] == scene["iterations"]
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
