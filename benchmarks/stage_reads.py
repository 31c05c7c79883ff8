"""What staging's reads of the inputs cost, with GDAL's default reads and memory-mapped
(:data:`pipeline.stage.warp.READ_GDAL_CONFIG`).

A GF-4 PMS frame as GDAL writes an uncompressed GeoTIFF by default (the simulated series', one
row of all five bands per strip) is read by GDAL's block cache one whole strip at a time: a
stage task's window of a 10240-wide frame copies about 9 times the bytes it uses. This reads the
windows of a few stage tasks (``pipeline.stage.warp.read_window``, every date, all bands, warped
onto the grid as staging does) with each setting, alternated round after round, and prints the
CPU seconds (user and kernel) of this process per setting. Simulate the series first with
``benchmarks/pipeline_run.py`` (it caches it under ``--data``).

Usage::

    python benchmarks/stage_reads.py SERIES_DIR [--rounds 2] [--tiles 3]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from rasterio.windows import Window

from pipeline.grid.target import derive_grid
from pipeline.inputs.gf4 import discover_gf4
from pipeline.stage import warp


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def main() -> None:
    """Read the same stage windows with each setting, alternated, and print their CPU."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("series", type=Path, help="a folder of GF4_PMI_* products")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tiles", type=int, default=3, help="stage windows per round")
    parser.add_argument("--tile-size", type=int, default=1024)
    args = parser.parse_args()
    products = sorted(args.series.glob("GF4_PMI_*"))
    acqs = discover_gf4(products, extract_dir=Path(tempfile.mkdtemp()))
    grid = derive_grid(acqs)
    size = args.tile_size
    rows, cols = grid.height // size, grid.width // size
    # Windows spread over the scene's interior (edge tiles can lie outside the footprints).
    picks = [
        (1 + i * (rows - 2) // args.tiles, 1 + (i * 7) % max(cols - 2, 1))
        for i in range(args.tiles)
    ]
    out = np.empty((len(acqs[0].bands), size, size), np.float32)
    settings = {
        "GDAL's default reads": {},
        "memory-mapped (READ_GDAL_CONFIG)": warp.READ_GDAL_CONFIG,
    }
    print(
        f"{len(acqs)} dates × {len(picks)} stage windows of {size}² per round, "
        f"grid {grid.width}×{grid.height}"
    )
    for acq in acqs:  # untimed: the kernels' loading and the files' first opening
        warp.read_window(acq, grid, Window(picks[0][1] * size, picks[0][0] * size, size, size))
    for rnd in range(args.rounds):
        for name, config in settings.items():
            warp.READ_GDAL_CONFIG = dict(config)
            (u0, s0), t0 = _cpu(), time.perf_counter()
            checksum = 0.0
            for r, c in picks:
                for acq in acqs:
                    warp.read_window(acq, grid, Window(c * size, r * size, size, size), out=out)
                    checksum += float(np.nansum(out))
            (u1, s1), wall = _cpu(), time.perf_counter() - t0
            print(
                f"round {rnd + 1}, {name}: CPU {u1 - u0 + s1 - s0:.2f} s (user {u1 - u0:.2f}, "
                f"kernel {s1 - s0:.2f}), wall {wall:.2f} s, checksum {checksum:.6g}"
            )


if __name__ == "__main__":
    main()
