"""The files of one simulated GF-4 sensor image, as CRESDA delivers them.

``.tiff`` (uint16 with 10 valid bits, no CRS, no geotransform, nodata 0), ``.rpb`` (RPC00B),
``.xml`` (all 68 tags in CRESDA's order, times in Beijing time, sun and satellite elevations
under the ``…Zenith`` tags), ``.jpg`` and ``_thumb.jpg`` (docs/CONVENTIONS.md §7, checked
against real 2021–2025 metadata).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import rasterio
from rasterio.errors import NotGeoreferencedWarning

from pipeline.geom import footprint_centre
from pipeline.inputs.gf4_product import BEIJING
from pipeline.inputs.synthetic.rpc import SyntheticRpc

__all__ = ["INTEGRATION_MS", "MAX_DN", "write_sensor_image"]


def _write_jpegs(stem: Path, rgb01: np.ndarray) -> None:
    from PIL import Image

    img = Image.fromarray((np.clip(rgb01, 0, 1) * 255).round().astype(np.uint8))
    browse = img.copy()
    browse.thumbnail((1024, 1024))
    browse.save(f"{stem}.jpg", quality=85)
    img.thumbnail((128, 128))
    img.save(stem.parent / f"{stem.name}_thumb.jpg", quality=85)


#: The tags of real GF-4 L1A metadata, in CRESDA's order (68, checked on PMS and IRS XML of
#: 2021, 2022 and 2025 products). Tags given no value are written empty, as CRESDA writes
#: them: ``<X />``, or ``<X></X>`` for the two below.
_XML_TAGS = (
    "SatelliteID SensorID ReceiveTime OrbitID ProduceType SceneID ProductID ProductLevel "
    "ProductQuality ProductQualityReport ProductFormat ProduceTime Bands ScenePath SceneRow "
    "SatPath SatRow SceneCount SceneShift StartTime EndTime CenterTime ImageGSD WidthInPixels "
    "HeightInPixels WidthInMeters HeightInMeters CloudPercent QualityInfo PixelBits "
    "ValidPixelBits RollViewingAngle PitchViewingAngle RollSatelliteAngle PitchSatelliteAngle "
    "YawSatelliteAngle SolarAzimuth SolarZenith SatelliteAzimuth SatelliteZenith GainMode Gain "
    "Bias IntegrationTime IntegrationLevel MapProjection EarthEllipsoid ZoneNo ResamplingKernel "
    "HeightMode MtfCorrection RelativeCorrectionData TopLeftLatitude TopLeftLongitude "
    "TopRightLatitude TopRightLongitude BottomRightLatitude BottomRightLongitude "
    "BottomLeftLatitude BottomLeftLongitude TopLeftMapX TopLeftMapY TopRightMapX TopRightMapY "
    "BottomRightMapX BottomRightMapY BottomLeftMapX BottomLeftMapY"
).split()
_EMPTY_PAIR = ("QualityInfo", "RelativeCorrectionData")
#: Values that real products carry unchanged from year to year: ``ValidPixelBits`` 10 in a
#: 16-bit file, the XML's ``Gain``/``Bias`` (not CRESDA's radiance coefficients, see
#: pipeline.inputs.radiometry) and the integration times in milliseconds.
_VALID_BITS = 10
MAX_DN = 2**_VALID_BITS - 1
_XML_GAIN = {"PMS": "6.86400,4.59800,5.22300,6.37500,8.68100", "IRS": "280.59"}
_XML_BIAS = {"PMS": "2.98600,4.14000,1.43900,3.60500,0.33100", "IRS": "873.21"}
INTEGRATION_MS = {"PMS": (6.0, 30.0, 20.0, 30.0, 30.0), "IRS": (15.0,)}
#: GF-4's geostationary slot, for the satellite view angles of the simulated metadata.
_GF4_LONGITUDE = 105.6


def _xml_text(tags: dict[str, str]) -> str:
    lines = []
    for tag in _XML_TAGS:
        value = tags.get(tag, "")
        if value:
            lines.append(f"    <{tag}>{value}</{tag}>")
        elif tag in _EMPTY_PAIR:
            lines.append(f"    <{tag}></{tag}>")
        else:
            lines.append(f"    <{tag} />")
    body = "\n".join(lines)
    return (
        f'<?xml version="1.0" encoding="UTF-8" ?>\n<ProductMetaData>\n{body}\n</ProductMetaData>\n'
    )


def _satellite_view(lon: float, lat: float) -> tuple[float, float]:
    """(elevation, azimuth) in degrees of GF-4 seen from (lon, lat): geostationary at 105.6° E."""
    r_earth, r_geo = 6378.137, 42164.0
    lam, phi = np.radians(lon), np.radians(lat)
    ground = r_earth * np.array([np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)])
    sat_lam = np.radians(_GF4_LONGITUDE)
    d = r_geo * np.array([np.cos(sat_lam), np.sin(sat_lam), 0.0]) - ground
    east = np.array([-np.sin(lam), np.cos(lam), 0.0])
    north = np.array([-np.sin(phi) * np.cos(lam), -np.sin(phi) * np.sin(lam), np.cos(phi)])
    up = ground / r_earth
    elevation = np.degrees(np.arcsin(d @ up / np.linalg.norm(d)))
    azimuth = np.degrees(np.arctan2(d @ east, d @ north)) % 360.0
    return float(elevation), float(azimuth)


def write_sensor_image(
    directory: Path,
    stem: str,
    sensor: str,
    dn: np.ndarray,
    rpc: SyntheticRpc,
    time: datetime,
    gsd: float,
    integration: Sequence[float],
    cloud_percent: float,
    product_id: str,
) -> None:
    """Write the ``.tiff``, ``.rpb``, ``.xml``, ``.jpg`` and ``_thumb.jpg`` of one sensor image.

    Parameters
    ----------
    directory
        The product directory.
    stem
        The files' name without extension (``GF4_PMS_E116.4_N39.9_20200601_L1A…``).
    sensor
        ``"PMS"`` or ``"IRS"``: the XML's ``Gain`` and ``Bias``.
    dn
        uint16 DN of shape (bands, height, width), 0 where there is no ground.
    rpc
        The frame's RPC, written as the ``.rpb`` and giving the footprint's corners.
    time
        Acquisition time, aware UTC; the XML writes it in Beijing time as CRESDA does.
    gsd
        ``ImageGSD`` in metres.
    integration
        ``IntegrationTime`` per band, in milliseconds.
    cloud_percent
        ``CloudPercent``.
    product_id
        ``L1A`` and 10 digits, as in the product's name.
    """
    height, width = dn.shape[1:]
    base = directory / stem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(
            Path(f"{base}.tiff"),
            "w",
            driver="GTiff",
            width=width,
            height=height,
            count=dn.shape[0],
            dtype="uint16",
            nodata=0,
        ) as dst:
            dst.write(dn)
    Path(f"{base}.rpb").write_text(rpc.rpb_text())
    # Outer corners of the frame (RPC coordinates are pixel centres).
    corner_rc = {
        "TopLeft": (-0.5, -0.5),
        "TopRight": (-0.5, width - 0.5),
        "BottomRight": (height - 0.5, width - 0.5),
        "BottomLeft": (height - 0.5, -0.5),
    }
    local = time.astimezone(BEIJING).strftime("%Y-%m-%d %H:%M:%S")
    tags = {
        "SatelliteID": "GF4",
        "SensorID": "PMI",  # the camera: real PMS and IRS XML both say PMI
        "ReceiveTime": local,
        "ProductID": str(int(product_id[3:])),  # not zero-padded, unlike the file name
        "ProductLevel": "LEVEL1A",
        "ProductFormat": "GEOTIFF",
        "Bands": ",".join(str(i + 1) for i in range(dn.shape[0])),
        "StartTime": local,
        "EndTime": local,
        "CenterTime": local,
        "ImageGSD": f"{gsd:g}",
        "WidthInPixels": str(width),
        "HeightInPixels": str(height),
        "CloudPercent": f"{round(cloud_percent)}",
        "PixelBits": "16",
        "ValidPixelBits": str(_VALID_BITS),
        "Gain": _XML_GAIN[sensor],
        "Bias": _XML_BIAS[sensor],
        "IntegrationTime": ",".join(f"{t:g}" for t in integration),
    }
    corners = []
    for corner, (r, c) in corner_rc.items():
        lon, lat = rpc.ground(np.array([r]), np.array([c]))
        tags[f"{corner}Latitude"] = f"{lat[0]:.6f}"
        tags[f"{corner}Longitude"] = f"{lon[0]:.6f}"
        corners.append((float(lon[0]), float(lat[0])))
    from pipeline.inputs.radiometry import sun_position

    centre = footprint_centre(corners)
    sun_elevation, sun_azimuth = sun_position(time, *centre)
    sat_elevation, sat_azimuth = _satellite_view(*centre)
    # GF-4 writes elevations under the *Zenith tags (checked against the sun position).
    tags.update(
        SolarAzimuth=f"{sun_azimuth:.4f}",
        SolarZenith=f"{sun_elevation:.4f}",
        SatelliteAzimuth=f"{sat_azimuth:.4f}",
        SatelliteZenith=f"{sat_elevation:.4f}",
    )
    Path(f"{base}.xml").write_text(_xml_text(tags))
    rgb = dn[[3, 2, 1]] if dn.shape[0] >= 4 else np.repeat(dn[:1], 3, axis=0)
    _write_jpegs(base, np.moveaxis(rgb / MAX_DN, 0, -1))
