"""Footprints that differ by date (issue #14): how dark is the fill, and what is r, per scope.

Two experiments on the paper's image (tyrol-w1, reference clouds, 7 dates), both small enough
for a shared 2-core machine (≤ 1024² px):

``sweep``
    One tile's matrix (``--size``² px, default 768² = a 512 px tile with its 128 px halo) in
    which date 3 is observed only on its left ``f`` of the columns, for f from 1 % to 50 %.
    For each f and seed: the mean of that date's output over the pixels it did not see,
    relative to the truth's mean there, from the ALM alone ("raw") and after the refit of
    :mod:`cloudcore.refit` ("refit"); and its r over those pixels. The pipeline's rule for
    leaving a date out of a tile (``pipeline.solve.tile.MIN_DATE_FRACTION``) comes from this table.

``table``
    A 1024² scene written as real single-band uint16 GeoTIFFs on a UTM grid offset by 15 m
    (30 m pixels, like Landsat), date 3's file ending a third of the way in (its footprint
    misses the right two thirds). ``python -m pipeline run`` machinery on a LocalCluster in
    tile scope at 512 + 128 and 1024 + 128, the whole band in memory
    (``cloudcore.decompose`` with the mask), and the per-pixel temporal median. Each with the
    fix (this code) and without it ("before": the refit switched off and no date left out,
    which is what the code did before #14). Reports r over all dates and every finite output
    pixel, and date 3's output in the strip it did not see: its mean against the truth's, and
    the share of it that is NaN. Scene scope (``solver.scope: scene``) is filled in by its
    own benchmark.

Usage::

    python benchmarks/footprints.py sweep --seeds 0 1 2        # ≈ 3 min on 2 cores
    python benchmarks/footprints.py table --out /tmp/footprints  # ≈ 3 min on 2 cores

"Before" switches the fix off by patching this process: the table's runs use an in-process
(threads) LocalCluster so that the patch reaches the tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from affine import Affine

import cloudcore
import cloudcore.solvers
from cloudcore.refit import refit_partial_columns
from pipeline.inputs.synthetic import load_demo_truth, write_scene

SHORT = 3  # the date whose footprint ends early
N_DATES = 7
MAX_DN = 10000
# A Landsat-like lattice: 30 m pixels, origin on an odd multiple of 15 m.
ORIGIN = (500_015.0, 5_200_015.0)
RES = 30.0
CRS = "EPSG:32633"


def tyrol_case(size: int, seed: int) -> Any:
    """The paper's simulation at ``size``², reference clouds, 7 dates."""
    rgb = load_demo_truth()  # tyrol-w1, the pixels of tests/data/tyrol-w1_1k.tif
    return cloudcore.paper_case(rgb, N_DATES, size=size, rng=np.random.default_rng(seed))


@contextlib.contextmanager
def fix_switched_off() -> Iterator[None]:
    """The code before #14: no refit of partly observed dates, no date left out of a tile."""
    import pipeline.solve.tile

    debias, fraction = cloudcore.solvers._debias, pipeline.solve.tile.MIN_DATE_FRACTION
    cloudcore.solvers._debias = lambda *args, **kwargs: None
    pipeline.solve.tile.MIN_DATE_FRACTION = 0.0
    try:
        yield
    finally:
        cloudcore.solvers._debias = debias
        pipeline.solve.tile.MIN_DATE_FRACTION = fraction


# -------------------------------------------------------------------------------------------
# sweep
# -------------------------------------------------------------------------------------------


def sweep(size: int, seeds: list[int], fractions: list[float]) -> None:
    print(f"# one {size}² tile matrix, date {SHORT} observed on its left f of the columns")
    print(
        "| f | seed | raw: mean out / truth (unseen) | refit: mean out / truth | refit r (unseen) |"
    )
    print("|---|---|---|---|---|")
    for seed in seeds:
        sim = tyrol_case(size, seed)
        n, h, w = sim.observed.shape
        truth = sim.truth.ravel()
        lam = cloudcore.lambda_star(h * w, n)
        for f in fractions:
            mask = np.ones((n, h, w), bool)
            mask[SHORT, :, max(1, round(f * w)) :] = False
            M = mask.reshape(n, -1).T.copy()
            D = sim.observed.astype(np.float32).reshape(n, -1).T.copy()
            D[~M] = np.nan
            with fix_switched_off():
                res = cloudcore.decompose(D, "aatm", lam=lam, mask=M)
            L, C, N = (np.array(x, np.float64) for x in (res.L, res.C, res.N))
            raw = np.clip(L[:, SHORT], 0, 1)
            refit_partial_columns(np.where(M, D, 0.0), M, L, C, N, method="aatm", lam=lam, beta=1.0)
            fixed = np.clip(L[:, SHORT], 0, 1)
            unseen = ~M[:, SHORT]
            ref = truth[unseen].mean()
            r = cloudcore.recovery_error(fixed[unseen], truth[unseen])
            print(
                f"| {f:.2f} | {seed} | {raw[unseen].mean() / ref:.3f} | "
                f"{fixed[unseen].mean() / ref:.3f} | {r:.3f} |",
                flush=True,
            )


# -------------------------------------------------------------------------------------------
# table
# -------------------------------------------------------------------------------------------


def write_series(sim: Any, folder: Path, short_cols: int) -> list[Path]:
    """One single-band uint16 GeoTIFF per date (nodata 0), date ``SHORT`` only ``short_cols``
    wide; DN = 1 + round(I · (MAX_DN − 1))."""
    paths = []
    for k in range(sim.observed.shape[0]):
        dn = (1 + np.round(sim.observed[k] * (MAX_DN - 1))).astype(np.uint16)
        if k == SHORT:
            dn = dn[:, :short_cols]
        day = date(2021, 6, 1) + timedelta(days=8 * k)
        lattice = Affine(RES, 0, ORIGIN[0], 0, -RES, ORIGIN[1])
        paths.append(write_scene(folder, day, dn, CRS, lattice))
    return paths


def scaled_series(sim: Any) -> np.ndarray:
    """What the pipeline stages: the DN of :func:`write_series` divided by ``MAX_DN``."""
    dn = 1 + np.round(sim.observed * (MAX_DN - 1))
    return (dn.astype(np.float32) / np.float32(MAX_DN)).astype(np.float32)


def run_pipeline(paths: list[Path], out: Path, tile: int, overlap: int, address: str) -> Any:
    from pipeline.config import Config, parse
    from pipeline.run import run

    shutil.rmtree(out, ignore_errors=True)
    cfg = parse(
        {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths], "max_dn": MAX_DN},
            "output": {"path": str(out), "quicklooks": False, "cog_dtype": "float32"},
            "tiling": {"tile_size": tile, "overlap": overlap},
            "cluster": {"kind": "address", "address": address, "dashboard": False},
        },
        Config,
    )
    summary = run(cfg)
    assert summary.ok, summary
    import xarray as xr

    cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
    return cube.clear.values[:, 0]  # (time, y, x)


def scores(clear: np.ndarray, truth: np.ndarray, unseen: np.ndarray) -> dict[str, float]:
    """r over every finite output, and date SHORT over the strip it did not see."""
    strip = clear[SHORT][unseen]
    finite = np.isfinite(strip)
    return {
        "r": cloudcore.recovery_error(clear, truth),
        "mean": float(strip[finite].mean()) if finite.any() else float("nan"),
        "truth": float(truth[unseen][finite].mean()) if finite.any() else float("nan"),
        "nan": float(1 - finite.mean()),
    }


def table(out: Path, size: int, seed: int) -> None:
    from distributed import LocalCluster

    sim = tyrol_case(size, seed)
    n, h, w = sim.observed.shape
    short_cols = w // 3
    paths = write_series(sim, out / "inputs", short_cols)
    truth = sim.truth.astype(np.float32)
    unseen = np.zeros((h, w), bool)
    unseen[:, short_cols:] = True
    rows: list[tuple[str, str, dict[str, float], float]] = []

    stack = scaled_series(sim)
    stack[SHORT][unseen] = np.nan
    median = np.nanmedian(stack, axis=0)
    rows.append(
        ("per-pixel temporal median", "—", scores(np.stack([median] * n), truth, unseen), 0)
    )

    D = stack.reshape(n, -1).T.copy()
    M = np.isfinite(D)
    for label, ctx in (("before", fix_switched_off), ("after", contextlib.nullcontext)):
        started = time.perf_counter()
        with ctx():
            res = cloudcore.decompose(D, "aatm", lam=cloudcore.lambda_star(h * w, n), mask=M)
        seconds = time.perf_counter() - started
        clear = res.ground.T.reshape(n, h, w)
        rows.append(("whole band in memory (λ̂*)", label, scores(clear, truth, unseen), seconds))

    with LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        for tile in (512, 1024):
            for label, ctx in (("before", fix_switched_off), ("after", contextlib.nullcontext)):
                started = time.perf_counter()
                with ctx():
                    clear = run_pipeline(
                        paths, out / f"run-{tile}-{label}", tile, 128, cluster.scheduler_address
                    )
                seconds = time.perf_counter() - started
                assert clear.shape == (n, h, w), clear.shape  # the inputs' lattice, kept
                rows.append(
                    (f"tile scope {tile} + 128", label, scores(clear, truth, unseen), seconds)
                )
    rows.append(("scene scope", "—", {}, 0))

    print(f"# tyrol-w1 {size}², 7 dates, reference clouds (seed {seed}); date {SHORT} sees only")
    print(f"# the left {short_cols} of {w} columns")
    print(
        "| | code | r (all dates, finite outputs) | date 4 unseen: mean out / truth (finite)",
        end="",
    )
    print(" | NaN there | s |")
    print("|---|---|---|---|---|---|")
    for name, label, s, seconds in rows:
        if not s:
            print(f"| {name} | | to be filled by the scene-scope benchmark | | | |")
            continue
        print(
            f"| {name} | {label} | {s['r']:.3f} | {s['mean']:.3f} / {s['truth']:.3f} | "
            f"{100 * s['nan']:.0f} % | {seconds:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("--size", type=int, default=768)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=[0.01, 0.02, 0.05, 0.1, 0.2, 0.33, 0.5],
    )
    t = sub.add_parser("table")
    t.add_argument("--out", type=Path, default=Path("/tmp/footprints"))
    t.add_argument("--size", type=int, default=1024)
    t.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.what == "sweep":
        sweep(args.size, args.seeds, args.fractions)
    else:
        table(args.out, args.size, args.seed)


if __name__ == "__main__":
    main()
