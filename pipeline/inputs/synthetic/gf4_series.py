"""A simulated series of GF-4-like L1A products over a simulated cloud-free ground.

Each date is an L1A frame: a uint16 image without CRS or geotransform whose ``.rpb`` RPC maps
ground to image. Each date's RPC is shifted by a few pixels (as separately pointed GF-4 frames
are), so stacking the raw files misaligns, and only warping every date through its own RPC onto
a common grid puts the ground back in place.
"""

from __future__ import annotations

import tarfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from affine import Affine

from pipeline.errors import ConfigError
from pipeline.geom import METRES_PER_DEGREE
from pipeline.inputs.gf4_product import BEIJING
from pipeline.inputs.synthetic.gf4_files import INTEGRATION_MS, MAX_DN, write_sensor_image
from pipeline.inputs.synthetic.ground import (
    SimulatedProducts,
    cloud_fields,
    load_demo_truth,
    to_dn,
    truth_bands,
    write_truth,
)
from pipeline.inputs.synthetic.rpc import make_rpc
from pipeline.inputs.synthetic.sampling import observe

__all__ = ["make_gf4_series"]

#: The first acquisition: 07:12 Beijing time, i.e. 23:12 UTC of the day before, so a simulated
#: morning crosses a UTC date line as real GF-4 mornings over China do.
_BASE_TIME = datetime(2020, 5, 31, 23, 12, 0, tzinfo=UTC)
#: GF-4 stares: a morning holds many acquisitions. Simulated ones are this far apart (plus up
#: to 10 minutes); the PMI product's IRS image is taken 45 s after its PMS image.
_ACQUISITION_STEP = timedelta(minutes=35)
_IRS_DELAY = timedelta(seconds=45)


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
    write_truth(truth_path, truth, transform, "EPSG:4326")

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
    clouds = {s: cloud_fields(_frame(s, sensor, size), n_dates, cloud_style, rng) for s in sensors}
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
            ground = observe(truth, transform, rpc, frame[0], bands)
            c = clouds[s][k]
            write_sensor_image(
                product_dir,
                f"GF4_{s}_{location}_{day}_{product_id}",
                s,
                # One band at a time: a full-size frame's 5 bands in float64 are 4 GB each copy.
                np.stack([to_dn(c + (1.0 - c) * g, MAX_DN) for g in ground]),
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
