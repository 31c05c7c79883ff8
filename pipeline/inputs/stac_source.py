"""What a worker needs to read one STAC acquisition, and the providers' quality rules.

A STAC acquisition (:func:`pipeline.inputs.stac.discover_stac`) is one or more items of one
overpass: their JSON, the asset of each band, and optionally a quality asset whose values a
rule (:data:`QUALITY_RULES`) turns into what the provider calls cloud, shadow or no data. Kept
apart from the discovery so that a Dask worker unpickling an acquisition imports neither
pystac-client nor the configuration.

Quality rules, each from the provider's own definition:

* ``scl``: Sentinel-2 Level-2A Scene Classification (ESA, Sen2Cor Product Specification):
  0 no data and 1 saturated or defective are no data; 3 cloud shadows is shadow; 8 cloud
  medium probability, 9 cloud high probability and 10 thin cirrus are cloud. Snow (11) stays
  observed: it is ground, and the solver keeps what stays.
* ``landsat-c2``: Landsat Collection 2 ``QA_PIXEL`` bits (USGS Landsat 8-9 OLI/TIRS Collection 2
  Level-2 Science Product Guide, table 6-3; the same bits for TM and ETM+): bit 0 fill is no
  data; bit 1 dilated cloud, bit 2 cirrus and bit 3 cloud are cloud; bit 4 cloud shadow is
  shadow.
* ``fmask``: the Fmask product's codes (Zhu and Woodcock): 255 fill is no data, 2 shadow,
  4 cloud; 0 land, 1 water and 3 snow stay observed.
* ``classes``: the values named in ``inputs.quality.cloud``, ``.shadow`` and ``.nodata``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.store.layout import PROVIDER_CLOUD, PROVIDER_SHADOW

__all__ = [
    "PROVIDER_CLOUD",
    "PROVIDER_NODATA",
    "PROVIDER_SHADOW",
    "QUALITY_RULES",
    "QualityRule",
    "StacSource",
    "provider_codes",
]

#: The provider calls the entry no data: it is staged as not observed.
PROVIDER_NODATA = 255


@dataclass(frozen=True)
class QualityRule:
    """Which quality values mean cloud, shadow and no data.

    Attributes
    ----------
    name
        The rule's name (``scl``, ``landsat-c2``, ``fmask`` or ``classes``).
    bits
        True when the values are bit flags (a value is in a class when any of its bits is set),
        False when they are classes (a value is in a class when it equals one of them).
    cloud, shadow, nodata
        The class values, or the bit numbers.
    """

    name: str
    bits: bool
    cloud: tuple[int, ...]
    shadow: tuple[int, ...]
    nodata: tuple[int, ...]

    def _member(self, raw: np.ndarray, values: Sequence[int]) -> np.ndarray:
        if not values:
            return np.zeros(raw.shape, dtype=bool)
        if self.bits:
            flags = sum(1 << b for b in values)
            return (raw.astype(np.int64) & flags) != 0
        return np.isin(raw, values)


#: The providers' rules by name (their sources in the module's docstring).
QUALITY_RULES: dict[str, QualityRule] = {
    "scl": QualityRule("scl", False, cloud=(8, 9, 10), shadow=(3,), nodata=(0, 1)),
    "landsat-c2": QualityRule("landsat-c2", True, cloud=(1, 2, 3), shadow=(4,), nodata=(0,)),
    "fmask": QualityRule("fmask", False, cloud=(4,), shadow=(2,), nodata=(255,)),
}


def provider_codes(raw: np.ndarray, rule: QualityRule) -> np.ndarray:
    """What the provider says of each entry.

    Parameters
    ----------
    raw
        Quality values as read (any shape); NaN where the quality asset has no data.
    rule
        How to read them.

    Returns
    -------
    numpy.ndarray
        uint8 of the same shape: :data:`PROVIDER_NODATA` where the provider calls the entry no
        data (or the quality value is missing), else :data:`PROVIDER_CLOUD`, else
        :data:`PROVIDER_SHADOW`, else 1 (observed, clear to the provider). No data wins over
        cloud, cloud over shadow.
    """
    raw = np.asarray(raw)
    missing = ~np.isfinite(raw) if raw.dtype.kind == "f" else np.zeros(raw.shape, dtype=bool)
    values = np.where(missing, 0, raw).astype(np.int64)
    codes = np.ones(raw.shape, dtype=np.uint8)
    codes[rule._member(values, rule.shadow)] = PROVIDER_SHADOW
    codes[rule._member(values, rule.cloud)] = PROVIDER_CLOUD
    codes[rule._member(values, rule.nodata) | missing] = PROVIDER_NODATA
    return codes


@dataclass(frozen=True)
class StacSource:
    """The items of one STAC acquisition and how to read them.

    Attributes
    ----------
    items
        The items' JSON (one per tile of the overpass), as dictionaries.
    assets
        Per band of the acquisition, in order: the asset key holding it.
    quality
        The quality asset's key, or None.
    rule
        How to read the quality asset, or None.
    crs
        The acquisition's CRS (WKT or ``EPSG:n``): the first item's, that of its first band.
    transform
        Its north-up pixel grid (affine coefficients a, b, c, d, e, f), covering every item.
    width, height
        The grid's size in pixels.
    signature
        What identifies the data: the items' ids, their ``updated`` times or the assets' file
        sizes and times, and the quality rule; a changed item must not resume old tiles.
    """

    items: tuple[Mapping[str, object], ...]
    assets: tuple[str, ...]
    quality: str | None
    rule: QualityRule | None
    crs: str
    transform: tuple[float, float, float, float, float, float]
    width: int
    height: int
    signature: str
