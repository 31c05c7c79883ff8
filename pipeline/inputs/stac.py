"""A series described by STAC: a static catalog, an ItemCollection file or a STAC API search.

The items are parsed by **odc-stac** (:func:`odc.stac.extract_collection_metadata`,
:func:`odc.stac.parse_item`), the Open Data Cube's STAC loader, and read window by window by
:func:`odc.stac.load` in the stage tasks (:mod:`pipeline.stage.stac_read`). Chosen over
stackstac because it reads each asset with rasterio in the asset's own CRS and grid and copies
pixels without resampling where the grid is the asset's own (stackstac always warps through a
VRT), groups the items of one overpass by solar day, and is released with the Open Data Cube's
libraries (odc-geo) that it shares with the rest of that stack.

Here, only metadata is read:

* bands are chosen by asset key or by ``eo:bands`` common name (``inputs.bands``), resolved by
  odc-stac's aliases;
* items whose solar day is the same (odc-stac's ``solar_date``: UTC time plus longitude / 15
  hours) are one acquisition: the tiles of one overpass; its time is the earliest item's;
* the acquisition's grid is its first item's first band's (CRS, pixel size, lattice), grown to
  cover every item of the overpass, so that :func:`pipeline.grid.target.derive_grid` keeps a
  series on one lattice as it is, as for GeoTIFFs;
* the DN scale is ``inputs.max_dn``, else the bands' data type's maximum (65535 for uint16):
  STAC's ``raster:bands`` ``scale`` is a physical scale, not a declared maximum.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
from rasterio.crs import CRS
from rasterio.errors import CRSError

from pipeline.errors import ConfigError, InputError
from pipeline.inputs.acquisition import Acquisition
from pipeline.inputs.stac_source import QUALITY_RULES, QualityRule, StacSource

__all__ = ["discover_stac", "load_items"]


def load_items(inputs: Any) -> list[Any]:
    """The ``pystac.Item`` objects an ``inputs.kind: stac`` section names.

    Parameters
    ----------
    inputs
        A :class:`pipeline.config.StacInputs`: ``catalog`` (a static catalog, collection or
        ItemCollection JSON file or URL) or ``search`` (a STAC API search).

    Returns
    -------
    list of pystac.Item
        Every item found (a catalog's, recursively).

    Raises
    ------
    InputError
        The file or API cannot be read, or it holds no item.
    """
    import pystac

    if inputs.catalog is not None:
        where = str(inputs.catalog)
        try:
            text = json.loads(pystac.StacIO.default().read_text(where))
            if text.get("type") == "FeatureCollection":
                obj: Any = pystac.ItemCollection.from_dict(text, preserve_dict=False)
                for item in obj.items:
                    _absolute_assets(item, where)
            else:
                obj = pystac.read_dict(text, href=where)
        except (OSError, ValueError, AttributeError, pystac.STACError) as exc:
            raise InputError(
                f"inputs.catalog: cannot read {where} as STAC ({type(exc).__name__}: {exc}); "
                "give a catalog.json, collection.json or ItemCollection file"
            ) from None
        if isinstance(obj, pystac.ItemCollection):
            items = list(obj.items)
        elif isinstance(obj, pystac.Item):
            items = [obj]
        else:
            items = list(obj.get_items(recursive=True))
    else:
        items = _search(inputs.search)
    if not items:
        raise InputError(
            f"inputs: {_where(inputs)} holds no STAC item; check the catalog or search"
        )
    return items


def _absolute_assets(item: Any, collection_href: str) -> None:
    """Resolve an ItemCollection's relative asset hrefs against the file's folder."""
    base = collection_href.rsplit("/", 1)[0] if "/" in collection_href else "."
    for asset in item.assets.values():
        if "://" not in asset.href and not Path(asset.href).is_absolute():
            asset.href = f"{base}/{asset.href}"


def _where(inputs: Any) -> str:
    return (
        str(inputs.catalog) if inputs.catalog is not None else f"the search of {inputs.search.url}"
    )


def _search(search: Any) -> list[Any]:
    """Items of a STAC API search (pystac-client)."""
    from pystac_client import Client
    from pystac_client.exceptions import APIError

    try:
        client = Client.open(search.url)
        found = client.search(
            collections=list(search.collections) or None,
            bbox=list(search.bbox) if search.bbox else None,
            datetime=search.datetime,
            query=search.query,
            max_items=search.max_items,
        )
        return list(found.items())
    except (APIError, OSError, ValueError) as exc:
        raise InputError(
            f"inputs.search: the STAC API at {search.url} failed ({type(exc).__name__}: {exc}); "
            "check inputs.search.url and the search keys"
        ) from None


def _resolve(md: Any, wanted: Sequence[str], what: str, item_id: str) -> list[str]:
    """Asset keys of the bands ``wanted`` (asset keys or common names)."""
    keys = []
    for name in wanted:
        try:
            asset, _ = md.band_key(name)
        except (ValueError, KeyError):
            have = ", ".join(sorted(md.all_bands)) if hasattr(md, "all_bands") else "?"
            raise InputError(
                f"{what}: item {item_id} has no asset or common name {name!r} (it has {have}); "
                f"fix {what}"
            ) from None
        keys.append(asset if isinstance(asset, str) else str(asset))
    return keys


def _grid_of(parsed: Sequence[Any], asset: str) -> tuple[str, tuple[float, ...], int, int]:
    """The first item's band grid, grown over every item's footprint (same CRS and lattice)."""
    boxes = []
    for p in parsed:
        geobox = p[asset].geobox
        if geobox is None:
            raise InputError(
                f"item {p.id}: asset {asset!r} has no grid (proj:shape, proj:transform); "
                "give the items the projection extension"
            )
        boxes.append(geobox)
    first = boxes[0]
    t = first.affine
    crs = str(first.crs)
    try:
        CRS.from_user_input(crs)
    except CRSError as exc:
        raise InputError(
            f"item {parsed[0].id}: its CRS {crs!r} is unknown to this GDAL/PROJ ({exc}); give "
            "the items proj:wkt2 or a code PROJ knows"
        ) from None
    x0, y0, x1, y1 = first.extent.to_crs(first.crs).boundingbox
    for box in boxes[1:]:
        left, b, r, top = box.extent.to_crs(first.crs).boundingbox
        x0, y0, x1, y1 = min(x0, left), min(y0, b), max(x1, r), max(y1, top)
    # Snap the union outwards onto the first item's lattice.
    c0 = math.floor((x0 - t.c) / t.a + 1e-9)
    c1 = math.ceil((x1 - t.c) / t.a - 1e-9)
    r0 = math.floor((y1 - t.f) / t.e + 1e-9)
    r1 = math.ceil((y0 - t.f) / t.e - 1e-9)
    origin = (t.a, t.b, t.c + c0 * t.a, t.d, t.e, t.f + r0 * t.e)
    return crs, origin, c1 - c0, r1 - r0


def _signature(items: Sequence[Any], rule: QualityRule | None, quality: str | None) -> str:
    """Identity of an acquisition's data: item ids and times, local assets' sizes and times."""
    parts: list[Any] = [quality, None if rule is None else rule.__dict__]
    for item in items:
        parts.append([item.id, item.properties.get("updated"), item.properties.get("datetime")])
        for key, asset in sorted(item.assets.items()):
            href = asset.get_absolute_href() or asset.href
            path = Path(href) if "://" not in href else None
            stat = path.stat() if path is not None and path.exists() else None
            parts.append([key, href, None if stat is None else [stat.st_size, stat.st_mtime_ns]])
    return hashlib.blake2b(json.dumps(parts, default=str).encode(), digest_size=12).hexdigest()


def _dtype_max(md: Any, assets: Iterable[str], item: Any) -> tuple[float, float | None]:
    """The largest value the bands' data type holds, and their common no-data value: from
    ``raster:bands``, else from the first item's files themselves."""
    maxima, nodata = set(), set()
    for key in assets:
        band = md.bands[(key, 1)]
        kind, missing = band.data_type, band.nodata
        fields = item.assets[key].extra_fields
        if not (fields.get("raster:bands") or fields.get("data_type")):
            # Undeclared (odc-stac then assumes float32): the file's own header says.
            kind, missing = _file_dtype(item, key)
        dtype = np.dtype(kind)
        maxima.add(float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0)
        nodata.add(None if missing is None else float(missing))
    if len(nodata) > 1:
        raise InputError(
            f"inputs.bands: the bands declare different no-data values {sorted(map(str, nodata))}; "
            "choose bands of one product"
        )
    return max(maxima), nodata.pop()


def _file_dtype(item: Any, key: str) -> tuple[str, float | None]:
    """The data type and no-data value of an item's asset, read from its file's header."""
    import rasterio
    from rasterio.errors import RasterioIOError

    href = item.assets[key].get_absolute_href() or item.assets[key].href
    try:
        with rasterio.open(href) as src:
            return src.dtypes[0], src.nodata
    except RasterioIOError as exc:
        raise InputError(
            f"item {item.id}: asset {key!r} declares no raster:bands data_type and its file "
            f"cannot be read ({exc}); fix the asset's href or give the items raster:bands"
        ) from None


def discover_stac(inputs: Any) -> list[Acquisition]:
    """The acquisitions of an ``inputs.kind: stac`` section, in time order.

    Parameters
    ----------
    inputs
        A :class:`pipeline.config.StacInputs`.

    Returns
    -------
    list of Acquisition
        One per solar day, each holding its items (:class:`~pipeline.inputs.stac_source.
        StacSource`); ``sensor`` is ``"stac"``, ``georef`` ``"crs"``; the bands named as in
        ``inputs.bands``.

    Raises
    ------
    InputError
        No item, a band or quality asset an item lacks, an item without a grid.
    ConfigError
        An unknown quality rule.
    """
    from odc.stac import extract_collection_metadata, parse_item

    items = load_items(inputs)
    md = extract_collection_metadata(items[0])
    assets = _resolve(md, inputs.bands, "inputs.bands", items[0].id)
    quality, rule = None, None
    if inputs.quality is not None:
        quality = _resolve(md, [inputs.quality.asset], "inputs.quality.asset", items[0].id)[0]
        rule = quality_rule(inputs.quality)
    dtype_max, nodata = _dtype_max(md, assets, items[0])
    max_dn = float(inputs.max_dn) if inputs.max_dn is not None else dtype_max
    days: dict[Any, list[Any]] = defaultdict(list)
    for item in items:
        parsed = parse_item(item, md)
        for key in [*assets, *([quality] if quality else [])]:
            if key not in item.assets:
                raise InputError(
                    f"item {item.id}: no asset {key!r}; fix inputs.bands or inputs.quality"
                )
        # odc-stac's solar_date is a datetime (UTC + longitude/15 h): its date is the solar day,
        # as odc.stac.load(groupby="solar_day") groups. Tiles of one pass seconds apart, or
        # across a 15° line, are one date.
        days[parsed.solar_date.date()].append((item, parsed))
    acqs = []
    for members in days.values():
        members.sort(key=lambda m: (m[1].nominal_datetime, m[0].id))
        first = members[0][0]
        crs, transform, width, height = _grid_of([p for _, p in members], assets[0])
        source = StacSource(
            items=tuple(item.to_dict(transform_hrefs=True) for item, _ in members),
            assets=tuple(assets),
            quality=quality,
            rule=rule,
            crs=crs,
            transform=transform,  # type: ignore[arg-type]
            width=width,
            height=height,
            signature=_signature([i for i, _ in members], rule, quality),
        )
        acqs.append(
            Acquisition(
                id=first.id,
                path=Path(first.get_self_href() or first.id),
                time=members[0][1].nominal_datetime.astimezone(UTC),
                sensor="stac",
                bands=tuple(inputs.bands),
                max_dn=max_dn,
                georef="crs",
                nodata=nodata,
                integration_time=None,
                cloud_percent=first.properties.get("eo:cloud_cover"),
                footprint=None,
                dtype_max=dtype_max,
                stac=source,
            )
        )
    return sorted(acqs, key=lambda a: (a.time, a.id))


def quality_rule(quality: Any) -> QualityRule:
    """The :class:`QualityRule` of an ``inputs.quality`` section."""
    if quality.rule == "classes":
        if not (quality.cloud or quality.shadow or quality.nodata):
            raise ConfigError(
                "inputs.quality: rule 'classes' needs the values of cloud, shadow or nodata"
            )
        return QualityRule(
            "classes", False, tuple(quality.cloud), tuple(quality.shadow), tuple(quality.nodata)
        )
    return QUALITY_RULES[quality.rule]
