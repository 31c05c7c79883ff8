"""A STAC catalog of the batch outputs: one Item per processed series.

The catalog is self-contained with relative links and lives in ``OUTPUT/stac/``; asset hrefs
point (relatively) into ``OUTPUT/series/<id>/``. It is rebuilt from the series manifests on
every batch, written to a temporary directory beside the final one and swapped in, so a reader
never sees a half-written catalog, and its content depends only on the manifests and files
(no "now" time stamps), so rebuilding an unchanged archive writes identical bytes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import rasterio
from pystac.extensions.projection import ProjectionExtension
from rasterio.warp import transform as transform_points

from pipeline.outputs import Layout, publish_dir

__all__ = ["CATALOG_DIR", "ZARR_MEDIA_TYPE", "build_item", "publish_catalog"]

CATALOG_DIR = "stac"
#: Media type the STAC community uses for Zarr stores.
ZARR_MEDIA_TYPE = "application/vnd+zarr"
_EDGE_POINTS = 11


def _outline_lonlat(path: Path) -> tuple[list[list[float]], list[float], dict[str, Any]]:
    """Closed lon/lat outline and bbox of a raster's extent, and its projection fields."""
    with rasterio.open(path) as src:
        left, bottom, right, top = src.bounds
        crs, shape, transform = src.crs, [src.height, src.width], list(src.transform)[:6]
    f = np.linspace(0.0, 1.0, _EDGE_POINTS, endpoint=False)
    # Densified edges: a UTM rectangle is slightly curved in lon/lat.
    xs = np.concatenate(
        [
            left + f * (right - left),
            np.full_like(f, right),
            right - f * (right - left),
            np.full_like(f, left),
        ]
    )
    ys = np.concatenate(
        [
            np.full_like(f, top),
            top - f * (top - bottom),
            np.full_like(f, bottom),
            bottom + f * (top - bottom),
        ]
    )
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
    if lam == "auto":
        return "1/sqrt(d) per tile"
    if lam == "star":
        return "fitted lambda* per tile"
    return f"fixed {lam}"


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
        solver, λ rule, products; the projection extension from the grid CRS. Asset hrefs are
        absolute here; :func:`publish_catalog` makes them relative.
    """
    layout = Layout(series_dir)
    cogs = sorted(layout.cog_dir.glob("*.tif"))
    if not cogs:
        raise ValueError(f"{series_dir}: no COGs in cog/, the series is not complete")
    ring, bbox, proj = _outline_lonlat(cogs[0])
    solver = manifest["run"]["solver"]
    properties = {
        "start_datetime": manifest["start"],
        "end_datetime": manifest["end"],
        "platform": "gf-4",
        "instruments": [manifest["sensor"].lower()],
        "cloudremoval:series_id": manifest["series_id"],
        "cloudremoval:code_version": manifest["code_version"],
        "cloudremoval:config_hash": manifest["config_hash"],
        "cloudremoval:solver": solver["method"],
        "cloudremoval:lambda_rule": _lam_rule(solver["lam"]),
        "cloudremoval:dates": len(manifest["dates"]),
        "cloudremoval:products": [pid for pid, _ in manifest["products"]],
    }
    item = pystac.Item(
        id=manifest["series_id"],
        geometry={"type": "Polygon", "coordinates": [ring]},
        bbox=bbox,
        datetime=None,
        properties=properties,
    )
    item.common_metadata.start_datetime = datetime.fromisoformat(manifest["start"])
    item.common_metadata.end_datetime = datetime.fromisoformat(manifest["end"])
    proj_ext = ProjectionExtension.ext(item, add_if_missing=True)
    if proj["code"]:
        proj_ext.code = proj["code"]
    else:
        proj_ext.wkt2 = proj["wkt2"]
    proj_ext.shape = proj["shape"]
    proj_ext.transform = proj["transform"]
    proj_ext.bbox = proj["bbox"]

    for cog in cogs:
        item.add_asset(
            cog.stem,
            pystac.Asset(
                str(cog),
                title=f"clear ground {cog.stem}",
                media_type=pystac.MediaType.COG,
                roles=["data"],
            ),
        )
    item.add_asset(
        "cube",
        pystac.Asset(
            str(layout.cube),
            title="clear, cloud, haze (time, band, y, x)",
            media_type=ZARR_MEDIA_TYPE,
            roles=["data"],
        ),
    )
    for png in sorted(layout.quicklook_dir.glob("*.png")):
        item.add_asset(
            f"quicklook_{png.stem}",
            pystac.Asset(
                str(png),
                title=f"before | after {png.stem}",
                media_type=pystac.MediaType.PNG,
                roles=["overview"],
            ),
        )
    for name, key, media in (
        ("diagnostics.csv", "diagnostics", "text/csv"),
        ("series.json", "manifest", pystac.MediaType.JSON),
    ):
        if (series_dir / name).exists():
            item.add_asset(
                key, pystac.Asset(str(series_dir / name), media_type=media, roles=["metadata"])
            )
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
