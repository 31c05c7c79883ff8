"""A simulated series of georeferenced GeoTIFFs, and the writer of one date of such a series."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine

from pipeline.inputs.synthetic.ground import (
    PMS_BANDS,
    SimulatedProducts,
    cloud_fields,
    load_demo_truth,
    to_dn,
    truth_bands,
    write_truth,
)

__all__ = ["make_geotiff_series", "write_scene"]


def make_geotiff_series(
    out_dir: Path,
    *,
    n_dates: int = 7,
    size: int = 256,
    seed: int = 0,
    crs: str = "EPSG:32650",
    cloud_style: str = "moving",
    truth_rgb: np.ndarray | None = None,
    origin: tuple[float, float] = (440_000.0, 4_420_000.0),
    resolution: float = 50.0,
    max_crop_px: int = 4,
) -> SimulatedProducts:
    """Write a series of georeferenced 5-band uint16 GeoTIFFs (one per date).

    Files are named ``scene_YYYYMMDD.tif`` (the default ``date_pattern`` finds the date), hold
    DN = round(I_t · 65535) with nodata 0 and share one pixel grid; each date is cropped by
    0…``max_crop_px`` pixels on every side, so their extents differ.

    Parameters
    ----------
    out_dir
        Created if needed.
    n_dates, size, seed
        Number of dates, truth size in pixels (square), random seed.
    crs
        CRS of the files and of the truth.
    cloud_style
        As in :func:`make_gf4_series`.
    truth_rgb
        RGB image to use instead of the bundled tyrol-w1 image.
    origin
        (left, top) of the truth in ``crs`` units.
    resolution
        Pixel size in ``crs`` units.
    max_crop_px
        Largest per-side crop of a date.

    Returns
    -------
    SimulatedProducts
        ``paths`` are the GeoTIFF files in time order; ``truth_path`` the float32 truth.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    truth = truth_bands(load_demo_truth() if truth_rgb is None else truth_rgb, size)
    transform = Affine(resolution, 0.0, origin[0], 0.0, -resolution, origin[1])
    truth_path = out_dir / "truth.tif"
    write_truth(truth_path, truth, transform, crs)
    clouds = cloud_fields((size, size), n_dates, cloud_style, rng)
    crops = rng.integers(0, max_crop_px + 1, size=(n_dates, 4))
    # File names carry the date only, so the series times are midnights (UTC).
    times = [datetime(2020, 6, 1, tzinfo=UTC) + timedelta(days=k) for k in range(n_dates)]
    paths = []
    for k, time in enumerate(times):
        dn = to_dn(clouds[k] + (1.0 - clouds[k]) * truth, 65535)
        top, left, bottom, right = (int(v) for v in crops[k])
        dn = dn[:, top : size - bottom, left : size - right]
        window = transform @ Affine.translation(left, top)
        paths.append(write_scene(out_dir, time, dn, crs, window, PMS_BANDS))
    return SimulatedProducts(paths=paths, truth_path=truth_path, times=times)


def write_scene(
    folder: Path,
    day: date,
    dn: np.ndarray,
    crs: str,
    transform: Affine,
    descriptions: Sequence[str] | None = None,
) -> Path:
    """Write one date of a GeoTIFF series: ``folder/scene_YYYYMMDD.tif``.

    Parameters
    ----------
    folder
        Created if needed.
    day
        The date in the name (the default ``date_pattern`` finds it).
    dn
        uint16 DN, (bands, rows, cols) or (rows, cols); 0 is no-data.
    crs, transform
        Its georeferencing.
    descriptions
        Band names, or None.

    Returns
    -------
    Path
        The file written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    bands = dn.reshape(-1, *dn.shape[-2:])
    path = folder / f"scene_{day:%Y%m%d}.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=bands.shape[2],
        height=bands.shape[1],
        count=bands.shape[0],
        dtype="uint16",
        nodata=0,
        crs=crs,
        transform=transform,
    ) as dst:
        dst.write(bands.astype(np.uint16, copy=False))
        if descriptions is not None:
            dst.descriptions = tuple(descriptions)
    return path
