"""The STAC pieces shared by a run's catalog (:mod:`pipeline.outputs.items`) and a batch's
(:mod:`pipeline.batch.stac`): the outline of a COG in lon/lat, its projection fields, the
``bands`` entry of a COG asset, the cover of a mask COG's classes and how the solver's settings
read as Item properties."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import rasterio
from pystac.extensions.projection import ProjectionExtension
from rasterio.warp import transform as transform_points

from cloudcore.masks import CLEAR, CLOUD, HAZE, NODATA, SHADOW
from pipeline.config.solver import SCOPE_TRAITS, SolverConfig
from pipeline.geom import densify
from pipeline.store.durable import publish_dir

__all__ = [
    "EO_SCHEMA",
    "GF4_BANDS",
    "RASTER_SCHEMA",
    "ZARR_MEDIA_TYPE",
    "band_of",
    "capped",
    "cog_asset",
    "cog_band",
    "floored",
    "lam_rule",
    "make_asset",
    "mask_cover",
    "outline_lonlat",
    "publish_catalog_dir",
    "refined",
    "save_catalog",
    "set_projection",
]

#: Media type the STAC community uses for Zarr stores.
ZARR_MEDIA_TYPE = "application/vnd+zarr"
#: Points per edge of the lon/lat outline, the corner included.
_EDGE_POINTS = 11
#: STAC 1.1 keeps band fields in each asset's ``bands``; these extension versions define theirs
#: there (pystac's own EO and raster helpers still write the older ``eo:bands``).
EO_SCHEMA = "https://stac-extensions.github.io/eo/v2.0.0/schema.json"
RASTER_SCHEMA = "https://stac-extensions.github.io/raster/v2.0.0/schema.json"
#: GF-4 bands: (eo:common_name, centre and full width at half maximum in µm), from the
#: sensors' nominal ranges: PMS B1 0.45-0.90 (pan), B2 0.45-0.52, B3 0.52-0.60, B4 0.63-0.69,
#: B5 0.76-0.90; IRS (its one band IRS1) 3.5-4.1 (mid-wave infrared, no EO common name).
GF4_BANDS: dict[str, tuple[str | None, float, float]] = {
    "B1": ("pan", 0.675, 0.45),
    "B2": ("blue", 0.485, 0.07),
    "B3": ("green", 0.56, 0.08),
    "B4": ("red", 0.66, 0.06),
    "B5": ("nir", 0.83, 0.14),
    "IRS1": (None, 3.8, 0.6),
}


def outline_lonlat(
    src: rasterio.io.DatasetReader,
) -> tuple[list[list[float]], list[float], dict[str, Any]]:
    """Closed lon/lat outline and bbox of an open raster's extent, and its projection fields."""
    left, bottom, right, top = src.bounds
    crs, shape, transform = src.crs, [src.height, src.width], list(src.transform)[:6]
    # Densified edges: a UTM rectangle is slightly curved in lon/lat.
    corners = [(left, top), (right, top), (right, bottom), (left, bottom)]
    xs, ys = densify(corners, _EDGE_POINTS)
    lon, lat = transform_points(crs, "EPSG:4326", xs, ys)
    ring = [[round(float(x), 7), round(float(y), 7)] for x, y in zip(lon, lat, strict=True)]
    ring.append(ring[0])
    bbox = [min(lon), min(lat), max(lon), max(lat)]
    epsg = crs.to_epsg()
    proj = {
        "code": f"EPSG:{epsg}" if epsg else None,
        "wkt2": None if epsg else crs.to_wkt(),
        "shape": shape,
        "transform": transform,
        "bbox": [left, bottom, right, top],
    }
    return ring, [round(float(v), 7) for v in bbox], proj


def lam_rule(lam: Any, scale: float = 1.0) -> str:
    """How λ was chosen, in words, from the ``solver.lam`` and ``solver.lam_scale`` settings."""
    times = "" if scale == 1.0 else f"{scale:g} x "
    if lam == "auto":
        return f"{times}1/sqrt(d) per tile"
    if lam == "star":
        return f"{times}fitted lambda* per tile"
    return f"fixed {lam}"


def refined(solver: Mapping[str, Any]) -> bool:
    """Whether the manifest's run refined. A manifest from before ``solver.refine`` existed: that
    run did not; ``refine: null`` (earlier versions' default) meant refined in tile scope."""
    if "refine" not in solver:
        return False
    if solver["refine"] is None:
        return SCOPE_TRAITS[solver.get("scope", "tile")].refines
    return SolverConfig.model_validate(solver).refines


def capped(solver: Mapping[str, Any]) -> bool:
    """Whether the manifest's run capped the ground at each pixel's median date. A manifest
    from before ``solver.cap_ground`` existed: that run did not."""
    if "cap_ground" not in solver:
        return False
    return SolverConfig.model_validate(solver).caps_ground


def floored(solver: Mapping[str, Any]) -> float | None:
    """The quantile the manifest's run floored the ground at, or None. A manifest from before
    ``solver.floor_ground`` existed: that run did not."""
    if "floor_ground" not in solver:
        return None
    return SolverConfig.model_validate(solver).ground_floor


def set_projection(item: pystac.Item, proj: Mapping[str, Any]) -> None:
    """Add the projection extension with the grid's CRS, shape, transform and bounds."""
    proj_ext = ProjectionExtension.ext(item, add_if_missing=True)
    if proj["code"]:
        proj_ext.code = proj["code"]
    else:
        proj_ext.wkt2 = proj["wkt2"]
    proj_ext.shape = proj["shape"]
    proj_ext.transform = proj["transform"]
    proj_ext.bbox = proj["bbox"]


def make_asset(path: Path, media_type: str, role: str, title: str | None = None) -> pystac.Asset:
    """An asset with one role."""
    return pystac.Asset(str(path), title=title, media_type=media_type, roles=[role])


def cog_band(band: str, src: rasterio.io.DatasetReader) -> dict[str, Any]:
    """The ``bands`` entry of a band's one-band COGs, read from one of them (every date of a
    band is written with one profile, scale and unit): its name, what the file says (data type,
    nodata, pixel size, GDAL scale, offset and unit; raster extension) and, for a GF-4 band, its
    spectral range (EO extension)."""
    entry: dict[str, Any] = {"name": band, "data_type": src.dtypes[0]}
    if src.nodata is not None:
        entry["nodata"] = "nan" if math.isnan(src.nodata) else _number(src.nodata)
    if src.units[0]:
        entry["unit"] = src.units[0]
    entry["raster:spatial_resolution"] = _number(src.res[0])
    scale, offset = src.scales[0], src.offsets[0]
    if (scale, offset) != (1.0, 0.0):
        entry["raster:scale"], entry["raster:offset"] = _number(scale), _number(offset)
    if band in GF4_BANDS:
        common, centre, width = GF4_BANDS[band]
        if common:
            entry["eo:common_name"] = common
        entry["eo:center_wavelength"] = centre
        entry["eo:full_width_half_max"] = width
    return entry


def cog_asset(cog: Path, bands: Mapping[str, Mapping[str, Any]]) -> pystac.Asset:
    """The ``data`` asset of one COG (a band's clear ground, or the mask), with its band's
    ``bands`` entry (:func:`cog_band`) from ``bands``."""
    what = "cloud/haze/shadow mask" if band_of(cog) == "mask" else "clear ground"
    each = make_asset(cog, pystac.MediaType.COG, "data", f"{what} {cog.stem}")
    each.extra_fields["bands"] = [dict(bands[band_of(cog)])]
    return each


#: The classes of a mask COG whose cover an Item gives, by the mask's codes (README).
COVER_CLASSES = {"clear": CLEAR, "haze": HAZE, "cloud": CLOUD, "shadow": SHADOW}


def mask_cover(mask_cog: Path) -> dict[str, float] | None:
    """The percent of an acquisition's observed pixels (mask code other than no data) in each
    class of :data:`COVER_CLASSES`, rounded to 0.01, read from its mask COG at full resolution
    block by block (not from its overviews, which hold each area's most common class); None
    where the acquisition observed no pixel of the grid."""
    counts = np.zeros(256, np.int64)
    with rasterio.open(mask_cog) as src:
        for _, window in src.block_windows(1):
            counts += np.bincount(src.read(1, window=window).ravel(), minlength=256)
    observed = int(counts.sum() - counts[NODATA])
    if observed == 0:
        return None
    return {
        name: round(100.0 * int(counts[code]) / observed, 2) for name, code in COVER_CLASSES.items()
    }


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def band_of(cog: Path) -> str:
    """The band of a COG named ``<YYYYMMDDTHHMMSSZ>_<band>.tif`` (:mod:`pipeline.run`)."""
    return cog.stem.partition("_")[2]


def save_catalog(catalog: pystac.Catalog, folder: Path) -> None:
    """Save ``catalog`` self-contained into ``folder`` (a temporary one, published whole by the
    caller), every asset href relative to its Item, and the folder readable by everyone."""
    catalog.normalize_hrefs(str(folder.resolve()))
    for item in catalog.get_items():
        for each in item.assets.values():
            each.href = os.path.relpath(each.href, Path(item.get_self_href() or "").parent)
    catalog.save(catalog_type=pystac.CatalogType.SELF_CONTAINED)
    folder.chmod(0o755)  # mkdtemp makes it owner-only; the published catalog is for everyone


def publish_catalog_dir(catalog: pystac.Catalog, final: Path) -> Path:
    """Save ``catalog`` into a hidden folder beside ``final`` and publish it there whole
    (:func:`pipeline.store.durable.publish_dir`): a reader sees the old catalog or the new one,
    never half of one. Returns ``final/catalog.json``."""
    # Same parent as the final folder: the relative hrefs stay valid through the rename.
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        save_catalog(catalog, tmp)
        publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "catalog.json"
