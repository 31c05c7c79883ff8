"""A STAC catalog of the batch outputs: one Item per processed series.

The catalog is self-contained with relative links and lives in ``OUTPUT/stac/``; asset hrefs
point (relatively) into ``OUTPUT/series/<id>/``. It is rebuilt from the series manifests on
every batch, written to a temporary directory beside the final one and swapped in, so a reader
never sees a half-written catalog, and its content depends only on the manifests and files
(no "now" time stamps), so rebuilding an unchanged archive writes identical bytes.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pystac
import rasterio
from pystac.extensions.projection import ProjectionExtension
from rasterio.warp import transform as transform_points

from pipeline.batch.manifest import MANIFEST_NAME
from pipeline.config.run import SCOPE_TRAITS, SolverConfig
from pipeline.geom import densify
from pipeline.store.durable import publish_dir
from pipeline.store.layout import Layout

__all__ = [
    "CATALOG_DIR",
    "EO_SCHEMA",
    "GF4_BANDS",
    "RASTER_SCHEMA",
    "ZARR_MEDIA_TYPE",
    "build_item",
    "item_properties",
    "publish_catalog",
]

CATALOG_DIR = "stac"
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


def _outline_lonlat(
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


def _lam_rule(lam: Any) -> str:
    """How λ was chosen, in words, from the ``solver.lam`` setting."""
    if lam == "auto":
        return "1/sqrt(d) per tile"
    if lam == "star":
        return "fitted lambda* per tile"
    return f"fixed {lam}"


def item_properties(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The Item properties: time span, platform, and the ``cloudremoval:*`` provenance.

    Parameters
    ----------
    manifest
        A series' manifest (``MANIFEST.json``), its ``run`` holding the run's settings.

    Returns
    -------
    dict
        The properties of the series' STAC Item.
    """
    solver = manifest["run"]["solver"]
    return {
        "start_datetime": manifest["start"],
        "end_datetime": manifest["end"],
        "platform": "gf-4",
        "instruments": [manifest["sensor"].lower()],
        "cloudremoval:series_id": manifest["series_id"],
        "cloudremoval:code_version": manifest["code_version"],
        "cloudremoval:config_hash": manifest["config_hash"],
        "cloudremoval:solver": solver["method"],
        "cloudremoval:lambda_rule": _lam_rule(solver["lam"]),
        "cloudremoval:refined": _refined(solver),
        "cloudremoval:dates": len(manifest["dates"]),
        "cloudremoval:products": [pid for pid, _ in manifest["products"]],
    }


def _refined(solver: Mapping[str, Any]) -> bool:
    """Whether the manifest's run refined. A manifest from before ``solver.refine`` existed: that
    run did not; ``refine: null`` (earlier versions' default) meant refined in tile scope."""
    if "refine" not in solver:
        return False
    if solver["refine"] is None:
        return SCOPE_TRAITS[solver.get("scope", "tile")].refines
    return SolverConfig.model_validate(solver).refines


def _set_projection(item: pystac.Item, proj: Mapping[str, Any]) -> None:
    """Add the projection extension with the grid's CRS, shape, transform and bounds."""
    proj_ext = ProjectionExtension.ext(item, add_if_missing=True)
    if proj["code"]:
        proj_ext.code = proj["code"]
    else:
        proj_ext.wkt2 = proj["wkt2"]
    proj_ext.shape = proj["shape"]
    proj_ext.transform = proj["transform"]
    proj_ext.bbox = proj["bbox"]


def _asset(path: Path, media_type: str, role: str, title: str | None = None) -> pystac.Asset:
    """An asset with one role."""
    return pystac.Asset(str(path), title=title, media_type=media_type, roles=[role])


def _cog_band(band: str, src: rasterio.io.DatasetReader) -> dict[str, Any]:
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


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def _band_of(cog: Path) -> str:
    """The band of a COG named ``<YYYYMMDDTHHMMSSZ>_<band>.tif`` (:mod:`pipeline.run`)."""
    return cog.stem.partition("_")[2]


def _assets(
    layout: Layout, cogs: Sequence[Path], bands: Mapping[str, dict[str, Any]]
) -> Iterator[tuple[str, pystac.Asset]]:
    """(key, asset) of every output of a series, in the order the Item lists them; ``bands``
    holds each band's ``bands`` entry."""
    for cog in cogs:
        what = "cloud/haze/shadow mask" if _band_of(cog) == "mask" else "clear ground"
        asset = _asset(cog, pystac.MediaType.COG, "data", f"{what} {cog.stem}")
        asset.extra_fields["bands"] = [dict(bands[_band_of(cog)])]
        yield cog.stem, asset
    yield (
        "cube",
        _asset(
            layout.cube,
            ZARR_MEDIA_TYPE,
            "data",
            "clear, cloud, haze, provenance (time, band, y, x); mask (time, y, x)",
        ),
    )
    for png in sorted(layout.quicklook_dir.glob("*.png")):
        title = f"before | after {png.stem}"
        yield f"quicklook_{png.stem}", _asset(png, pystac.MediaType.PNG, "overview", title)
    for path, key, media_type in (
        (layout.diagnostics_csv, "diagnostics", "text/csv"),
        (layout.root / MANIFEST_NAME, "manifest", pystac.MediaType.JSON),
    ):
        if path.exists():
            yield key, _asset(path, media_type, "metadata")


def build_item(series_dir: Path, manifest: Mapping[str, Any]) -> pystac.Item:
    """The STAC Item of one completed series.

    Parameters
    ----------
    series_dir
        The series' output folder (``cube.zarr``, ``cog/``, ``quicklooks/``, ...).
    manifest
        Its ``series.json``.

    Returns
    -------
    pystac.Item
        Geometry and bbox: the output grid's extent in EPSG:4326; ``start_datetime`` /
        ``end_datetime``: the first and last acquisition; assets: each COG (role ``data``), the
        cube (``data``), quicklooks (``overview``), diagnostics and the manifest
        (``metadata``); ``cloudremoval:*`` properties: code version, configuration hash,
        solver, λ rule, refinement, products; the projection extension from the grid CRS; per
        COG a ``bands`` entry: the band's name, the raster extension's fields read from the band's
        files and, for GF-4 bands, the EO extension's spectral range. Asset hrefs are absolute
        here; :func:`publish_catalog` makes them relative.

    Raises
    ------
    ValueError
        The folder holds no COGs.
    """
    layout = Layout(series_dir)
    cogs = sorted(layout.cog_dir.glob("*.tif"))
    if not cogs:
        raise ValueError(f"{series_dir}: no COGs in cog/, the series is not complete")
    # One file per band is opened: the dates of a band share their profile, and every COG of a
    # series is on the one output grid.
    bands: dict[str, dict[str, Any]] = {}
    for cog in cogs:
        if (band := _band_of(cog)) not in bands:
            with rasterio.open(cog) as src:
                bands[band] = _cog_band(band, src)
                if cog == cogs[0]:
                    ring, bbox, proj = _outline_lonlat(src)
    item = pystac.Item(
        id=manifest["series_id"],
        geometry={"type": "Polygon", "coordinates": [ring]},
        bbox=bbox,
        datetime=None,
        properties=item_properties(manifest),
    )
    item.common_metadata.start_datetime = datetime.fromisoformat(manifest["start"])
    item.common_metadata.end_datetime = datetime.fromisoformat(manifest["end"])
    _set_projection(item, proj)
    for key, asset in _assets(layout, cogs, bands):
        item.add_asset(key, asset)
    if any(band in GF4_BANDS for band in bands):
        item.stac_extensions.append(EO_SCHEMA)
    item.stac_extensions.append(RASTER_SCHEMA)
    return item


def publish_catalog(
    output_root: Path,
    series: Sequence[tuple[Path, Mapping[str, Any]]],
    *,
    title: str = "GF-4 cloud-free series",
) -> Path:
    """Write the catalog of ``series`` to ``output_root/stac/``, replacing the old one whole.

    Parameters
    ----------
    output_root
        The batch output root.
    series
        (series folder, manifest) of every completed series to list.
    title
        Catalog title.

    Returns
    -------
    Path
        ``output_root/stac/catalog.json``.
    """
    output_root = Path(output_root)
    final = output_root / CATALOG_DIR
    # Same parent as the final directory: relative hrefs stay valid through the rename.
    tmp = Path(tempfile.mkdtemp(prefix=f".{CATALOG_DIR}-", dir=output_root))
    try:
        catalog = pystac.Catalog(
            id="cloudremoval",
            description="Cloud- and haze-free GaoFen-4 series produced by cloudremoval (aATM)",
            title=title,
        )
        for series_dir, manifest in sorted(series, key=lambda s: s[1]["series_id"]):
            catalog.add_item(build_item(Path(series_dir).resolve(), manifest))
        catalog.normalize_hrefs(str(tmp.resolve()))
        for item in catalog.get_items():
            for asset in item.assets.values():
                asset.href = os.path.relpath(asset.href, Path(item.get_self_href() or "").parent)
        catalog.save(catalog_type=pystac.CatalogType.SELF_CONTAINED)
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; the published catalog is for everyone
        publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "catalog.json"
