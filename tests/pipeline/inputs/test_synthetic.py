"""The simulated GF-4 products and GeoTIFF series are what they claim to be."""

from __future__ import annotations

import tarfile
from datetime import timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import RPCTransformer

from pipeline.inputs.gf4_product import find_product_files, parse_metadata, parse_product_name
from pipeline.inputs.synthetic import (
    SimulatedProducts,
    load_demo_truth,
    make_gf4_series,
    truth_bands,
)


def test_load_demo_truth() -> None:
    rgb = load_demo_truth()
    assert rgb.shape == (1000, 1000, 3) and rgb.dtype == np.uint8
    assert rgb.std() > 20  # a real image, not a blank


def test_truth_bands() -> None:
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 51, 204, 102  # green vegetation
    bands = truth_bands(rgb, 2)
    assert bands.shape == (5, 2, 2) and bands.dtype == np.float32
    pan = 0.2989 * 0.2 + 0.5870 * 0.8 + 0.1140 * 0.4
    np.testing.assert_allclose(bands[:4, 0, 0], [pan, 0.4, 0.8, 0.2], atol=1e-6)
    assert bands[4, 0, 0] > bands[3, 0, 0]  # vegetation is brighter in NIR than in red


def test_product_layout(gf4_products: SimulatedProducts) -> None:
    assert len(gf4_products.paths) == 7
    assert gf4_products.times == sorted(gf4_products.times)
    for path, time in zip(gf4_products.paths, gf4_products.times, strict=True):
        name = parse_product_name(path.name)
        beijing = time.astimezone(timezone(timedelta(hours=8)))
        assert name is not None and name.kind == "PMI" and name.date == f"{beijing:%Y%m%d}"
        for sensor in ("PMS", "IRS"):
            for suffix in (".tiff", ".rpb", ".xml", ".jpg", "_thumb.jpg"):
                stem = path.name.replace("PMI", sensor)
                assert (path / f"{stem}{suffix}").is_file(), suffix
        files = find_product_files(path, "PMS")
        assert files is not None
        meta = parse_metadata(files.xml)
        assert meta.center_time == time and (meta.width, meta.height) == (192, 192)
        with rasterio.open(files.tiff) as src:
            assert src.crs is None and src.transform.is_identity
            assert (src.count, src.dtypes[0], src.nodata) == (5, "uint16", 0)
            assert src.rpcs is not None
            data = src.read()
        assert 1 <= data.min() and data.max() <= 1023  # ValidPixelBits 10


def test_rpc_sidecar_agrees_with_metadata_corners(gf4_products: SimulatedProducts) -> None:
    # The XML corners were computed by the simulator's own inverse of its RPC; GDAL evaluating
    # the .rpb must send them back to the image's outer corners.
    for path in gf4_products.paths[:3]:
        files = find_product_files(path, "PMS")
        assert files is not None
        meta = parse_metadata(files.xml)
        assert meta.footprint is not None
        with rasterio.open(files.tiff) as src:
            rpcs, w, h = src.rpcs, src.width, src.height
        lon, lat = zip(*meta.footprint, strict=True)
        with RPCTransformer(rpcs) as tr:
            rows, cols = tr.rowcol(lon, lat, op=lambda v: v)
        np.testing.assert_allclose(rows, [0, 0, h, h], atol=1e-3)
        np.testing.assert_allclose(cols, [0, w, w, 0], atol=1e-3)


def test_footprints_differ_per_date(gf4_products: SimulatedProducts) -> None:
    corners = []
    for path in gf4_products.paths:
        files = find_product_files(path, "PMS")
        assert files is not None
        corners.append(np.array(parse_metadata(files.xml).footprint))
    shifts_m = [np.abs(c - corners[0]).max() * 111_320 for c in corners[1:]]
    assert min(shifts_m) > 5 and max(shifts_m) < 3 * 50 * 3  # metres: ~0.1…3 pixels apart


def test_truth_file(gf4_products: SimulatedProducts) -> None:
    with rasterio.open(gf4_products.truth_path) as src:
        assert src.crs == "EPSG:4326" and src.count == 5 and src.dtypes[0] == "float32"
        truth = src.read()
        assert src.res[1] * 111_320 == pytest.approx(50.0)
    assert truth.min() >= 0 and truth.max() <= 1 and truth.std() > 0.05


def test_deterministic_from_seed(tmp_path: Path) -> None:
    def dn(out: Path, seed: int) -> np.ndarray:
        sim = make_gf4_series(out, n_dates=2, size=32, seed=seed)
        with rasterio.open(next(sim.paths[1].glob("*.tiff"))) as src:
            return src.read()

    a, b, c = dn(tmp_path / "a", 5), dn(tmp_path / "b", 5), dn(tmp_path / "c", 6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_archives_and_pmi(gf4_pmi_archives: SimulatedProducts) -> None:
    for path in gf4_pmi_archives.paths:
        assert path.name.endswith(".tar.gz") and path.name.startswith("GF4_PMI_")
        with tarfile.open(path) as tar:
            names = tar.getnames()
        stem = path.name[: -len(".tar.gz")]
        assert f"{stem.replace('PMI', 'PMS')}.tiff" in names
        assert f"{stem.replace('PMI', 'IRS')}.rpb" in names
        assert f"{stem.replace('PMI', 'IRS')}.xml" in names


def test_integration_time_per_band(tmp_path: Path) -> None:
    sim = make_gf4_series(
        tmp_path,
        n_dates=1,
        size=32,
        cloud_style="none",
        sensor="PMS",
        integration_time=[8, 30, 20, 30, 30],
    )
    files = find_product_files(sim.paths[0], "PMS")
    assert files is not None
    assert parse_metadata(files.xml).integration_time == (8.0, 30.0, 20.0, 30.0, 30.0)


def test_geotiff_series_layout(geotiff_series: SimulatedProducts) -> None:
    extents = set()
    for path, time in zip(geotiff_series.paths, geotiff_series.times, strict=True):
        assert path.name == f"scene_{time:%Y%m%d}.tif"
        with rasterio.open(path) as src:
            assert src.crs == "EPSG:32650" and src.count == 5 and src.nodata == 0
            extents.add(tuple(src.bounds))
    assert len(extents) > 1  # dates are cropped differently


def test_full_size_frames_use_an_accurate_ground_lattice() -> None:
    # Frames above 2048 px interpolate the image → ground mapping between lattice nodes; the
    # positions it gives must map back through the RPC to their own pixel.
    from pipeline.inputs.synthetic.rpc import make_rpc
    from pipeline.inputs.synthetic.sampling import EXACT_GROUND_MAX, ground_rows

    size = 4 * EXACT_GROUND_MAX
    rpc = make_rpc(size, 50.0, 116.4, 39.9, (2.0, -1.5), float(np.radians(8.1)))
    lon, lat = ground_rows(rpc, size, 1001, 1013)  # rows between lattice nodes
    rows, cols = np.mgrid[1001:1013, 0:size].astype(float)
    back_rows, back_cols = rpc.image(lon, lat)
    assert lon.shape == (12, size)
    assert np.abs(back_rows - rows).max() < 1e-3 and np.abs(back_cols - cols).max() < 1e-3
