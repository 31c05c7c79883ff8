"""What a run's STAC Items' cover costs: :func:`pipeline.outputs.stac_parts.mask_cover` on one
full-size mask COG (the driver reads each acquisition's once, at publish).

The COG is written as a run writes its masks (uint8, 255 no data, DEFLATE level 1, predictor 2,
512 px blocks, MODE overviews) over a GF-4 PMS grid of 11551² px, its classes in 64 px squares
drawn at random (clear, cloud, shadow, no data), so that it compresses about as a mask does.
Prints the best of ``--repeat`` timings.

Usage::

    python benchmarks/cover_cost.py [--size 11551] [--repeat 3]     # about 30 s
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.transform import from_origin

from pipeline.outputs.stac_parts import mask_cover


def write_mask_cog(path: Path, size: int) -> None:
    """A mask COG of ``size``² px, its classes in 64 px squares drawn with a fixed seed."""
    rng = np.random.default_rng(0)
    squares = rng.choice(np.array([0, 0, 0, 2, 3, 255], np.uint8), size=(size // 64 + 1,) * 2)
    mask = np.kron(squares, np.ones((64, 64), np.uint8))[:size, :size]
    plain = path.with_suffix(".plain.tif")
    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "uint8"}
    profile |= {"nodata": 255, "tiled": True, "blockxsize": 512, "blockysize": 512}
    with rasterio.open(
        plain, "w", crs="EPSG:32650", transform=from_origin(0, 0, 50, 50), **profile
    ) as dst:
        dst.write(mask, 1)
    rasterio.shutil.copy(
        plain,
        path,
        driver="COG",
        compress="DEFLATE",
        level=1,
        predictor=2,
        blocksize=512,
        overview_resampling="mode",
    )
    plain.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=11551)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cog = Path(folder) / "mask.tif"
        write_mask_cog(cog, args.size)
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            cover = mask_cover(cog)
            seconds.append(time.perf_counter() - started)
    print(f"mask_cover, {args.size}² px: best {min(seconds):.2f} s of {args.repeat}; {cover}")


if __name__ == "__main__":
    main()
