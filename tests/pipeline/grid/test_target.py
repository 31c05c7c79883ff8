"""Target grid: defaults for GF-4 and GeoTIFF series, explicit settings, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.warp import transform as transform_points
from rasterio.windows import Window

from pipeline.errors import ConfigError, InputError
from pipeline.grid.target import TargetGrid, derive_grid, utm_crs
from pipeline.inputs import Acquisition
from pipeline.inputs.geotiff import discover_geotiffs
from pipeline.inputs.gf4 import discover_gf4
from pipeline.inputs.synthetic import SimulatedProducts


@pytest.fixture(scope="module")
def gf4_acqs(gf4_products: SimulatedProducts, tmp_path_factory) -> list[Acquisition]:
    return discover_gf4(gf4_products.paths, extract_dir=tmp_path_factory.mktemp("x"))


def test_gf4_defaults_utm_gsd_and_union(gf4_acqs: list[Acquisition]) -> None:
    grid = derive_grid(gf4_acqs)
    assert grid.crs == "EPSG:32650"  # 116.4° E, 39.9° N
    assert grid.resolution == (50.0, 50.0)
    left, bottom, right, top = grid.bounds
    assert left % 50 == 0 and top % 50 == 0  # snapped origin
    xs_all, ys_all = [], []
    for a in gf4_acqs:
        assert a.footprint is not None
        lon, lat = zip(*a.footprint, strict=True)
        xs, ys = transform_points("EPSG:4326", grid.crs, lon, lat)
        xs_all += xs
        ys_all += ys
    # The grid holds every footprint and is no larger than their union plus one pixel.
    assert left <= min(xs_all) and right >= max(xs_all)
    assert bottom <= min(ys_all) and top >= max(ys_all)
    assert left > min(xs_all) - 50 and right < max(xs_all) + 50
    assert bottom > min(ys_all) - 50 and top < max(ys_all) + 50
    # The union is larger than any single frame: the dates are pointed differently.
    widths = []
    for a in gf4_acqs:
        assert a.footprint is not None
        lon, lat = zip(*a.footprint, strict=True)
        xs, _ = transform_points("EPSG:4326", grid.crs, lon, lat)
        widths.append(max(xs) - min(xs))
    assert right - left > max(widths) + 50


def test_explicit_crs_resolution_bounds(gf4_acqs: list[Acquisition]) -> None:
    default = derive_grid(gf4_acqs)
    left, bottom, right, top = default.bounds
    asked = (left + 1010, bottom + 990, right - 1010, top - 990)
    grid = derive_grid(gf4_acqs, resolution=100.0, bounds=asked)
    assert grid.resolution == (100.0, 100.0)
    # Snapped outwards to multiples of 100.
    assert grid.bounds == (
        math.floor(asked[0] / 100) * 100,
        math.floor(asked[1] / 100) * 100,
        math.ceil(asked[2] / 100) * 100,
        math.ceil(asked[3] / 100) * 100,
    )
    assert (grid.width, grid.height) == (
        round((grid.bounds[2] - grid.bounds[0]) / 100),
        round((grid.bounds[3] - grid.bounds[1]) / 100),
    )
    geo = derive_grid(gf4_acqs, crs="EPSG:4326")
    assert geo.crs == "EPSG:4326"
    assert geo.resolution[0] == pytest.approx(50 / 111_320)


def test_bounds_must_overlap_every_input(gf4_acqs: list[Acquisition]) -> None:
    _, bottom, right, top = derive_grid(gf4_acqs).bounds
    with pytest.raises(InputError, match=r"does not overlap grid\.bounds"):
        derive_grid(gf4_acqs, bounds=(right + 1000, bottom, right + 5000, top))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"resolution": 0.0}, "grid.resolution"),
        ({"bounds": (1, 1, 0, 2)}, "grid.bounds"),
        ({"crs": "EPSG:nope"}, "grid.crs"),
    ],
)
def test_bad_arguments_are_config_errors(gf4_acqs: list[Acquisition], kwargs, key) -> None:
    with pytest.raises(ConfigError, match=key):
        derive_grid(gf4_acqs, **kwargs)


def test_no_acquisitions() -> None:
    with pytest.raises(InputError):
        derive_grid([])


def test_geotiff_defaults_first_file_crs_and_union(geotiff_series: SimulatedProducts) -> None:
    acqs = discover_geotiffs(geotiff_series.paths)
    grid = derive_grid(acqs)
    with rasterio.open(geotiff_series.truth_path) as truth:
        assert grid.crs == "EPSG:32650"
        assert grid.resolution == (truth.res[0], truth.res[1])
        boxes = []
        for p in geotiff_series.paths:
            with rasterio.open(p) as src:
                boxes.append(src.bounds)
        union = (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )
        assert grid.bounds == pytest.approx(union)


def test_target_grid_helpers() -> None:
    grid = TargetGrid("EPSG:32650", Affine(10, 0, 1000, 0, -10, 5000), width=4, height=3)
    assert grid.bounds == (1000, 4970, 1040, 5000)
    y, x = grid.coords()
    np.testing.assert_array_equal(x, [1005, 1015, 1025, 1035])
    np.testing.assert_array_equal(y, [4995, 4985, 4975])
    assert grid.window_transform(Window(1, 2, 2, 1)) == Affine(10, 0, 1010, 0, -10, 4980)
    with pytest.raises(ValueError, match="north-up"):
        TargetGrid("EPSG:32650", Affine(10, 1, 0, 0, -10, 0), width=1, height=1)


def test_utm_zones() -> None:
    assert utm_crs(116.4, 39.9) == "EPSG:32650"
    assert utm_crs(-70.6, -33.4) == "EPSG:32719"
    assert utm_crs(180.0, 0.0) == "EPSG:32660"
