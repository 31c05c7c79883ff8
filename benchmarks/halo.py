"""What the halo buys and what it costs (issue #45, item 3): tile scope at 1024 px tiles with a
halo of 128 (the default), 96 and 64 px, on one simulated scene, the default settings otherwise.
With ``--rhos``, ``--tols`` or ``--tiles``, the same for each growth ρ of the ALM's step
(``solver.rho``), each solver tolerance (``solver.tol``) or each tile size
(``tiling.tile_size``): what each changes in the written DN and in r against the truth. Every
combination of the values given is run; the first of each list is the reference.

A series of georeferenced GeoTIFFs on one lattice (``make_geotiff_series``: the bundled demo
image under ``--clouds`` clouds, 7 dates, 5 bands, ``--size``² px, DN = round(I · 65535)) is run
once per halo by :func:`pipeline.run.run` (a LocalCluster of two single-threaded workers, each
run in a fresh process after an untimed first run that compiles the kernels). Per halo:

* **r** of the cloud-free output against the truth, over every observed entry and over the
  entries the clouds covered (observation ≥ truth + 0.02);
* **seams**: the mean absolute step between neighbouring pixels across the tile borders over the
  mean step between neighbouring pixels anywhere (1 = no seam), in the clear layer;
* the output DN (round(clear · 65535)) identical to the first run's (the first halo and ρ
  given), and the largest difference;
* the solves' iterations summed over the tiles and bands (``diagnostics.csv``);
* the solve's CPU seconds summed over the workers (the run summary's ``solve`` tasks) and the
  wall time.

Usage::

    python benchmarks/halo.py [--size 3072] [--halos 128 96 64] [--clouds moving]
    python benchmarks/halo.py --halos 128 --rhos 2 1.5
    python benchmarks/halo.py --halos 128 --tols 3e-5 1e-4
    python benchmarks/halo.py --halos 128 --tiles 1024 1536
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudcore._growth import check_growth
from pipeline.config import SolverConfig, TilingConfig


def _run(
    series: list[str], out: Path, tile: int, overlap: int, rho: float, tol: float
) -> dict[str, Any]:
    """One run in this (fresh) process: its wall time and the solve's task seconds."""
    from pipeline.config import Config
    from pipeline.run import run

    config = Config.model_validate(
        {
            "inputs": {"kind": "geotiff", "paths": series},
            "output": {"path": str(out), "quicklooks": False},
            "tiling": {"tile_size": tile, "overlap": overlap},
            "solver": {"rho": rho, "tol": tol},
            "cluster": {"kind": "local", "n_workers": 2, "threads_per_worker": 1},
        }
    )
    started = time.perf_counter()
    summary = run(config)
    wall = time.perf_counter() - started
    assert summary.ok, summary
    solve = {k: (s, c) for k, s, c, _ in summary.task_seconds}.get("solve", (0.0, 0.0))
    iterations = int(pd.read_csv(out / "diagnostics.csv").iterations.sum())
    return {"wall": wall, "solve_cpu": solve[1], "iterations": iterations}


def _scores(out: Path, truth: np.ndarray, tile: int) -> dict[str, Any]:
    """r, r under clouds, the seam ratio and the written DN of one run, a band at a time."""
    import xarray as xr

    cube = xr.open_zarr(out / "cube.zarr", consolidated=False)["clear"]
    staged = xr.open_zarr(out / "work" / "input.zarr", consolidated=False)["observed"]
    sums = np.zeros(6)  # err², ref² (all); err², ref² (clouds); border steps, their count
    steps = np.zeros(2)  # all steps, their count
    dn = np.empty(cube.shape, np.uint16)
    for b in range(cube.sizes["band"]):
        clear = cube[:, b].values.astype(np.float64)  # (time, y, x)
        observed = staged[:, b].values
        ref = np.broadcast_to(truth[b][None], clear.shape)
        seen = np.isfinite(observed) & np.isfinite(clear)
        cloudy = seen & (observed >= ref + 0.02)
        err2 = (clear - ref) ** 2
        sums[:4] += [
            err2[seen].sum(),
            (ref**2)[seen].sum(),
            err2[cloudy].sum(),
            (ref**2)[cloudy].sum(),
        ]
        for axis in (-1, -2):
            step = np.abs(np.diff(clear, axis=axis))
            borders = np.arange(tile - 1, step.shape[axis], tile)
            at = np.take(step, borders, axis=axis)
            sums[4:] += [np.nansum(at), np.isfinite(at).sum()]
            steps += [np.nansum(step), np.isfinite(step).sum()]
        dn[:, b] = np.rint(np.clip(np.nan_to_num(clear), 0, 1) * 65535)
    return {
        "r": float(np.sqrt(sums[0] / sums[1])),
        "r_cloudy": float(np.sqrt(sums[2] / sums[3])),
        "seam": float((sums[4] / sums[5]) / (steps[0] / steps[1])),
        "dn": dn,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=3072)
    parser.add_argument("--halos", type=int, nargs="+", default=[128, 96, 64])
    parser.add_argument("--rhos", type=check_growth, nargs="+", default=[SolverConfig().rho])
    parser.add_argument("--tols", type=float, nargs="+", default=[SolverConfig().tol])
    parser.add_argument("--tiles", type=int, nargs="+", default=[TilingConfig().tile_size])
    parser.add_argument("--clouds", default="moving", help="reference | perlin | moving")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    args = parser.parse_args()
    import rasterio

    from pipeline.inputs.synthetic.geotiff_series import make_geotiff_series

    work = args.work or Path(tempfile.mkdtemp(prefix="halo-"))
    made = make_geotiff_series(
        work / "series", size=args.size, cloud_style=args.clouds, max_crop_px=0
    )
    series = [str(p) for p in made.paths]
    with rasterio.open(made.truth_path) as src:
        truth = src.read().astype(np.float64)
    runs: dict[tuple[int, int, float, float], dict[str, Any]] = {}
    variants = list(itertools.product(args.tiles, args.halos, args.rhos, args.tols))
    first = variants[0]
    with ProcessPoolExecutor(1) as pool:  # the kernels compile here, untimed
        pool.submit(_run, series, work / "warmup", *first).result()
    for variant in variants:
        tile, halo, rho, tol = variant
        out = work / f"tile{tile}-halo{halo}-rho{rho:g}-tol{tol:g}"
        with ProcessPoolExecutor(1) as pool:
            runs[variant] = pool.submit(_run, series, out, *variant).result()
        runs[variant].update(_scores(out, truth, tile))
        shutil.rmtree(out / "work" / "strips", ignore_errors=True)
    base = runs[first]
    print(
        f"{args.size}² px, 7 dates, 5 bands, {args.clouds} clouds; DN vs the first row's "
        f"(tile {first[0]}, halo {first[1]}, ρ = {first[2]:g}, tol {first[3]:g})"
    )
    print(
        "| tile | halo | ρ | tol | r | r under clouds | seam | DN identical | largest DN diff "
        "| iterations | solve CPU | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (tile, halo, rho, tol), got in runs.items():
        diff = np.abs(got["dn"].astype(np.int32) - base["dn"])
        print(
            f"| {tile} | {halo} | {rho:g} | {tol:g} | {got['r']:.4f} | {got['r_cloudy']:.4f} | "
            f"{got['seam']:.3f} | {100 * float((diff == 0).mean()):.2f} % | {diff.max():.0f} | "
            f"{got['iterations']} | {got['solve_cpu']:.1f} s | {got['wall']:.1f} s |"
        )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
