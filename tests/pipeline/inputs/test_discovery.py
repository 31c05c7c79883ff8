"""Discovery of GF-4 products and GeoTIFF series; series checks."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.errors import ConfigError, InputError
from pipeline.inputs import check_series
from pipeline.inputs.geotiff import discover_geotiffs
from pipeline.inputs.gf4 import discover_gf4
from pipeline.inputs.synthetic import SimulatedProducts, make_gf4_series


def test_discover_product_directories(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    # Given newest first: the result must still come back in time order.
    acqs = discover_gf4(gf4_products.paths[::-1], extract_dir=tmp_path)
    assert [a.time for a in acqs] == gf4_products.times
    a = acqs[0]
    # PMI products (both sensors, as CRESDA delivers them): the PMS image of the product.
    assert gf4_products.paths[0].name.startswith("GF4_PMI_")
    assert a.id == gf4_products.paths[0].name.replace("GF4_PMI_", "GF4_PMS_")
    assert a.path == gf4_products.paths[0] / f"{a.id}.tiff"
    # 10 valid bits in a 16-bit file: the scale is 2^10 − 1, not the type's maximum.
    assert (a.sensor, a.georef, a.max_dn, a.nodata) == ("PMS", "rpc", 1023.0, 0.0)
    assert a.bands == ("B1", "B2", "B3", "B4", "B5")
    assert a.integration_time == (6.0, 30.0, 20.0, 30.0, 30.0)  # milliseconds
    assert a.gsd == 50.0
    assert a.footprint is not None and len(a.footprint) == 4
    assert a.cloud_percent is not None and 0 <= a.cloud_percent <= 100
    # Directories are read in place: nothing extracted, only the observed-DN cache written.
    assert [p.name for p in tmp_path.iterdir()] == [".observed-max.json"]
    assert check_series(acqs) == []


def test_discover_glob_and_duplicates(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    root = gf4_products.paths[0].parent
    acqs = discover_gf4([str(root / "GF4_PMI_*"), gf4_products.paths[2]], extract_dir=tmp_path)
    assert len(acqs) == 7  # the explicitly repeated product is not listed twice
    with pytest.raises(InputError, match=r"pattern .*GF4_IRS_\*.* matches no file"):
        discover_gf4([str(root / "GF4_IRS_*")], extract_dir=tmp_path)
    with pytest.raises(InputError, match="no such file or directory"):
        discover_gf4([root / "missing"], extract_dir=tmp_path)


def test_pmi_archives_give_either_sensor(
    gf4_pmi_archives: SimulatedProducts, tmp_path: Path
) -> None:
    pattern = str(gf4_pmi_archives.paths[0].parent / "GF4_PMI_*.tar.gz")
    pms = discover_gf4([pattern], sensor="PMS", extract_dir=tmp_path)
    irs = discover_gf4([pattern], sensor="IRS", extract_dir=tmp_path)
    assert [a.bands for a in pms] == [("B1", "B2", "B3", "B4", "B5")] * 2
    # IRS lists its band as "1" like PMS's first: it is named IRS1, never B1.
    assert [(a.bands, a.max_dn, a.gsd) for a in irs] == [(("IRS1",), 1023.0, 400.0)] * 2
    for a in pms + irs:
        assert a.path.is_relative_to(tmp_path) and a.path.is_file()
    # Both sensors came out of one extraction per archive.
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 2
    assert pms[0].path.parent == irs[0].path.parent
    # The IRS image of a PMI product is taken 45 s after its PMS image.
    assert [(i.time - p.time).total_seconds() for p, i in zip(pms, irs, strict=True)] == [45.0] * 2


def test_product_of_other_sensor_is_skipped(tmp_path: Path) -> None:
    irs = make_gf4_series(
        tmp_path / "irs", n_dates=1, size=32, sensor="IRS", gsd=400.0, cloud_style="none"
    )
    pms = make_gf4_series(tmp_path / "pms", n_dates=2, size=32, cloud_style="none")
    acqs = discover_gf4([*irs.paths, *pms.paths], extract_dir=tmp_path / "x")
    assert [a.sensor for a in acqs] == ["PMS", "PMS"]


def test_truncated_archive_in_inputs(gf4_pmi_archives: SimulatedProducts, tmp_path: Path) -> None:
    good = gf4_pmi_archives.paths[1]
    data = gf4_pmi_archives.paths[0].read_bytes()
    broken = tmp_path / gf4_pmi_archives.paths[0].name
    broken.write_bytes(data[:-300])
    with pytest.raises(InputError, match=f"{broken.name}: archive is truncated or corrupt"):
        discover_gf4([broken, good], extract_dir=tmp_path / "x")


def test_incomplete_product_directory(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    product = shutil.copytree(gf4_products.paths[0], tmp_path / gf4_products.paths[0].name)
    # A PMI product missing one sensor's files is incomplete, even for the other sensor.
    next(product.glob("GF4_IRS_*.rpb")).unlink()
    with pytest.raises(InputError, match=r"a PMI product holds PMS and IRS.*GF4_IRS_.*\.rpb is"):
        discover_gf4([product], extract_dir=tmp_path / "x")
    for f in product.glob("GF4_IRS_*"):
        f.unlink()
    with pytest.raises(InputError, match=r"but GF4_IRS_\*\.xml is missing"):
        discover_gf4([product], extract_dir=tmp_path / "x")
    # A PMS-only product directory: the RPC sidecar and the image are each needed.
    alone = product.rename(tmp_path / product.name.replace("PMI", "PMS"))
    next(alone.glob("*.rpb")).unlink()
    with pytest.raises(InputError, match=r"no RPCs found \(missing .*\.rpb\)"):
        discover_gf4([alone], extract_dir=tmp_path / "x")
    next(alone.glob("*.tiff")).unlink()
    with pytest.raises(InputError, match="has no image"):
        discover_gf4([alone], extract_dir=tmp_path / "x")


def test_dn_arguments(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    paths = gf4_products.paths[:2]
    assert {a.max_dn for a in discover_gf4(paths, extract_dir=tmp_path, max_dn=1000)} == {1000.0}
    # Simulated DN reach close to 1023 (bright clouds), so the observed power of two is 1024.
    assert {a.max_dn for a in discover_gf4(paths, extract_dir=tmp_path, dn_rule="pow2")} == {1024.0}
    with pytest.raises(ConfigError, match=r"inputs\.sensor"):
        discover_gf4(paths, extract_dir=tmp_path, sensor="MSS")
    with pytest.raises(ConfigError, match=r"inputs\.max_dn"):
        discover_gf4(paths, extract_dir=tmp_path, max_dn=-1)
    with pytest.raises(ConfigError, match=r"inputs\.dn_rule"):
        discover_gf4(paths, extract_dir=tmp_path, dn_rule="log")


def test_check_series_errors(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    acqs = discover_gf4(gf4_products.paths[:3], extract_dir=tmp_path)
    with pytest.raises(InputError, match="aATM needs at least 2 dates"):
        check_series(acqs[:1])
    other = dataclasses.replace(acqs[1], bands=("IRS1",))
    with pytest.raises(InputError, match=rf"{acqs[1].path.name}: bands IRS1 differ"):
        check_series([acqs[0], other, acqs[2]])
    twin = dataclasses.replace(acqs[2], time=acqs[0].time)
    with pytest.raises(InputError, match="listed twice"):
        check_series([acqs[0], acqs[1], twin])


def test_check_series_warns_on_mixed_integration_time(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    acqs = discover_gf4(gf4_products.paths[:3], extract_dir=tmp_path)
    changed = dataclasses.replace(acqs[1], integration_time=(8.0, 30.0, 20.0, 30.0, 30.0))
    warns = check_series([acqs[0], changed, acqs[2]])
    assert len(warns) == 1
    assert "IntegrationTime differs" in warns[0] and "not comparable" in warns[0]
    assert "6/30/20/30/30 ms (2 dates)" in warns[0] and "inputs.calibration" in warns[0]


def test_discover_geotiffs(geotiff_series: SimulatedProducts) -> None:
    acqs = discover_geotiffs([str(geotiff_series.paths[0].parent / "scene_*.tif")])
    assert [a.time for a in acqs] == geotiff_series.times
    a = acqs[0]
    assert (a.sensor, a.georef, a.max_dn, a.nodata) == ("geotiff", "crs", 65535.0, 0.0)
    assert a.bands == ("B1", "B2", "B3", "B4", "B5")
    assert a.id == "scene_20200601"
    assert check_series(acqs) == []


def test_discover_geotiffs_times_and_patterns(geotiff_series: SimulatedProducts) -> None:
    paths = geotiff_series.paths
    given = [datetime(2021, 1, 5 - i, tzinfo=UTC) for i in range(len(paths))]
    acqs = discover_geotiffs(paths, times=given)
    assert [a.path for a in acqs] == paths[::-1]  # sorted by the given times
    with pytest.raises(ConfigError, match=r"inputs\.dates: 2 dates for 5 files"):
        discover_geotiffs(paths, times=given[:2])
    with pytest.raises(InputError, match=r"scene_20200601.tif: no date matches date_pattern"):
        discover_geotiffs(paths, date_pattern=r"(\d{10})")
    with pytest.raises(ConfigError, match=r"inputs\.date_pattern"):
        discover_geotiffs(paths, date_pattern="(")
    assert discover_geotiffs(paths, max_dn=4095)[0].max_dn == 4095.0
    # Data were scaled by 65535 and clouds reach DN > 32768.
    assert discover_geotiffs(paths, dn_rule="pow2")[0].max_dn == 65536.0


def test_ungeoreferenced_geotiff_is_input_error(gf4_products: SimulatedProducts) -> None:
    # An L1A image without its .rpb sidecar looks like a plain raster with no georeferencing.
    tiff = next(gf4_products.paths[0].glob("*.tiff"))
    with pytest.raises(InputError, match="no CRS/geotransform and no RPCs"):
        discover_geotiffs(
            [tiff.parent / tiff.name.replace(".tiff", ".jpg")], times=[datetime(2020, 1, 1)]
        )
