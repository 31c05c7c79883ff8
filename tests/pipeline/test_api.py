"""``pipeline.remove_clouds``: an xarray DataArray through the pipeline's own run, on a real
LocalCluster, against the cube of a run of the same series written as GeoTIFFs."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import rasterio
import rioxarray  # noqa: F401
import xarray as xr
from affine import Affine
from distributed import Client, LocalCluster, default_client

import pipeline
from pipeline import api
from pipeline.config import Config, parse
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic.ground import cloud_fields, load_demo_truth, truth_bands
from pipeline.run import run

SIZE, N_DATES, BANDS = 96, 5, ("blue", "green", "red")
SETTINGS: dict[str, Any] = {"tiling": {"tile_size": 64, "overlap": 16}, "solver": {"max_iter": 200}}
CRS = "EPSG:32650"
TRANSFORM = Affine(50.0, 0.0, 440_000.0, 0.0, -50.0, 4_420_000.0)
VARIABLES = ["clear", "cloud", "haze", "shadow", "mask", "provenance"]


@pytest.fixture(scope="module")
def series() -> tuple[np.ndarray, np.ndarray]:
    """(observed, truth): 5 dates of 3 bands of the demo image under moving clouds, 96² px,
    float32 in [0, 1]; date 0 has no data in its top 3 rows."""
    truth = truth_bands(load_demo_truth(), SIZE)[1:4]  # blue, green, red
    clouds = cloud_fields((SIZE, SIZE), N_DATES, "moving", np.random.default_rng(7))[:, None]
    observed = (clouds + (1 - clouds) * truth).astype(np.float32)
    observed[0, :, :3] = np.nan
    return observed, truth


def _georeferenced(values: Any, times: pd.DatetimeIndex) -> xr.DataArray:
    x = TRANSFORM.c + TRANSFORM.a * (np.arange(SIZE) + 0.5)
    y = TRANSFORM.f + TRANSFORM.e * (np.arange(SIZE) + 0.5)
    data = xr.DataArray(
        values,
        dims=("time", "band", "y", "x"),
        coords={"time": times, "band": list(BANDS), "y": y, "x": x},
    )
    return data.rio.write_crs(CRS)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    """The current Dask client of one test (none outside it)."""
    with Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def reference(
    series: tuple[np.ndarray, np.ndarray],
    cluster: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> xr.Dataset:
    """The cube of a pipeline run (the CLI's code path) of the series written as GeoTIFFs."""
    folder = tmp_path_factory.mktemp("reference")
    paths = []
    for k in range(N_DATES):
        path = folder / f"scene_202006{k + 1:02d}.tif"
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=SIZE,
            height=SIZE,
            count=len(BANDS),
            dtype="float32",
            crs=CRS,
            transform=TRANSFORM,
        ) as dst:
            dst.write(series[0][k])
            dst.descriptions = BANDS
        paths.append(str(path))
    config = {
        "inputs": {"kind": "geotiff", "paths": paths},
        "output": {"path": str(folder / "out"), "quicklooks": False},
        "cluster": {"kind": "address", "address": cluster.scheduler_address, "dashboard": False},
        **SETTINGS,
    }
    assert run(parse(config, Config)).ok
    return xr.open_zarr(folder / "out" / "cube.zarr", consolidated=False)


def _clients_added(client: Client) -> int:
    def count(dask_scheduler: Any) -> int:
        events = dask_scheduler.get_events("all")
        return sum(isinstance(e, dict) and e.get("action") == "add-client" for _, e in events)

    return int(client.run_on_scheduler(count))


def _same_bits(result: xr.Dataset, cube: xr.Dataset) -> None:
    for name in ("clear", "cloud", "haze", "mask", "provenance"):
        got, want = result[name].values, cube[name].values
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    cloud = result.cloud.values  # the default solver has no shadow layer: its shadow is 0
    np.testing.assert_array_equal(result.shadow.values, np.where(np.isnan(cloud), np.nan, 0))


def test_dask_input_runs_on_the_current_client_and_equals_a_run(
    series: tuple[np.ndarray, np.ndarray],
    client: Client,
    reference: xr.Dataset,
    tmp_path: Path,
) -> None:
    times = pd.date_range("2020-06-01", periods=N_DATES, freq="D")
    data = _georeferenced(da.from_array(series[0], chunks=(N_DATES, 3, 48, 48)), times)
    before = _clients_added(client)
    result = pipeline.remove_clouds(data, workdir=tmp_path, **SETTINGS)
    assert _clients_added(client) == before + 1  # the run connected to this cluster
    assert default_client() is client  # and left the caller's client current
    assert list(result.data_vars) == VARIABLES
    assert all(isinstance(result[v].data, da.Array) for v in VARIABLES)
    assert result.clear.dims == ("time", "band", "y", "x") and result.mask.dims[0] == "time"
    for dim in ("time", "band", "y", "x"):
        np.testing.assert_array_equal(result[dim].values, data[dim].values)
        np.testing.assert_array_equal(result[dim].values, reference[dim].values)
    assert result.rio.crs == CRS and result.clear.rio.crs == CRS
    assert result.rio.transform().almost_equals(TRANSFORM)
    _same_bits(result, reference)  # bit for bit: the same tiles, halos and blending
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the series and work/ removed


def test_south_up_numpy_input_comes_back_south_up(
    series: tuple[np.ndarray, np.ndarray],
    client: Client,
    reference: xr.Dataset,
    tmp_path: Path,
) -> None:
    times = pd.date_range("2020-06-01", periods=N_DATES, freq="D")
    data = _georeferenced(series[0], times).isel(y=slice(None, None, -1))
    assert data.rio.transform().e > 0
    result = pipeline.remove_clouds(data, workdir=tmp_path, **SETTINGS)
    np.testing.assert_array_equal(result.y.values, data.y.values)
    assert result.rio.crs == CRS
    _same_bits(result.isel(y=slice(None, None, -1)), reference)


def test_dn_input_without_crs_on_the_pipelines_own_cluster(
    series: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ValueError):
        default_client()  # no current client: the run starts its own LocalCluster
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the default workdir goes
    observed, truth = series
    dn = np.where(np.isnan(observed), np.nan, np.round(observed * 1023))  # NaN: no data
    # Times of day, UTC: they come back as given; coordinates of no CRS, y increasing.
    times = pd.DatetimeIndex([f"2021-03-0{k + 1} 02:3{k}:15" for k in range(N_DATES)])
    data = xr.DataArray(
        dn,
        dims=("time", "band", "y", "x"),
        coords={"time": times, "band": [4, 3, 2], "y": np.arange(SIZE), "x": np.arange(SIZE)},
    ).transpose("band", "time", "x", "y")  # any order of the dims
    result = pipeline.remove_clouds(
        data, max_dn=1023, cluster={"n_workers": 2, "threads_per_worker": 1}, **SETTINGS
    )
    assert result.rio.crs is None and "spatial_ref" not in result.coords
    assert list(result.data_vars) == VARIABLES
    assert result.clear.dims == ("time", "band", "y", "x")
    for dim in ("time", "band", "y", "x"):
        np.testing.assert_array_equal(result[dim].values, data[dim].values)
    clear, provenance = result.clear.values, result.provenance.values
    assert np.isnan(clear[0, :, :3]).all() and (provenance[0, :, :3] == 255).all()
    assert set(np.unique(result.mask.values)) <= {0, 1, 2, 3, 255}
    # Clouds removed: the clear series is nearer the ground than the observations.
    cloudy = observed > truth + 0.1
    assert cloudy.mean() > 0.05
    error = np.abs(np.where(cloudy, clear, np.nan) - truth)
    assert np.nanmean(error) < 0.25 * np.nanmean(np.abs(observed - truth)[cloudy])
    workdir = Path(result.attrs["workdir"])
    assert workdir.parent == tmp_path and (workdir / "run" / "cube.zarr").is_dir()  # kept


@pytest.mark.parametrize("chunks", [None, (N_DATES, 3, 48, 48), (1, 3, SIZE, SIZE), (2, 1, 10, 40)])
def test_series_is_written_in_blocks_of_whole_chunks(
    chunks: tuple[int, ...] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api, "_STRIP_BYTES", 3 * 3 * SIZE * 8 * 25)  # 25 rows of 3 dates
    values = np.zeros((N_DATES, 3, SIZE, SIZE))
    data = xr.DataArray(values if chunks is None else da.from_array(values, chunks=chunks))
    covered = np.zeros((N_DATES, SIZE), int)
    for dates, rows in api._blocks(data):
        covered[dates, rows] += 1
        if chunks is not None:  # whole chunks: its edges are chunk edges
            t_edges, y_edges = (np.cumsum((0, *c)) for c in (data.chunks[0], data.chunks[2]))
            assert {dates.start, dates.stop} <= set(t_edges)
            assert {rows.start, rows.stop} <= set(y_edges)
    assert (covered == 1).all()  # every row of every date once


def _bad(**coords: Any) -> xr.DataArray:
    values = np.full((3, 2, 8, 8), 0.5)
    return xr.DataArray(
        values, dims=("time", "band", "y", "x"), coords={"time": pd.date_range("2020", periods=3)}
    ).assign_coords(coords)


@pytest.mark.parametrize(
    ("data", "kwargs", "error", "says"),
    [
        (_bad().isel(band=0), {}, ValueError, "(time, band, y, x)"),
        (_bad().rename(y="lat"), {}, ValueError, "rename"),
        (_bad() * 1000, {}, ValueError, "pass max_dn="),
        (_bad() - 1, {}, ValueError, "outside [0, 1]"),
        (_bad() * 1000.5, {"max_dn": 4095}, ValueError, "whole DN"),
        (_bad() * 10000, {"max_dn": 4095}, ValueError, "raise max_dn"),
        (_bad().isel(time=[0]), {}, ValueError, "at least 2"),
        (_bad().isel(time=[1, 0, 2]), {}, ValueError, "data.sortby('time')"),
        (_bad(time=[1, 2, 3]), {}, ValueError, "it needs datetimes"),
        (_bad(), {"grid": {"resolution": 10}}, ValueError, "rio.reproject"),
        (_bad(), {"solver": {"methd": "aatm"}}, ConfigError, "solver.methd"),
    ],
)
def test_bad_input_says_what_to_change(
    data: xr.DataArray,
    kwargs: dict[str, Any],
    error: type[Exception],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(error) as caught:
        pipeline.remove_clouds(data, **kwargs)
    message = str(caught.value)
    assert says in message and "\n" not in message, message
    assert not list(tmp_path.iterdir())  # no working folder left behind


def test_import_pipeline_does_not_load_the_api() -> None:
    code = "import sys, pipeline; assert 'pipeline.api' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    from pipeline.api import remove_clouds

    assert pipeline.remove_clouds is remove_clouds and "remove_clouds" in dir(pipeline)


@pytest.mark.slow
def test_the_demo_series_through_the_api_equals_the_clis_cube(
    client: Client, tmp_path: Path
) -> None:
    """The demo's series (``configs/demo.yaml``'s ``inputs.kind: simulated``, 7 dates, reduced
    to 192 px) run by ``python -m pipeline run``; its staged dates, opened as a Dask-backed
    DataArray, through ``remove_clouds`` with the same settings: the same cube, bit for bit."""
    from pipeline.cli import main
    from tests.pipeline.runs import write_config

    settings = {"tiling": {"tile_size": 96, "overlap": 16}}  # 3 × 3 tiles a band
    cli_out = tmp_path / "cli"
    config = {
        "inputs": {"kind": "simulated", "n_dates": 7, "size": 192, "seed": 0},
        "output": {"path": str(cli_out), "quicklooks": False},
        "cluster": {"kind": "address", "address": client.scheduler.address},
        **settings,
    }
    assert main(["-q", "run", str(write_config(tmp_path / "demo.yaml", config))]) == 0
    cube = xr.open_zarr(cli_out / "cube.zarr", consolidated=False)
    staged = xr.open_zarr(cli_out / "work" / "input.zarr", consolidated=False)["observed"]
    assert isinstance(staged.data, da.Array)
    data = staged.rio.write_crs(cube.rio.crs)
    result = pipeline.remove_clouds(data, workdir=tmp_path / "api", **settings)
    for name in ("clear", "cloud", "haze", "mask", "provenance"):
        got, want = result[name].values, cube[name].values
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    assert result.rio.crs == cube.rio.crs
