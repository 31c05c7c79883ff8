"""Discovery of GF-4 products and GeoTIFF series; series checks."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import datetime
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
    assert a.id == gf4_products.paths[0].name
    assert a.path == gf4_products.paths[0] / f"{a.id}.tiff"
    assert (a.sensor, a.georef, a.max_dn, a.nodata) == ("PMS", "rpc", 4095.0, 0.0)
    assert a.bands == ("B1", "B2", "B3", "B4", "B5")
    assert a.integration_time == (0.02,) * 5
    assert a.gsd == 50.0
    assert a.footprint is not None and len(a.footprint) == 4
    assert a.cloud_percent is not None and 0 <= a.cloud_percent <= 100
    assert not list(tmp_path.iterdir())  # directories are read in place, nothing extracted
    assert check_series(acqs) == []


def test_discover_glob_and_duplicates(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    root = gf4_products.paths[0].parent
    acqs = discover_gf4([str(root / "GF4_PMS_*"), gf4_products.paths[2]], extract_dir=tmp_path)
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
    assert [(a.bands, a.max_dn, a.gsd) for a in irs] == [(("B6",), 65535.0, 400.0)] * 2
    for a in pms + irs:
        assert a.path.is_relative_to(tmp_path) and a.path.is_file()
    # Both sensors came out of one extraction per archive.
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 2
    assert pms[0].path.parent == irs[0].path.parent
    assert [a.time for a in pms] == [a.time for a in irs]


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
    next(product.glob("*.rpb")).unlink()
    with pytest.raises(InputError, match=r"no RPCs found \(missing .*\.rpb\)"):
        discover_gf4([product], extract_dir=tmp_path / "x")
    next(product.glob("*.tiff")).unlink()
    with pytest.raises(InputError, match="has no image"):
        discover_gf4([product], extract_dir=tmp_path / "x")


def test_dn_arguments(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    paths = gf4_products.paths[:2]
    assert {a.max_dn for a in discover_gf4(paths, extract_dir=tmp_path, max_dn=1000)} == {1000.0}
    # Simulated DN reach close to 4095 (bright clouds), so the observed power of two is 4096.
    assert {a.max_dn for a in discover_gf4(paths, extract_dir=tmp_path, dn_rule="pow2")} == {4096.0}
    with pytest.raises(ConfigError, match=r"inputs\.sensor"):
        discover_gf4(paths, extract_dir=tmp_path, sensor="MSS")
    with pytest.raises(ConfigError, match=r"inputs\.max_dn"):
        discover_gf4(paths, extract_dir=tmp_path, max_dn=-1)
    with pytest.raises(ConfigError, match=r"inputs\.dn_rule"):
        discover_gf4(paths, extract_dir=tmp_path, dn_rule="log")  # type: ignore[arg-type]


def test_check_series_errors(gf4_products: SimulatedProducts, tmp_path: Path) -> None:
    acqs = discover_gf4(gf4_products.paths[:3], extract_dir=tmp_path)
    with pytest.raises(InputError, match="aATM needs at least 2 dates"):
        check_series(acqs[:1])
    other = dataclasses.replace(acqs[1], bands=("B6",))
    with pytest.raises(InputError, match=rf"{acqs[1].path.name}: bands B6 differ"):
        check_series([acqs[0], other, acqs[2]])
    twin = dataclasses.replace(acqs[2], time=acqs[0].time)
    with pytest.raises(InputError, match="listed twice"):
        check_series([acqs[0], acqs[1], twin])


def test_check_series_warns_on_mixed_integration_time(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    acqs = discover_gf4(gf4_products.paths[:3], extract_dir=tmp_path)
    changed = dataclasses.replace(acqs[1], integration_time=(0.04,) * 5)
    warns = check_series([acqs[0], changed, acqs[2]])
    assert len(warns) == 1
    assert "IntegrationTime differs" in warns[0] and "not comparable" in warns[0]
    assert "0.02/0.02/0.02/0.02/0.02 s (2 dates)" in warns[0]


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
    given = [datetime(2021, 1, 5 - i) for i in range(len(paths))]
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
