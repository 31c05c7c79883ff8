"""A STAC catalog of the batch outputs: one Item per processed series.

The catalog is self-contained with relative links and lives in ``OUTPUT/stac/``; asset hrefs
point (relatively) into ``OUTPUT/series/<id>/``. It is rebuilt from the series manifests on
every batch, written to a temporary directory beside the final one and swapped in, so a reader
never sees a half-written catalog, and its content depends only on the manifests and files
(no "now" time stamps), so rebuilding an unchanged archive writes identical bytes. Each series
folder also holds the run's own catalog, one Item per acquisition (:mod:`pipeline.outputs.items`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pystac
import rasterio

from pipeline.batch.manifest import MANIFEST_NAME
from pipeline.outputs.stac_parts import (
    EO_SCHEMA,
    GF4_BANDS,
    RASTER_SCHEMA,
    ZARR_MEDIA_TYPE,
    band_of,
    capped,
    cog_asset,
    cog_band,
    floored,
    lam_rule,
    make_asset,
    outline_lonlat,
    publish_catalog_dir,
    refined,
    set_projection,
)
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
    # Only when on (a manifest from before the key, or with it off, says nothing).
    filled = {"cloudremoval:shadow_free_fill": True} if solver.get("shadow_free_fill") else {}
    return filled | {
        "start_datetime": manifest["start"],
        "end_datetime": manifest["end"],
        "platform": "gf-4",
        "instruments": [manifest["sensor"].lower()],
        "cloudremoval:series_id": manifest["series_id"],
        "cloudremoval:code_version": manifest["code_version"],
        "cloudremoval:config_hash": manifest["config_hash"],
        "cloudremoval:solver": solver["method"],
        "cloudremoval:lambda_rule": lam_rule(solver["lam"], solver.get("lam_scale", 1.0)),
        "cloudremoval:refined": refined(solver),
        "cloudremoval:ground_capped": capped(solver),
        "cloudremoval:ground_floor": floored(solver),
        "cloudremoval:dates": len(manifest["dates"]),
        "cloudremoval:products": [pid for pid, _ in manifest["products"]],
    }


def _assets(
    layout: Layout, cogs: Sequence[Path], bands: Mapping[str, dict[str, Any]]
) -> Iterator[tuple[str, pystac.Asset]]:
    """(key, asset) of every output of a series, in the order the Item lists them; ``bands``
    holds each band's ``bands`` entry."""
    for cog in cogs:
        yield cog.stem, cog_asset(cog, bands)
    yield (
        "cube",
        make_asset(
            layout.cube,
            ZARR_MEDIA_TYPE,
            "data",
            "clear, cloud, haze, provenance (time, band, y, x); mask (time, y, x)",
        ),
    )
    for png in sorted(layout.quicklook_dir.glob("*.png")):
        title = f"before | after {png.stem}"
        yield f"quicklook_{png.stem}", make_asset(png, pystac.MediaType.PNG, "overview", title)
    for path, key, media_type in (
        (layout.diagnostics_csv, "diagnostics", "text/csv"),
        (layout.root / MANIFEST_NAME, "manifest", pystac.MediaType.JSON),
    ):
        if path.exists():
            yield key, make_asset(path, media_type, "metadata")


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
        if (band := band_of(cog)) not in bands:
            with rasterio.open(cog) as src:
                bands[band] = cog_band(band, src)
                if cog == cogs[0]:
                    ring, bbox, proj = outline_lonlat(src)
    item = pystac.Item(
        id=manifest["series_id"],
        geometry={"type": "Polygon", "coordinates": [ring]},
        bbox=bbox,
        datetime=None,
        properties=item_properties(manifest),
    )
    item.common_metadata.start_datetime = datetime.fromisoformat(manifest["start"])
    item.common_metadata.end_datetime = datetime.fromisoformat(manifest["end"])
    set_projection(item, proj)
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
    catalog = pystac.Catalog(
        id="cloudremoval",
        description="Cloud- and haze-free GaoFen-4 series produced by cloudremoval (aATM)",
        title=title,
    )
    for series_dir, manifest in sorted(series, key=lambda s: s[1]["series_id"]):
        catalog.add_item(build_item(Path(series_dir).resolve(), manifest))
    return publish_catalog_dir(catalog, Path(output_root) / CATALOG_DIR)
