"""The simulated ground truth, resampled onto an output grid for comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.warp import Resampling, reproject


def truth_on(truth_path: Path, transform: Any, crs: Any, shape: tuple[int, int]) -> np.ndarray:
    """All bands of the truth GeoTIFF, bilinear on the grid (``transform``, ``crs``, ``shape``);
    NaN outside it. float32 of shape (bands, height, width)."""
    with rasterio.open(truth_path) as src:
        out = np.full((src.count, *shape), np.nan, np.float32)
        reproject(
            src.read(),
            out,
            src_transform=src.transform,
            src_crs=src.crs,
            dst_transform=transform,
            dst_crs=crs,
            dst_nodata=np.nan,
            resampling=Resampling.bilinear,
        )
    return out
