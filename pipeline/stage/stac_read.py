"""Read one grid window of one STAC acquisition with odc-stac, and its provider quality.

:func:`odc.stac.load` is given the window's own grid (a :class:`odc.geo.geobox.GeoBox`), so it
reads only what the window needs from each item's assets, in the asset's CRS and grid: where the
grid is the asset's lattice it copies the pixels (tested bit for bit), elsewhere it resamples
(``resampling``; the quality band always by nearest neighbour: its values are classes or bits).
The tiles of one overpass are fused into one date (``groupby="solar_day"``). Where no item of
the acquisition covers a pixel, odc-stac fills the bands' declared no-data value; bands that
declare none are filled with 0, a valid DN, so then the items' footprints are rasterised onto
the window (pixel centres inside) and the rest is no data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rasterio.crs import CRS
from rasterio.windows import Window

from pipeline.errors import InputError
from pipeline.grid.target import TargetGrid
from pipeline.inputs import Acquisition
from pipeline.inputs.stac_source import PROVIDER_NODATA, provider_codes
from pipeline.stage.values import scaled_values

__all__ = ["read_stac_window"]


def _covered(items: list[Any], geobox: Any) -> np.ndarray:
    """Pixels of ``geobox`` whose centre lies inside some item's grid."""
    from odc.stac import parse_item
    from rasterio.features import geometry_mask

    shapes = []
    for item in items:
        grids = [getattr(b, "geobox", None) for b in parse_item(item).bands.values()]
        grid = next((g for g in grids if g is not None), None)
        if grid is not None:
            shapes.append(grid.extent.to_crs(geobox.crs).geom)
    return ~geometry_mask(
        shapes, out_shape=geobox.shape, transform=geobox.affine, all_touched=False
    )


def read_stac_window(
    acq: Acquisition,
    grid: TargetGrid,
    window: Window,
    *,
    resampling: str = "bilinear",
    out: np.ndarray,
) -> np.ndarray:
    """Fill ``out`` with one grid window of a STAC acquisition, scaled; return what is seen.

    Parameters
    ----------
    acq
        A STAC acquisition (``acq.stac`` set).
    grid, window
        The region of the target grid to fill.
    resampling
        odc-stac's resampling for the bands where the grid is not their own.
    out
        float32 (bands, window.height, window.width): DN / ``acq.max_dn``, NaN where not
        observed and where the provider calls the entry cloud, shadow or no data.

    Returns
    -------
    numpy.ndarray
        uint8 (window.height, window.width): 0 not observed, 1 observed, and where a quality
        asset is read, :data:`~pipeline.inputs.stac_source.PROVIDER_CLOUD` or
        :data:`~pipeline.inputs.stac_source.PROVIDER_SHADOW` where the provider flags an
        observed pixel (its values are NaN in ``out``).

    Raises
    ------
    InputError
        An asset cannot be read, or holds DN above ``acq.max_dn``.
    """
    import odc.stac
    import pystac
    from odc.geo.geobox import GeoBox

    source = acq.stac
    assert source is not None
    # The grid's CRS as WKT: rasterio (its own PROJ database) may name an EPSG code that
    # pyproj, which odc-geo uses, does not know yet (CBERS's Albers is EPSG:10857 since 2024).
    crs_wkt = CRS.from_user_input(grid.crs).to_wkt()
    geobox = GeoBox((int(window.height), int(window.width)), grid.window_transform(window), crs_wkt)
    items = [pystac.Item.from_dict(dict(i)) for i in source.items]
    names = list(source.assets) + ([source.quality] if source.quality else [])
    methods = {key: resampling for key in source.assets}
    if source.quality:
        methods[source.quality] = "nearest"
    try:
        loaded = odc.stac.load(
            items, bands=names, geobox=geobox, groupby="solar_day", resampling=methods
        )
    except Exception as exc:  # rasterio, network and odc-stac errors alike: the user's asset
        raise InputError(
            f"{acq.id}: cannot read its STAC assets ({type(exc).__name__}: {exc}); check the "
            "item's asset hrefs or remove it from the catalog"
        ) from None
    data = np.stack([loaded[key].values[0] for key in source.assets])
    out.fill(np.nan)
    scaled = scaled_values(data, acq, range(1, len(source.assets) + 1))
    if scaled is not None:
        out[:] = scaled
        if acq.nodata is None:  # odc-stac fills what no item covers with 0, a valid DN then
            out[:, ~_covered(items, geobox)] = np.nan
    seen = np.isfinite(out).all(axis=0).astype(np.uint8)
    if source.rule is not None and source.quality is not None:
        codes = provider_codes(loaded[source.quality].values[0], source.rule)
        flagged = (seen == 1) & (codes != 1)
        seen[flagged] = np.where(codes[flagged] == PROVIDER_NODATA, 0, codes[flagged])
        out[:, flagged] = np.nan
    return seen
