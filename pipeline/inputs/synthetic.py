"""Simulated GF-4-like products and GeoTIFF series, for tests and the demo.

The cloud-free ground (the *truth*) is the bundled tyrol-w1 RGB image laid on a lon/lat grid.
Each date of a GF-4-like series is an L1A frame: a uint16 image without CRS or geotransform
whose ``.rpb`` RPC maps ground to image. Each date's RPC is shifted by a few pixels (as
separately pointed GF-4 frames are), so stacking the raw files misaligns, and only warping every
date through its own RPC onto a common grid puts the ground back in place. Clouds come from
:func:`cloudcore.simulate.cloud_series` and are mixed as ``I_t = C_t + (1 - C_t)·I``
(docs/CONVENTIONS.md §4); DN = round(I_t · max DN).
"""

from __future__ import annotations

import importlib.resources
import tarfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.errors import NotGeoreferencedWarning
from scipy.ndimage import map_coordinates
from skimage.transform import resize

from pipeline.errors import ConfigError
from pipeline.geom import METRES_PER_DEGREE, footprint_centre
from pipeline.inputs.gf4_product import BEIJING
from pipeline.inputs.synthetic_rpc import SyntheticRpc, make_rpc

__all__ = [
    "SimulatedProducts",
    "load_demo_truth",
    "make_geotiff_series",
    "make_gf4_series",
    "truth_bands",
    "write_scene",
]

# MATLAB rgb2gray weights (docs/CONVENTIONS.md §4).
_GREY = np.array([0.2989, 0.5870, 0.1140])
_PMS_BANDS = ("B1", "B2", "B3", "B4", "B5")
#: The first acquisition: 07:12 Beijing time, i.e. 23:12 UTC of the day before, so a simulated
#: morning crosses a UTC date line as real GF-4 mornings over China do.
_BASE_TIME = datetime(2020, 5, 31, 23, 12, 0, tzinfo=UTC)
#: GF-4 stares: a morning holds many acquisitions. Simulated ones are this far apart (plus up
#: to 10 minutes); the PMI product's IRS image is taken 45 s after its PMS image.
_ACQUISITION_STEP = timedelta(minutes=35)
_IRS_DELAY = timedelta(seconds=45)


@dataclass(frozen=True)
class SimulatedProducts:
    """What a simulation wrote.

    Attributes
    ----------
    paths
        Product directories, or ``.tar.gz`` archives when ``archive=True`` (GF-4); GeoTIFF files
        (GeoTIFF series). In time order.
    truth_path
        Georeferenced float32 GeoTIFF, 5 bands (B1 pan, B2 blue, B3 green, B4 red, B5 NIR) in
        [0, 1]: the cloud-free ground.
    times
        Acquisition time of each path.
    """

    paths: list[Path]
    truth_path: Path
    times: list[datetime]


def load_demo_truth() -> np.ndarray:
    """The bundled cloud-free demo image.

    Returns
    -------
    numpy.ndarray
        ``tyrol-w1_1k_rgb.tif``: uint8 of shape (1000, 1000, 3), channel-last RGB.
    """
    ref = importlib.resources.files("pipeline") / "data" / "tyrol-w1_1k_rgb.tif"
    with importlib.resources.as_file(ref) as path, warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            return np.moveaxis(src.read(), 0, -1)


def truth_bands(rgb: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """Five GF-4 PMS-like bands in [0, 1] from an RGB image, resized.

    B1 (pan) is MATLAB's rgb2gray of the RGB; B2, B3, B4 are blue, green, red. B5 (NIR) is a
    synthetic mix ``clip(0.1 + 0.8·G + 1.5·max(G − R, 0) − 0.2·B, 0, 1)``: vegetation (green
    above red) comes out bright as in a real near-infrared band, water and shadow dark.

    Parameters
    ----------
    rgb
        (h, w, 3) uint8 (scaled by 255) or float in [0, 1].
    size
        Output size, square or (height, width).

    Returns
    -------
    numpy.ndarray
        float32 of shape (5, height, width).
    """
    shape = (size, size) if isinstance(size, int) else tuple(size)
    img = np.asarray(rgb, dtype=np.float64)
    if np.issubdtype(np.asarray(rgb).dtype, np.integer):
        img = img / 255.0
    if img.ndim != 3 or img.shape[2] < 3:
        raise ConfigError(f"truth_rgb: expected an (h, w, 3) RGB array, got shape {img.shape}")
    img = resize(img[..., :3], shape, order=1, anti_aliasing=True, preserve_range=True)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    pan = img @ _GREY
    nir = np.clip(0.1 + 0.8 * g + 1.5 * np.maximum(g - r, 0.0) - 0.2 * b, 0.0, 1.0)
    return np.clip(np.stack([pan, b, g, r, nir]), 0.0, 1.0).astype(np.float32)


def _clouds(shape: tuple[int, int], n: int, style: str, rng: np.random.Generator) -> np.ndarray:
    if style == "none":
        return np.zeros((n, *shape), dtype=np.float64)
    if style not in ("reference", "perlin", "moving"):
        raise ConfigError(
            f"cloud_style: {style!r} is not one of 'reference', 'perlin', 'moving', 'none'"
        )
    from cloudcore.simulate import cloud_series

    fields = cloud_series(shape, n, style=style, rng=rng)  # type: ignore[arg-type]
    return np.clip(np.asarray(fields, dtype=np.float64), 0.0, 1.0)


def _write_truth(path: Path, bands: np.ndarray, transform: Affine, crs: str) -> None:
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=bands.shape[2],
        height=bands.shape[1],
        count=5,
        dtype="float32",
        crs=crs,
        transform=transform,
        compress="deflate",
    ) as dst:
        dst.write(bands.astype(np.float32))
        dst.descriptions = _PMS_BANDS


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
_MAX_DN = 2**_VALID_BITS - 1
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


def _write_sensor_image(
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
    """The ``.tiff``, ``.rpb``, ``.xml``, ``.jpg`` and ``_thumb.jpg`` of one sensor image.

    ``time`` is aware UTC; the XML writes it in Beijing time as CRESDA does.
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
    _write_jpegs(base, np.moveaxis(rgb / _MAX_DN, 0, -1))


def _lonlat_grid(center: tuple[float, float], gsd: float, n: int) -> Affine:
    """North-up EPSG:4326 transform of an n×n ground grid of about ``gsd`` metres."""
    lon0, lat0 = center
    dlat = gsd / METRES_PER_DEGREE
    dlon = dlat / np.cos(np.radians(lat0))
    return Affine(dlon, 0.0, lon0 - n / 2 * dlon, 0.0, -dlat, lat0 + n / 2 * dlat)


def _integration(integration_time: float | Sequence[float], n_bands: int) -> list[float]:
    """Integration time per band, from one value for all or one per band."""
    if isinstance(integration_time, (int, float)):
        return [float(integration_time)] * n_bands
    times = [float(t) for t in integration_time]
    if len(times) != n_bands:
        raise ConfigError(f"integration_time: {len(times)} values for {n_bands} bands")
    return times


#: Frames larger than this are simulated in row blocks, with the image → ground mapping solved
#: on a lattice every ``_GROUND_STEP`` pixels and interpolated in between (the mapping is smooth:
#: ~1e-4 px off). Solving it at every pixel of a 10240² frame needed ~20 arrays of 800 MB and
#: most of an hour; smaller frames keep the exact per-pixel solution.
_EXACT_GROUND_MAX = 2048
_GROUND_STEP = 8


def _ground_rows(rpc: SyntheticRpc, size: int, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """lon, lat of the pixel centres of image rows ``r0:r1`` (all columns)."""
    rows, cols = np.mgrid[r0:r1, 0:size].astype(float)
    if size <= _EXACT_GROUND_MAX:
        return rpc.ground(rows, cols)
    nodes = np.arange(0, size + _GROUND_STEP, _GROUND_STEP, dtype=float)
    first = r0 // _GROUND_STEP
    node_rows = nodes[first : (r1 - 1) // _GROUND_STEP + 2]
    lon_n, lat_n = rpc.ground(*np.meshgrid(node_rows, nodes, indexing="ij"))
    at = np.stack([rows / _GROUND_STEP - first, cols / _GROUND_STEP])
    return (
        map_coordinates(lon_n, at, order=1, mode="nearest"),
        map_coordinates(lat_n, at, order=1, mode="nearest"),
    )


def _observe(
    truth: np.ndarray, transform: Affine, rpc: SyntheticRpc, size: int, band_idx: Sequence[int]
) -> np.ndarray:
    """Sample the ground through the RPC at every image pixel centre (bilinear)."""
    out = np.empty((len(band_idx), size, size))
    block = size if size <= _EXACT_GROUND_MAX else 1024
    inv = ~transform
    h, w = truth.shape[1:]
    for r0 in range(0, size, block):
        r1 = min(r0 + block, size)
        lon, lat = _ground_rows(rpc, size, r0, r1)
        gc, gr = inv @ (lon, lat)
        # Ground pixel centres sit at integer + 0.5 in transform space.
        coords = np.stack([gr - 0.5, gc - 0.5])
        # Image pixels that look beyond the simulated ground get the L1A fill value (NaN here,
        # DN 0 on disk) rather than replicated edge pixels: test data must not invent ground.
        outside = (
            (coords[0] < -0.5) | (coords[0] > h - 0.5) | (coords[1] < -0.5) | (coords[1] > w - 0.5)
        )
        for k, b in enumerate(band_idx):
            sampled = map_coordinates(truth[b], coords, order=1, mode="nearest")
            out[k, r0:r1] = np.where(outside, np.nan, sampled)
    return out


def _dn(obs: np.ndarray, max_dn: int) -> np.ndarray:
    # DN 0 is the L1A fill value: keep every valid pixel at 1 or above, NaN (no ground) at 0.
    dn = np.clip(np.round(np.nan_to_num(obs, nan=0.0) * max_dn), 1, max_dn)
    return np.where(np.isfinite(obs), dn, 0).astype(np.uint16)


def make_gf4_series(
    out_dir: Path,
    *,
    n_dates: int = 7,
    size: int = 512,
    seed: int = 0,
    sensor: str = "PMI",
    cloud_style: str = "moving",
    shift_px: float = 3.0,
    archive: bool = False,
    truth_rgb: np.ndarray | None = None,
    center_lonlat: tuple[float, float] = (116.4, 39.9),
    gsd: float = 50.0,
    integration_time: float | Sequence[float] | None = None,
    start: datetime = _BASE_TIME,
    step: timedelta = _ACQUISITION_STEP,
) -> SimulatedProducts:
    """Write a series of GF-4-like L1A products over a simulated cloud-free ground.

    Products are laid out as CRESDA delivers them (docs/CONVENTIONS.md §7, checked against
    real 2021–2025 metadata): ``GF4_PMI_E{lon}_N{lat}_{YYYYMMDD}_L1A{10 digits}/`` holds, for
    PMS and IRS side by side, the ``.tiff`` (uint16 with 10 valid bits, no CRS, no
    geotransform, nodata 0), ``.rpb`` (RPC00B, ``satId = "XXX"``), ``.xml`` (all 68 tags in
    CRESDA's order, ``SensorID`` PMI, times in Beijing time, sun and satellite elevations under
    the ``…Zenith`` tags), ``.jpg`` and ``_thumb.jpg``. The date in the name is the Beijing
    date. Acquisitions are ``step`` apart (35 minutes by default: several a morning, the
    first before 08:00 Beijing time, i.e. on the previous UTC day). Each date's RPC is
    displaced by up to ``shift_px`` pixels in rows and columns (different per date,
    deterministic from ``seed``), so the frames' footprints differ and the raw arrays do not
    align.

    Parameters
    ----------
    out_dir
        Created if needed.
    n_dates
        Number of dates (one per day, at about 03:00).
    size
        Frame size in pixels (square). The truth covers a slightly larger ground area.
    seed
        Seeds shifts, times and clouds.
    sensor
        ``"PMI"`` (default: both sensors in one product, the IRS frame size/8 pixels at
        8×gsd), or ``"PMS"`` (5 bands) or ``"IRS"`` (1 band IRS1; the pan truth stands in for
        the mid-infrared signal) alone. DN go up to 1023 (ValidPixelBits 10).
    cloud_style
        ``"reference"``, ``"perlin"`` or ``"moving"`` (:func:`cloudcore.simulate.cloud_series`),
        or ``"none"`` for cloud-free frames.
    shift_px
        Largest per-date RPC displacement in pixels.
    archive
        Write ``.tar.gz`` archives instead of directories.
    truth_rgb
        (h, w, 3) RGB image to use instead of the bundled tyrol-w1 image.
    center_lonlat
        Scene centre.
    gsd
        Ground sampling distance in metres (``ImageGSD``).
    integration_time
        Integration time in milliseconds, one value for all bands or one per band; default
        the real products' ``6,30,20,30,30`` (PMS) and ``15`` (IRS).
    start
        Time (aware) of the first acquisition; default 2020-05-31 23:12 UTC (07:12 Beijing).
    step
        Time between acquisitions (plus up to 10 minutes of jitter).

    Returns
    -------
    SimulatedProducts
        Paths in time order, ``times`` their PMS acquisition times (aware UTC); ``truth_path``
        is the float32 5-band ground in EPSG:4326.
    """
    sensor = sensor.upper()
    if sensor not in ("PMS", "IRS", "PMI"):
        raise ConfigError(f"sensor: {sensor!r} is not one of PMS, IRS, PMI")
    if n_dates < 1 or size < 16:
        raise ConfigError(f"n_dates={n_dates}, size={size}: need n_dates >= 1 and size >= 16")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    # The ground extends beyond the frames by more than any shift, rotation and distortion.
    margin = int(np.ceil(shift_px + 0.03 * size + 8))
    n_ground = size + 2 * margin
    truth = truth_bands(load_demo_truth() if truth_rgb is None else truth_rgb, n_ground)
    transform = _lonlat_grid(center_lonlat, gsd, n_ground)
    truth_path = out_dir / "truth.tif"
    _write_truth(truth_path, truth, transform, "EPSG:4326")

    lon0, lat0 = center_lonlat
    shifts = rng.uniform(-shift_px, shift_px, size=(n_dates, 2))
    angles = np.radians(8.0 + rng.uniform(-0.3, 0.3, size=n_dates))
    jitter = rng.integers(0, 600, size=n_dates)
    times = [start + k * step + timedelta(seconds=int(jitter[k])) for k in range(n_dates)]
    sensors = ("PMS", "IRS") if sensor == "PMI" else (sensor,)
    # Checked before any frame is simulated or written.
    integration = {
        s: _integration(
            INTEGRATION_MS[s] if integration_time is None else integration_time,
            5 if s == "PMS" else 1,
        )
        for s in sensors
    }
    clouds = {s: _clouds(_frame(s, sensor, size), n_dates, cloud_style, rng) for s in sensors}
    ew, ns = ("E" if lon0 >= 0 else "W"), ("N" if lat0 >= 0 else "S")
    paths: list[Path] = []
    for k, time in enumerate(times):
        product_id = f"L1A{seed * 1000 + k + 1:010d}"
        location = f"E{abs(lon0):.1f}_N{abs(lat0):.1f}".replace("E", ew, 1).replace("N", ns, 1)
        day = time.astimezone(BEIJING).strftime("%Y%m%d")
        name = f"GF4_{sensor}_{location}_{day}_{product_id}"
        product_dir = out_dir / name
        product_dir.mkdir(exist_ok=True)
        for s in sensors:
            frame = _frame(s, sensor, size)
            s_gsd = gsd * size / frame[0]
            rpc = make_rpc(
                frame[0],
                s_gsd,
                lon0,
                lat0,
                tuple(shifts[k] * frame[0] / size),
                float(angles[k]),
                sensor=s,
            )
            bands = range(5) if s == "PMS" else (0,)
            ground = _observe(truth, transform, rpc, frame[0], bands)
            c = clouds[s][k]
            _write_sensor_image(
                product_dir,
                f"GF4_{s}_{location}_{day}_{product_id}",
                s,
                # One band at a time: a full-size frame's 5 bands in float64 are 4 GB each copy.
                np.stack([_dn(c + (1.0 - c) * g, _MAX_DN) for g in ground]),
                rpc,
                time + (_IRS_DELAY if s == "IRS" and sensor == "PMI" else timedelta(0)),
                s_gsd,
                integration[s],
                100.0 * float((c > 0.2).mean()),
                product_id,
            )
        if archive:
            tar_path = out_dir / f"{name}.tar.gz"
            with tarfile.open(tar_path, "w:gz", compresslevel=1) as tar:
                for f in sorted(product_dir.iterdir()):
                    tar.add(f, arcname=f.name)
            for f in product_dir.iterdir():
                f.unlink()
            product_dir.rmdir()
            paths.append(tar_path)
        else:
            paths.append(product_dir)
    return SimulatedProducts(paths=paths, truth_path=truth_path, times=times)


def _frame(s: str, requested: str, size: int) -> tuple[int, int]:
    # In a PMI product the IRS frame covers the same ground at 8× coarser pixels.
    if s == "IRS" and requested == "PMI":
        n = max(16, size // 8)
        return (n, n)
    return (size, size)


def make_geotiff_series(
    out_dir: Path,
    *,
    n_dates: int = 7,
    size: int = 256,
    seed: int = 0,
    crs: str = "EPSG:32650",
    cloud_style: str = "moving",
    truth_rgb: np.ndarray | None = None,
    origin: tuple[float, float] = (440_000.0, 4_420_000.0),
    resolution: float = 50.0,
    max_crop_px: int = 4,
) -> SimulatedProducts:
    """Write a series of georeferenced 5-band uint16 GeoTIFFs (one per date).

    Files are named ``scene_YYYYMMDD.tif`` (the default ``date_pattern`` finds the date), hold
    DN = round(I_t · 65535) with nodata 0 and share one pixel grid; each date is cropped by
    0…``max_crop_px`` pixels on every side, so their extents differ.

    Parameters
    ----------
    out_dir
        Created if needed.
    n_dates, size, seed
        Number of dates, truth size in pixels (square), random seed.
    crs
        CRS of the files and of the truth.
    cloud_style
        As in :func:`make_gf4_series`.
    truth_rgb
        RGB image to use instead of the bundled tyrol-w1 image.
    origin
        (left, top) of the truth in ``crs`` units.
    resolution
        Pixel size in ``crs`` units.
    max_crop_px
        Largest per-side crop of a date.

    Returns
    -------
    SimulatedProducts
        ``paths`` are the GeoTIFF files in time order; ``truth_path`` the float32 truth.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    truth = truth_bands(load_demo_truth() if truth_rgb is None else truth_rgb, size)
    transform = Affine(resolution, 0.0, origin[0], 0.0, -resolution, origin[1])
    truth_path = out_dir / "truth.tif"
    _write_truth(truth_path, truth, transform, crs)
    clouds = _clouds((size, size), n_dates, cloud_style, rng)
    crops = rng.integers(0, max_crop_px + 1, size=(n_dates, 4))
    # File names carry the date only, so the series times are midnights (UTC).
    times = [datetime(2020, 6, 1, tzinfo=UTC) + timedelta(days=k) for k in range(n_dates)]
    paths = []
    for k, time in enumerate(times):
        dn = _dn(clouds[k] + (1.0 - clouds[k]) * truth, 65535)
        top, left, bottom, right = (int(v) for v in crops[k])
        dn = dn[:, top : size - bottom, left : size - right]
        window = transform @ Affine.translation(left, top)
        paths.append(write_scene(out_dir, time, dn, crs, window, _PMS_BANDS))
    return SimulatedProducts(paths=paths, truth_path=truth_path, times=times)


def write_scene(
    folder: Path,
    day: date,
    dn: np.ndarray,
    crs: str,
    transform: Affine,
    descriptions: Sequence[str] | None = None,
) -> Path:
    """Write one date of a GeoTIFF series: ``folder/scene_YYYYMMDD.tif``.

    Parameters
    ----------
    folder
        Created if needed.
    day
        The date in the name (the default ``date_pattern`` finds it).
    dn
        uint16 DN, (bands, rows, cols) or (rows, cols); 0 is no-data.
    crs, transform
        Its georeferencing.
    descriptions
        Band names, or None.

    Returns
    -------
    Path
        The file written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    bands = dn.reshape(-1, *dn.shape[-2:])
    path = folder / f"scene_{day:%Y%m%d}.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=bands.shape[2],
        height=bands.shape[1],
        count=bands.shape[0],
        dtype="uint16",
        nodata=0,
        crs=crs,
        transform=transform,
    ) as dst:
        dst.write(bands.astype(np.uint16, copy=False))
        if descriptions is not None:
            dst.descriptions = tuple(descriptions)
    return path
