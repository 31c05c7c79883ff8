"""Reading grid windows: RPC orthorectification, no-data, window independence, errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from matplotlib.path import Path as Polygon
from rasterio.warp import transform as transform_points
from rasterio.windows import Window

from pipeline.errors import ConfigError, InputError
from pipeline.grid.target import TargetGrid, derive_grid
from pipeline.inputs import Acquisition
from pipeline.inputs.geotiff import discover_geotiffs
from pipeline.inputs.gf4 import discover_gf4
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.stage.source import source_window
from pipeline.stage.warp import read_window
from tests.pipeline.truth import truth_on


def _full(grid: TargetGrid) -> Window:
    return Window(0, 0, grid.width, grid.height)


def _truth_on(grid: TargetGrid, truth_path: Path) -> np.ndarray:
    return truth_on(truth_path, grid.transform, grid.crs, (grid.height, grid.width))


def _raw(acq: Acquisition) -> np.ndarray:
    with rasterio.open(acq.path) as src:
        return src.read().astype(np.float32) / acq.max_dn


def _centre_crop(a: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    r0, c0 = (a.shape[-2] - shape[0]) // 2, (a.shape[-1] - shape[1]) // 2
    return a[..., r0 : r0 + shape[0], c0 : c0 + shape[1]]


@pytest.fixture(scope="module")
def clear(gf4_clear: SimulatedProducts, tmp_path_factory):
    acqs = discover_gf4(gf4_clear.paths, extract_dir=tmp_path_factory.mktemp("x"))
    grid = derive_grid(acqs)
    return acqs, grid, _truth_on(grid, gf4_clear.truth_path)


@pytest.fixture(scope="module")
def cloudy(gf4_products: SimulatedProducts, tmp_path_factory):
    acqs = discover_gf4(gf4_products.paths, extract_dir=tmp_path_factory.mktemp("x"))
    grid = derive_grid(acqs)
    return acqs, grid, _truth_on(grid, gf4_products.truth_path)


def test_rpc_orthorectification_restores_the_truth(clear) -> None:
    acqs, grid, truth = clear
    for acq in acqs:
        ortho = read_window(acq, grid, _full(grid))
        assert ortho.dtype == np.float32 and ortho.shape == (5, grid.height, grid.width)
        ok = np.isfinite(ortho[0]) & np.isfinite(truth[0])
        assert ok.mean() > 0.6
        err = np.abs(ortho[:, ok] - truth[:, ok]).mean(axis=1)
        assert (err < 0.015).all(), err
        assert np.corrcoef(ortho[0, ok], truth[0, ok])[0, 1] > 0.98
        # Stacking the raw L1A array as if it were the grid (centred) is far worse.
        raw = _raw(acq)
        t = _centre_crop(truth, raw.shape[1:])
        ok_raw = np.isfinite(t[0])
        raw_err = np.abs(raw[:, ok_raw] - t[:, ok_raw]).mean(axis=1)
        assert (raw_err > 4 * err).all(), (raw_err, err)
        assert np.corrcoef(raw[0, ok_raw], t[0, ok_raw])[0, 1] < 0.8


def test_orthorectified_dates_align_raw_dates_do_not(clear) -> None:
    acqs, grid, _ = clear
    a, b = (read_window(x, grid, _full(grid))[0] for x in acqs[:2])
    ok = np.isfinite(a) & np.isfinite(b)
    assert np.abs(a[ok] - b[ok]).mean() < 0.01
    ra, rb = _raw(acqs[0])[0], _raw(acqs[1])[0]
    assert np.abs(ra - rb).mean() > 5 * np.abs(a[ok] - b[ok]).mean()


def test_cloudy_series_clear_pixels_match_truth(cloudy) -> None:
    acqs, grid, truth = cloudy
    for acq in acqs[:3]:
        ortho = read_window(acq, grid, _full(grid), bands=[1])[0]
        ok = np.isfinite(ortho) & np.isfinite(truth[0])
        close = np.abs(ortho[ok] - truth[0, ok]) < 0.02
        raw = _raw(acq)[0]
        t = _centre_crop(truth[0], raw.shape)
        ok_raw = np.isfinite(t)
        raw_close = np.abs(raw[ok_raw] - t[ok_raw]) < 0.02
        # Clouds only brighten; where the ortho frame is clear it sits on the truth.
        assert np.median(ortho[ok] - truth[0, ok]) > -0.01
        assert close.mean() > 0.4
        assert close.mean() > 2.5 * raw_close.mean()


def test_nan_outside_footprint(clear) -> None:
    acqs, grid, _ = clear
    y, x = grid.coords()
    xx, yy = np.meshgrid(x, y)
    pts = np.column_stack([xx.ravel(), yy.ravel()])
    nan_any = np.zeros(grid.shape, bool)
    for acq in acqs:
        ortho = read_window(acq, grid, _full(grid))
        assert acq.footprint is not None
        lon, lat = zip(*acq.footprint, strict=True)
        fx, fy = transform_points("EPSG:4326", grid.crs, lon, lat)
        corners = np.column_stack([fx, fy])
        centre = corners.mean(axis=0)
        # Shrunk and grown by 3 % (about 2 pixels of a 128-pixel frame) to keep clear of the
        # resampling kernel at the edge.
        inner = Polygon(centre + 0.97 * (corners - centre))
        outer = Polygon(centre + 1.03 * (corners - centre))
        inside = inner.contains_points(pts).reshape(grid.shape)
        outside = ~outer.contains_points(pts).reshape(grid.shape)
        assert outside.any() and inside.any()
        assert np.isnan(ortho[:, outside]).all()
        assert np.isfinite(ortho[:, inside]).all()
        nan_any |= np.isnan(ortho[0])
    # Footprints differ: some grid pixels are valid on one date and no-data on another.
    valid_somewhere = np.zeros(grid.shape, bool)
    for acq in acqs:
        valid_somewhere |= np.isfinite(read_window(acq, grid, _full(grid))[0])
    assert (nan_any & valid_somewhere).sum() > 50


@pytest.mark.parametrize(
    "window",
    [Window(37, 50, 64, 70), Window(0, 0, 40, 33), Window(100, 90, 47, 53), Window(1, 120, 140, 9)],
)
def test_sub_window_equals_full_read(clear, window: Window) -> None:
    acqs, grid, _ = clear
    full = read_window(acqs[0], grid, _full(grid))
    sub = read_window(acqs[0], grid, window)
    region = full[
        :,
        window.row_off : window.row_off + window.height,
        window.col_off : window.col_off + window.width,
    ]
    np.testing.assert_allclose(sub, region, rtol=0, atol=1e-6, equal_nan=True)


def test_reading_into_a_given_array(clear) -> None:
    """``out`` (a date's slice of a staged cube) is filled whole, stale values included, with
    the values of a plain read; an array of another shape or dtype is refused."""
    acqs, grid, _ = clear
    window = Window(0, 0, 40, 33)  # reaches outside the footprint: NaN written there too
    plain = read_window(acqs[0], grid, window)
    assert np.isnan(plain).any() and np.isfinite(plain).any()
    cube = np.full((2, *plain.shape), 7.0, dtype=np.float32)  # stale values
    filled = read_window(acqs[0], grid, window, out=cube[1])
    assert filled is not None and np.shares_memory(filled, cube[1])
    np.testing.assert_array_equal(cube[1], plain)
    assert (cube[0] == 7.0).all()
    with pytest.raises(ValueError, match="expected float32"):
        read_window(acqs[0], grid, window, out=np.zeros(plain.shape, dtype=np.float64))
    with pytest.raises(ValueError, match="expected float32"):
        read_window(acqs[0], grid, window, out=cube[:, 0])


@pytest.mark.parametrize("window", [Window(37, 50, 64, 70), Window(1, 120, 140, 9)])
def test_memory_mapped_reads_give_the_block_cache_values(
    clear, geotiff_series: SimulatedProducts, window: Window, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows of uncompressed striped files are read memory-mapped (READ_GDAL_CONFIG): the same
    values, bit for bit, as GDAL's default read through its block cache, for an RPC product
    (warped) and for a GeoTIFF on the grid (copied)."""
    acqs, grid, _ = clear
    series = discover_geotiffs(geotiff_series.paths)
    cases = [(acqs[0], grid), (series[0], derive_grid(series))]
    for acq, on in cases:
        with rasterio.open(acq.path) as src:  # the layout the option is for
            assert src.compression is None and not src.profile.get("tiled")
        mapped = read_window(acq, on, window)
        with monkeypatch.context() as patch:
            patch.setattr("pipeline.stage.warp.READ_GDAL_CONFIG", {})
            cached = read_window(acq, on, window)
        assert np.isfinite(mapped).any()
        np.testing.assert_array_equal(mapped, cached)


def test_reads_only_the_needed_source_region(clear) -> None:
    acqs, grid, _ = clear
    with rasterio.open(acqs[0].path) as src:
        win = source_window(src, acqs[0], grid, Window(60, 60, 16, 16), margin=4)
        assert win is not None
        # 16 grid pixels at the product GSD, rotated by ~8°: about 19 image pixels plus margins.
        assert win.width <= 32 and win.height <= 32
        assert win.width * win.height < src.width * src.height / 10


def test_window_outside_every_footprint_is_all_nan(clear) -> None:
    acqs, grid, _ = clear
    far = TargetGrid(grid.crs, grid.transform @ Affine.translation(-500, 0), 600, grid.height)
    out = read_window(acqs[0], far, Window(0, 0, 64, 64))
    assert out.shape == (5, 64, 64) and np.isnan(out).all()


def test_band_subset_and_dem(clear, tmp_path: Path) -> None:
    acqs, grid, _ = clear
    full = read_window(acqs[0], grid, _full(grid))
    b42 = read_window(acqs[0], grid, _full(grid), bands=[4, 2])
    np.testing.assert_array_equal(b42, full[[3, 1]])

    def dem(height: float) -> Path:
        path = tmp_path / f"dem{height:g}.tif"
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=64,
            height=64,
            count=1,
            dtype="float32",
            crs="EPSG:4326",
            transform=Affine(0.01, 0, 116.0, 0, -0.01, 40.3),
        ) as dst:
            dst.write(np.full((1, 64, 64), height, np.float32))
        return path

    flat = read_window(acqs[0], grid, _full(grid), dem=dem(0.0))
    # The no-DEM read interpolates exact positions (within 2.5e-4 px): a fraction of a DN.
    np.testing.assert_allclose(flat, full, rtol=0, atol=0.25 / 4095, equal_nan=True)
    # The simulated view has terrain parallax: 1000 m of height moves the image by pixels.
    high = read_window(acqs[0], grid, _full(grid), dem=dem(1000.0))
    ok = np.isfinite(high) & np.isfinite(full)
    assert np.abs(high[ok] - full[ok]).mean() > 0.01


def test_values_above_max_dn_are_an_input_error(clear) -> None:
    acqs, grid, _ = clear
    # Data reach 1023 (10 valid bits): a scale of 500 is exceeded in this window.
    low = dataclasses.replace(acqs[0], max_dn=500.0)
    with pytest.raises(InputError) as info:
        read_window(low, grid, Window(40, 40, 32, 32))
    message = str(info.value)
    assert acqs[0].path.name in message and "max_dn" in message and "dn_rule" in message


def test_bad_arguments(clear) -> None:
    acqs, grid, _ = clear
    with pytest.raises(ConfigError, match="resampling"):
        read_window(acqs[0], grid, Window(0, 0, 8, 8), resampling="bicubic-ish")
    with pytest.raises(ConfigError, match="bands"):
        read_window(acqs[0], grid, Window(0, 0, 8, 8), bands=[6])


@pytest.mark.filterwarnings("error")
def test_staging_reads_without_a_warning_to_silence(
    clear, geotiff_series: SimulatedProducts
) -> None:
    # Staging opens rasters in a worker's threads, where silencing a warning with
    # warnings.catch_warnings races the other threads; an L1A frame (RPCs only) and a GeoTIFF
    # must open with nothing to silence.
    acqs, grid, _ = clear
    read_window(acqs[0], grid, Window(0, 0, 8, 8))
    tiffs = discover_geotiffs(geotiff_series.paths)
    read_window(tiffs[0], derive_grid(tiffs), Window(0, 0, 8, 8))


def test_geotiff_series(geotiff_series: SimulatedProducts) -> None:
    acqs = discover_geotiffs(geotiff_series.paths)
    grid = derive_grid(acqs)
    for acq in acqs:
        out = read_window(acq, grid, _full(grid))
        with rasterio.open(acq.path) as src:
            data = src.read().astype(np.float32) / 65535
            # Same CRS and pixel grid: the file lands on the grid unchanged.
            col, row = ~grid.transform @ (src.transform.c, src.transform.f)
            r0, c0 = round(row), round(col)
            np.testing.assert_allclose(
                out[:, r0 : r0 + src.height, c0 : c0 + src.width], data, atol=1e-6
            )
            outside = np.ones(grid.shape, bool)
            outside[r0 : r0 + src.height, c0 : c0 + src.width] = False
            assert np.isnan(out[:, outside]).all()
        sub = read_window(acq, grid, Window(10, 20, 50, 40))
        np.testing.assert_allclose(sub, out[:, 20:60, 10:60], atol=1e-6, equal_nan=True)


def _exact(monkeypatch: pytest.MonkeyPatch, acq: Acquisition, grid: TargetGrid) -> np.ndarray:
    """The same read through GDAL's exact per-pixel RPC transformer instead of the lattice."""
    with monkeypatch.context() as patch:
        patch.setattr("pipeline.stage.warp.lattice_applies", lambda *args: False)
        return read_window(acq, grid, _full(grid))


# The holed copy is written as an L1A product is, with RPCs and no geotransform (set once the
# file is open, so rasterio warns as it creates it).
@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_lattice_warp_equals_gdal_exact_transformer(
    clear, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acqs, grid, _ = clear
    # A copy of one product with no-data holes (DN 0) inside the frame, to compare the
    # no-data rules too, not only the frame edges.
    holed = tmp_path / acqs[1].path.name
    with rasterio.open(acqs[1].path) as src:
        profile, data = src.profile, src.read()
        rpcs = src.rpcs
    rng = np.random.default_rng(3)
    for _ in range(40):
        r, c = rng.integers(0, data.shape[1] - 6, size=2)
        data[:, r : r + rng.integers(1, 6), c : c + rng.integers(1, 6)] = 0
    with rasterio.open(holed, "w", **profile) as dst:
        dst.write(data)
        dst.rpcs = rpcs
    for acq in (acqs[0], dataclasses.replace(acqs[1], path=holed)):
        fast = read_window(acq, grid, _full(grid))
        exact = _exact(monkeypatch, acq, grid)
        np.testing.assert_array_equal(np.isnan(fast), np.isnan(exact))
        assert np.isnan(fast).any() and np.isfinite(fast).any()
        # Positions within ~1e-4 px of the exact ones: a small fraction of one DN of 4095.
        np.testing.assert_allclose(fast, exact, rtol=0, atol=0.25 / 4095, equal_nan=True)
