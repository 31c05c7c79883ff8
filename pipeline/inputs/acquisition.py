"""One date of a series (:class:`Acquisition`), and the checks a whole series must pass.

An :class:`Acquisition` is everything the rest of the pipeline needs to read one date: the
raster file on disk (extracted if it came from an archive), its time, band names, how DN scale
to reflectance-like values (``DN / max_dn``) and how it is georeferenced.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pipeline.errors import InputError
from pipeline.inputs.stac_source import StacSource

__all__ = ["Acquisition", "check_series"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Acquisition:
    """One date of a series, ready to be read window by window.

    Attributes
    ----------
    id
        Product image id (the GF-4 image file stem) or the GeoTIFF file stem; stable across runs.
    path
        The raster file; for archives, the file inside the extraction directory.
    time
        Timezone-aware UTC: ``CenterTime`` of a GF-4 image (converted from Beijing time), or
        the given or parsed date of a GeoTIFF (taken as UTC).
    sensor
        ``"PMS"``, ``"IRS"`` or ``"geotiff"``.
    bands
        Band names in file order, e.g. ``("B1", "B2", "B3", "B4", "B5")``.
    max_dn
        Scaling: reflectance-like value = DN / max_dn (the declared maximum DN until
        :func:`pipeline.inputs.scaling.scaled_series` applies ``inputs.dn_rule``).
    georef
        ``"rpc"`` (L1A: RPCs only, no CRS) or ``"crs"`` (CRS and geotransform).
    nodata
        Source no-data DN, or None.
    integration_time
        Per-band integration time in milliseconds from the GF-4 metadata (DN of different
        settings are not comparable without calibration), or None.
    cloud_percent
        ``CloudPercent`` from the GF-4 metadata, or None.
    footprint
        GF-4 corner (lon, lat) pairs: top-left, top-right, bottom-right, bottom-left; or None.
    gsd
        ``ImageGSD`` in metres (GF-4), or None. Used by
        :func:`pipeline.grid.target.derive_grid` as the default resolution.
    dtype_max
        The largest value the file's data type holds (65535 for uint16).
    valid_bits
        ``ValidPixelBits`` of GF-4 metadata (or GDAL's ``NBITS``), or None.
    sun_elevation
        Sun elevation in degrees at the scene centre (GF-4 ``SolarZenith`` tag), or None.
    calibration
        ``"dn"``, ``"radiance"`` or ``"reflectance"`` (``inputs.calibration``).
    scale, offset
        Per-band value = DN·scale + offset, set by :mod:`pipeline.inputs.radiometry` when
        ``inputs.calibration`` is ``radiance`` or ``reflectance``; None means DN / max_dn.
    physical_scale
        Per band, physical quantity = value × physical_scale (radiance: the series' ``L_ref``
        in W m⁻² sr⁻¹ µm⁻¹); None means 1.
    stac
        The STAC items of the acquisition and how to read them (``inputs.kind: stac``; then
        ``path`` is the first item's JSON, for messages); None for files.
    """

    id: str
    path: Path
    time: datetime
    sensor: str
    bands: tuple[str, ...]
    max_dn: float
    georef: Literal["rpc", "crs"]
    nodata: float | None
    integration_time: tuple[float, ...] | None
    cloud_percent: float | None
    footprint: tuple[tuple[float, float], ...] | None
    gsd: float | None = None
    dtype_max: float = 65535.0
    valid_bits: int | None = None
    sun_elevation: float | None = None
    calibration: str = "dn"
    scale: tuple[float, ...] | None = None
    offset: tuple[float, ...] | None = None
    physical_scale: tuple[float, ...] | None = None
    stac: StacSource | None = None

    @property
    def listed_in(self) -> str:
        """The configuration key that lists this input, for messages that say what to change."""
        return "inputs.paths" if self.stac is None else "inputs.catalog or inputs.search"


def check_series(acquisitions: Sequence[Acquisition]) -> list[str]:
    """Check that acquisitions form one stackable series.

    Parameters
    ----------
    acquisitions
        The dates of one series, e.g. from :func:`discover_gf4`.

    Returns
    -------
    list of str
        Warnings the user should see: dates with different ``IntegrationTime`` (their DN are
        not comparable without calibration), or different ``max_dn`` scaling.

    Raises
    ------
    InputError
        Fewer than 2 dates, band lists that differ between dates, or two acquisitions with
        the same time.
    """
    acqs = list(acquisitions)
    key = acqs[0].listed_in if acqs else "inputs.paths"
    if len(acqs) < 2:
        which = f" ({acqs[0].path.name})" if acqs else ""
        raise InputError(
            f"{key}: found {len(acqs)} acquisition(s){which}; aATM needs at least 2 "
            f"dates — add products to {key}"
        )
    first = acqs[0]
    for a in acqs[1:]:
        if a.bands != first.bands:
            raise InputError(
                f"{a.path.name}: bands {','.join(a.bands)} differ from {first.path.name}'s "
                f"{','.join(first.bands)}; use one sensor per series or remove the file from "
                f"{key}"
            )
    by_time: dict[datetime, Acquisition] = {}
    for a in acqs:
        if a.time in by_time:
            raise InputError(
                f"{a.path.name}: same time {a.time.isoformat(sep=' ')} as "
                f"{by_time[a.time].path.name}; the product is listed twice — remove one from "
                f"{key}"
            )
        by_time[a.time] = a
    warns: list[str] = []
    settings = {a.integration_time for a in acqs if a.integration_time is not None}
    # Calibrated values (radiance, reflectance) are comparable whatever the setting.
    if len(settings) > 1 and all(a.scale is None for a in acqs):
        groups = ", ".join(
            f"{'/'.join(f'{t:g}' for t in s)} ms ({sum(a.integration_time == s for a in acqs)} "
            "dates)"
            for s in sorted(settings)
        )
        warns.append(
            f"IntegrationTime differs between dates ({groups}): their DN are not comparable "
            "without calibration — set inputs.calibration: radiance or reflectance, or select "
            "dates with one setting"
        )
    scales = sorted({a.max_dn for a in acqs})
    if len(scales) > 1:
        warns.append(
            f"max_dn differs between dates ({', '.join(f'{s:g}' for s in scales)}): values are "
            "scaled differently — set inputs.max_dn to use one scale"
        )
    return warns
