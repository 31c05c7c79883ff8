"""A benchmark site written as a static STAC catalog of COGs, as a provider would publish it.

One Item per date, one single-band COG asset per band (its common name in ``eo:bands``, its
nodata, data type and scale in ``raster:bands``) and the provider's quality band as one more
asset (role ``cloud``). The CRS, pixel grid, DN and quality values are the site's own
(``cloudlab/data/real-clouds/*.npz``, unchanged); the sites give dates only, so each Item's
``datetime`` is the date at 00:00 UTC (the dates are the provider's; no time of day is known).
The pipeline reads such a catalog with ``inputs.kind: stac`` (:mod:`pipeline.inputs.stac`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pystac
import rasterio
from affine import Affine
from pystac.extensions.eo import Band, EOExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import DataType, RasterBand, RasterExtension
from rasterio.crs import CRS
from rasterio.warp import transform_bounds

__all__ = ["write_cog", "write_stac_series"]


def write_cog(
    path: Path, data: np.ndarray, crs: str, transform: Affine, nodata: float | None
) -> None:
    """Write one band as a Cloud-Optimised GeoTIFF (GDAL's COG driver, deflate)."""
    profile = {
        "driver": "COG",
        "width": data.shape[1],
        "height": data.shape[0],
        "count": 1,
        "dtype": data.dtype.name,
        "crs": crs,
        "transform": transform,
        "nodata": nodata,
        "compress": "deflate",
        "blocksize": 256,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)


def write_stac_series(
    folder: Path,
    *,
    values: np.ndarray,
    dates: Sequence[str],
    bands: Sequence[str],
    crs: str,
    transform: Sequence[float],
    nodata: float | None,
    scale: float | None = None,
    quality: np.ndarray | None = None,
    quality_name: str = "quality",
    name: str = "series",
    assets: Sequence[str] | None = None,
) -> Path:
    """Write a series as a static STAC catalog (self-contained, relative links).

    Parameters
    ----------
    folder
        Where the catalog and its COGs go (created).
    values
        DN ``(dates, bands, rows, cols)`` in the provider's data type.
    dates
        ISO dates, one per date.
    bands
        The bands' common names (``blue``, ``red``, ``nir``...); each is an asset key too.
    crs, transform
        The grid (any CRS rasterio reads; the six affine coefficients a, b, c, d, e, f).
    nodata, scale
        The DN's no-data value and reflectance scale, written in ``raster:bands``.
    quality
        The provider's quality values ``(dates, rows, cols)``, written as the asset
        ``quality_name``; None for none.
    name
        The catalog's id, and the start of each Item's id.
    assets
        The bands' asset keys (e.g. ``B02``), default their common names.

    Returns
    -------
    pathlib.Path
        The ``catalog.json``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    affine = Affine(*transform[:6])
    height, width = values.shape[-2:]
    rio_crs = CRS.from_user_input(crs)
    bbox = list(transform_bounds(rio_crs, "EPSG:4326", *_bounds(affine, width, height)))
    outline = {
        "type": "Polygon",
        "coordinates": [
            [
                [bbox[0], bbox[1]],
                [bbox[2], bbox[1]],
                [bbox[2], bbox[3]],
                [bbox[0], bbox[3]],
                [bbox[0], bbox[1]],
            ]
        ],
    }
    catalog = pystac.Catalog(id=name, description=f"{name}: one Item per date")
    for t, day in enumerate(dates):
        item_id = f"{name}-{day}"
        when = datetime.fromisoformat(day).replace(tzinfo=UTC)
        item = pystac.Item(item_id, outline, bbox, when, {})
        proj = ProjectionExtension.ext(item, add_if_missing=True)
        # An EPSG code only where the site names one: a PROJ string's "closest" EPSG match
        # can be a code newer than the GDAL that reads it.
        if crs.upper().startswith("EPSG:"):
            proj.code = crs.upper()
        else:
            proj.wkt2 = rio_crs.to_wkt()
        proj.transform = list(affine)[:6]
        proj.shape = [height, width]
        for b, band in enumerate(bands):
            key = band if assets is None else assets[b]
            href = folder / f"{item_id}_{key}.tif"
            write_cog(href, values[t, b], crs, affine, nodata)
            asset = pystac.Asset(str(href), media_type=pystac.MediaType.COG, roles=["data"])
            item.add_asset(key, asset)
            eo = EOExtension.ext(asset, add_if_missing=True)
            eo.bands = [Band.create(name=key, common_name=band)]
            raster = RasterBand.create(
                nodata=nodata, data_type=DataType(values.dtype.name), scale=scale
            )
            RasterExtension.ext(asset, add_if_missing=True).bands = [raster]
        if quality is not None:
            href = folder / f"{item_id}_{quality_name}.tif"
            write_cog(href, quality[t], crs, affine, None)
            asset = pystac.Asset(str(href), media_type=pystac.MediaType.COG, roles=["cloud"])
            item.add_asset(quality_name, asset)
            raster = RasterBand.create(data_type=DataType(quality.dtype.name))
            RasterExtension.ext(asset, add_if_missing=True).bands = [raster]
        catalog.add_item(item)
    catalog.normalize_hrefs(str(folder))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    return folder / "catalog.json"


def _bounds(t: Affine, width: int, height: int) -> tuple[float, float, float, float]:
    x0, y0 = t @ (0, 0)
    x1, y1 = t @ (width, height)
    return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)
