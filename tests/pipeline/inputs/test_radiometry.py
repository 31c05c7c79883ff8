"""DN scale rules, calibration to radiance and reflectance, and GF-4 time and angle facts."""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import rasterio
import yaml

from pipeline.errors import ConfigError, InputError
from pipeline.inputs import Acquisition
from pipeline.inputs.gf4 import discover_gf4
from pipeline.inputs.gf4_product import BEIJING
from pipeline.inputs.radiometry import earth_sun_distance, esun, sun_position
from pipeline.inputs.scaling import strip_max
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.stage.values import scaled_values

# Facts from real GF-4 metadata (PMS XML of three products): CenterTime as written, the
# footprint centre (mean of the four corners) and the XML's SolarZenith / SolarAzimuth.
REAL = [
    ("2021-11-21 13:44:21", 80.51, 8.70, 59.7966, 161.663),
    ("2022-04-19 11:29:30", 124.08, 11.62, 86.6966, 97.5097),
    ("2025-07-23 12:13:05", 120.08, 10.89, 80.7106, 350.177),
]


@pytest.mark.parametrize(("written", "lon", "lat", "solar_zenith_tag", "solar_azimuth"), REAL)
def test_real_times_are_beijing_time_and_solar_zenith_is_the_elevation(
    written: str, lon: float, lat: float, solar_zenith_tag: float, solar_azimuth: float
) -> None:
    local = datetime.strptime(written, "%Y-%m-%d %H:%M:%S")
    as_utc, _ = sun_position(local.replace(tzinfo=UTC), lon, lat)
    elevation, azimuth = sun_position(local.replace(tzinfo=BEIJING), lon, lat)
    assert as_utc < 0  # read as UTC, every product would have been taken at night
    assert abs(elevation - solar_zenith_tag) < 0.5  # the "zenith" tag holds the elevation
    if elevation < 85:  # near the zenith the azimuth is ill-defined
        assert abs((azimuth - solar_azimuth + 180) % 360 - 180) < 1.0


def test_esun_and_earth_sun_distance_are_physical() -> None:
    # Band means of the ASTM G173-03 extraterrestrial spectrum, against the ranges of published
    # GF-4 PMS tables (blue ~1908–1930, NIR ~1099–1105 W m-2 µm-1).
    assert 1850 < esun("B2") < 2000 and 1050 < esun("B5") < 1150
    assert esun("B2") > esun("B3") > esun("B4") > esun("B5")
    assert 0.983 < earth_sun_distance(datetime(2020, 1, 3, tzinfo=UTC)) < 0.984  # perihelion
    assert 1.016 < earth_sun_distance(datetime(2020, 7, 4, tzinfo=UTC)) < 1.017  # aphelion


def _with_dn(products: SimulatedProducts, tmp_path: Path, dn: int) -> list[Path]:
    """Copies of two products, one pixel of the first set to ``dn``."""
    paths = [shutil.copytree(p, tmp_path / p.name) for p in products.paths[:2]]
    tiff = next(paths[0].glob("GF4_PMS_*.tiff"))
    with rasterio.open(tiff, "r+") as dst:
        data = dst.read(1)
        data[10, 10] = dn
        dst.write(data, 1)
    return paths


def test_dn_above_valid_bits_auto_warns_and_falls_back(
    gf4_products: SimulatedProducts, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = _with_dn(gf4_products, tmp_path, 3000)
    with caplog.at_level(logging.WARNING):
        acqs = discover_gf4(paths, extract_dir=tmp_path / "x")
    # 3000 needs 12 bits: the whole series is scaled by 4095, and the warning names the file.
    assert {a.max_dn for a in acqs} == {4095.0}
    tiff = next(paths[0].glob("GF4_PMS_*.tiff")).name
    assert any(
        tiff in r.getMessage() and "ValidPixelBits 10" in r.getMessage() for r in caplog.records
    )


def test_dn_above_valid_bits_is_an_error_under_metadata_rule(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    paths = _with_dn(gf4_products, tmp_path, 3000)
    with pytest.raises(InputError) as info:
        discover_gf4(paths, extract_dir=tmp_path / "x", dn_rule="metadata")
    message = str(info.value)
    assert message.startswith("GF4_PMS_") and "DN 3000" in message and "\n" not in message
    assert "inputs.dn_rule" in message
    # Data within the declared bits pass the strict rule.
    assert {
        a.max_dn
        for a in discover_gf4(
            gf4_products.paths[:2], extract_dir=tmp_path / "y", dn_rule="metadata"
        )
    } == {1023.0}


GAIN = [0.1753, 0.1843, 0.2041, 0.1625, 0.1144]
BIAS = [0.0, 0.5, 0.0, -0.2, 0.0]


def _table(tmp_path: Path, year: int = 2020) -> Path:
    path = tmp_path / "cresda.yaml"
    path.write_text(
        yaml.safe_dump({"PMS": {year: {"6,30,20,30,30": {"gain": GAIN, "bias": BIAS}}}})
    )
    return path


def _calibrated(
    products: SimulatedProducts, tmp_path: Path, calibration: str, date: int
) -> tuple[Acquisition, np.ndarray, np.ndarray]:
    """One date calibrated from the table, a 5-band 2 × 2 DN sample and its values."""
    acqs = discover_gf4(
        products.paths[:2],
        extract_dir=tmp_path,
        calibration=calibration,
        calibration_table=_table(tmp_path),
    )
    dn = np.array([[[1, 512], [1023, 0]]] * 5, dtype=np.uint16)  # 0 is fill
    dn[1, 0, :] += 7
    values = scaled_values(dn, acqs[date], [1, 2, 3, 4, 5])
    assert values is not None
    return acqs[date], dn, values


def test_radiance_against_hand_computed_values(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    _, dn, values = _calibrated(gf4_products, tmp_path, "radiance", 0)
    for b in range(5):
        l_ref = GAIN[b] * 1023 + BIAS[b]  # the radiance of the largest DN, the series' scale
        for r, c in ((0, 0), (0, 1), (1, 0)):
            expected = (GAIN[b] * float(dn[b, r, c]) + BIAS[b]) / l_ref
            assert values[b, r, c] == pytest.approx(expected, rel=1e-6)
    assert np.isnan(values[:, 1, 1]).all()  # DN 0 is fill, not radiance


def test_reflectance_against_hand_computed_values(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    a, dn, values = _calibrated(gf4_products, tmp_path, "reflectance", 1)
    assert a.sun_elevation is not None
    d = earth_sun_distance(a.time)
    for b, band in enumerate(a.bands):
        radiance = GAIN[b] * float(dn[b, 0, 1]) + BIAS[b]
        rho = math.pi * radiance * d * d / (esun(band) * math.sin(math.radians(a.sun_elevation)))
        assert values[b, 0, 1] == pytest.approx(rho, rel=1e-5)
        assert 0.0 < rho < 1.0


def test_calibration_errors_are_one_line(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    paths = gf4_products.paths[:2]
    with pytest.raises(
        ConfigError, match=r"inputs\.calibration: 'radiance' needs inputs\.calibration_table"
    ):
        discover_gf4(paths, extract_dir=tmp_path, calibration="radiance")
    with pytest.raises(
        InputError, match=r"no PMS coefficients for 2020, IntegrationTime 6,30,20,30,30"
    ):
        discover_gf4(
            paths,
            extract_dir=tmp_path,
            calibration="radiance",
            calibration_table=_table(tmp_path, 2019),
        )
    with pytest.raises(ConfigError, match=r"reflectance is undefined for band IRS1"):
        discover_gf4(
            paths,
            sensor="IRS",
            extract_dir=tmp_path,
            calibration="reflectance",
            calibration_table=_table(tmp_path),
        )


@pytest.mark.parametrize(
    ("values", "nodata", "expected"),
    [
        ([0, 3, 1023], 0.0, 1023.0),  # the plain maximum is valid
        ([0, 3, 65535], 65535.0, 3.0),  # the maximum is the no-data value: masked
        ([65535, 65535], 65535.0, -math.inf),  # nothing valid
        ([5, 9], None, 9.0),
    ],
)
def test_strip_max_skips_no_data(values: list[int], nodata: float | None, expected: float) -> None:
    assert strip_max(np.array([values], dtype=np.uint16), nodata) == expected
    floats = np.array([[*values, np.nan]], dtype=np.float32)
    assert strip_max(floats, nodata) == expected


# Scans the GeoTIFFs given on the command line the way `inputs.dn_rule: auto` does, with the
# scan's cache bound or (argument "unbounded") with GDAL's default on a 24 GB machine, and
# prints how much the process's resident memory rose at most, and the largest DN found.
_SCAN_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pipeline.inputs import scaling

    class File:  # what observed_max needs of an acquisition
        def __init__(self, path):
            self.path, self.nodata = Path(path), 0

    def high_water():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM"))

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    if sys.argv[1] == "unbounded":
        scaling._SCAN_CACHE_BYTES = 1200 << 20
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the high-water mark to the current resident size
    before = rss()
    maxima = scaling.observed_max([File(p) for p in sys.argv[2:]])
    print(high_water() - before, max(maxima))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident memory via /proc")
# The scanned file is an L1A-like raster with neither a geotransform nor RPCs: the scan reads
# DN, not places.
@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_the_dn_scan_reads_past_gdal_block_cache(tmp_path: Path) -> None:
    """GDAL's block cache (5 % of the machine's memory by default) filled with the blocks of
    the scan, and the memory stayed with the run's driver: 0.9-1.5 GiB for a full-size GF-4
    series. The scan reads each block once; its cache is bounded. One file, so that the
    unbounded control does not depend on how the scan's threads interleave."""
    data = np.full((5, 4096, 10240), 500, np.uint16)  # 400 MiB, organised like GF-4 L1A
    data[1, 7, 9] = 1023
    profile = dict(driver="GTiff", width=10240, height=4096, count=5, dtype="uint16", nodata=0)
    path = tmp_path / "scene.tif"
    with rasterio.open(path, "w", **profile, blockysize=1, interleave="pixel") as dst:
        dst.write(data)
    del data
    rose = {}
    for mode in ("unbounded", "scan"):
        out = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", _SCAN_SCRIPT, mode, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        peak, top = out.stdout.split()
        rose[mode] = int(peak) >> 20
        assert float(top) == 1023.0
    assert rose["unbounded"] > 300, rose  # the check can tell: every block was cached
    assert rose["scan"] < 160, rose  # the 64 MiB bound and a strip of rows
