"""A run that describes itself: a STAC catalog with one Item per acquisition.

Every ``pipeline run`` publishes ``OUTPUT/stac/catalog.json`` and one Item per acquisition
(``stac/<YYYYMMDDTHHMMSSZ>/<YYYYMMDDTHHMMSSZ>.json``): its datetime is the acquisition's (UTC),
its geometry the output grid's outline in lon/lat, its assets the acquisition's clear-ground COG
of every band and its mask COG (role ``data``, each with its ``bands`` entry of the raster and,
for GF-4 bands, EO extensions), its quicklook (``overview``) and the run's cube; its
``cloudremoval:*`` properties the software version, the acquisition's id and the solver and mask
settings; from its mask COG, the percent of its observed pixels called cloud (``eo:cloud_cover``,
the field catalogs are searched by) and in each class (``cloudremoval:cover``). Links and
hrefs are relative, so the output folder can be moved or served as it is.
The catalog is written to a temporary folder and published whole, before ``COMPLETE.json``
(:func:`pipeline.control.publish.publish`), and it depends only on the run's outputs and
settings: a rerun writes the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pystac
import rasterio

from pipeline.outputs import stac_parts as stac
from pipeline.plan import RunPlan

__all__ = ["RUN_CATALOG_DIR", "acquisition_items", "publish_run_catalog"]

RUN_CATALOG_DIR = "stac"


def _properties(plan: RunPlan, acquisition_id: str) -> dict[str, Any]:
    solver, mask = plan.config.solver, plan.config.mask
    properties = {
        "cloudremoval:acquisition": acquisition_id,
        "cloudremoval:code_version": plan.version,
        "cloudremoval:solver": solver.method,
        "cloudremoval:lambda_rule": stac.lam_rule(solver.lam, solver.lam_scale),
        "cloudremoval:refined": solver.refines,
        "cloudremoval:ground_capped": solver.caps_ground,
        "cloudremoval:ground_floor": solver.ground_floor,
        "cloudremoval:scope": solver.scope,
        # With the whiteness test, the band it read as the shortest, resolved.
        "cloudremoval:mask": mask.model_dump(mode="json") | {"white_band": plan.white_band},
    }
    if solver.shadow_free_fill:  # only when on: the Items of other runs stay as they were
        properties["cloudremoval:shadow_free_fill"] = True
    quality = plan.config.quality
    if quality is not None:  # the provider's mask used (inputs.quality)
        properties["cloudremoval:quality"] = quality.model_dump(mode="json")
    return properties


def acquisition_items(plan: RunPlan) -> list[pystac.Item]:
    """One Item per acquisition of a run whose COGs are published (module docstring).

    Parameters
    ----------
    plan
        The run's plan; its output folder holds the published ``cog/`` (and ``quicklooks/``).

    Returns
    -------
    list of pystac.Item
        In acquisition order, asset hrefs absolute (made relative when saved).

    Raises
    ------
    ValueError
        An acquisition has no COG in ``cog/``.
    """
    layout = plan.layout
    bands: dict[str, dict[str, Any]] = {}
    outline: tuple[Any, ...] | None = None
    items = []
    for acq, label in zip(plan.acquisitions, plan.time_labels, strict=True):
        cogs = sorted(layout.cog_dir.glob(f"{label}_*.tif"))
        if not cogs:
            raise ValueError(f"{layout.cog_dir}: no COG of acquisition {label}")
        for cog in cogs:
            if (band := stac.band_of(cog)) not in bands:
                with rasterio.open(cog) as src:
                    bands[band] = stac.cog_band(band, src)
                    outline = outline or stac.outline_lonlat(src)  # one grid for every COG
        assert outline is not None
        ring, bbox, proj = outline
        item = pystac.Item(
            id=label,
            geometry={"type": "Polygon", "coordinates": [ring]},
            bbox=bbox,
            datetime=acq.time,
            properties=_properties(plan, acq.id),
        )
        stac.set_projection(item, proj)
        for source in acq.stac.items if acq.stac is not None else ():
            # A STAC input's items: the Items this one is derived from (where they have a URL).
            href = next((ln["href"] for ln in source.get("links", []) if ln["rel"] == "self"), None)
            if href:
                item.add_link(pystac.Link("derived_from", href, pystac.MediaType.JSON))
        for cog in cogs:
            item.add_asset(cog.stem, stac.cog_asset(cog, bands))
        cover = (
            stac.mask_cover(mask)
            if (mask := layout.cog_dir / f"{label}_mask.tif").exists()
            else None
        )
        if cover is not None:
            # The standard field a catalog is searched by, and every class beside it.
            item.properties["eo:cloud_cover"] = cover["cloud"]
            item.properties["cloudremoval:cover"] = cover
        look = layout.quicklook_dir / f"{label}.png"
        if look.exists():
            title = f"observed | mask | cloud-free {label}"
            item.add_asset(
                "quicklook", stac.make_asset(look, pystac.MediaType.PNG, "overview", title)
            )
        cube = "clear, cloud, haze, provenance (time, band, y, x); mask (time, y, x)"
        item.add_asset("cube", stac.make_asset(layout.cube, stac.ZARR_MEDIA_TYPE, "data", cube))
        if cover is not None or any(band in stac.GF4_BANDS for band in bands):
            item.stac_extensions.append(stac.EO_SCHEMA)
        item.stac_extensions.append(stac.RASTER_SCHEMA)
        items.append(item)
    return items


def publish_run_catalog(plan: RunPlan) -> Path:
    """Write the run's catalog to ``OUTPUT/stac/``, replacing an earlier one whole.

    Returns
    -------
    Path
        ``OUTPUT/stac/catalog.json``.
    """
    root = plan.layout.root
    catalog = pystac.Catalog(
        id=f"cloudremoval-{root.name}",
        description="Cloud-free acquisitions of one cloudremoval run",
    )
    for item in acquisition_items(plan):
        catalog.add_item(item)
    return stac.publish_catalog_dir(catalog, root / RUN_CATALOG_DIR)
