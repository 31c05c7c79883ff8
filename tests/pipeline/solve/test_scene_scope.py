"""Scene scope (``solver.scope: scene``): one exact aATM per band, distributed over the tiles.

Real runs on a real LocalCluster and on a ``dask scheduler`` with ``dask worker`` processes,
real Zarr stores and GeoTIFFs. The cube must equal ``cloudcore.decompose`` of each whole band
(staged in ``input.zarr``), its ground capped (``cloudcore.cap_ground``), entry by entry to the
bound of ``tests/cloudcore/tolerances.py``, with the same iteration count, whatever runs it; a
run killed with ``kill -9`` resumes band by band.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import rasterio
import zarr

import cloudcore
from pipeline.config import Config, SolverConfig, parse
from pipeline.errors import ConfigError
from pipeline.grid.tiling import TileGrid
from pipeline.inputs.gf4 import discover_gf4
from pipeline.inputs.synthetic import SimulatedProducts, make_geotiff_series
from pipeline.plan import make_plan, tile_states
from pipeline.run import run
from pipeline.solve.scene_scope import dn_scale, partition
from tests.cloudcore.tolerances import scene_bound
from tests.pipeline.processes import dask_cli_cluster
from tests.pipeline.runs import (
    assert_identical,
    cli,
    markers,
    outputs,
    published,
    run_and_kill,
    write_config,
)

SIZE, TILE, N_DATES, N_BANDS = 96, 32, 5, 5
N_TILES = (SIZE // TILE) ** 2
SHORT_DATE, SHORT_FROM = 2, 40  # that date's footprint ends at column 40
BAND_MARKER = re.compile(r"blended-B\d-[0-9a-f]{16}\.json")


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """5 dates of 96² px on one grid; date 2 has no data right of column 40."""
    products = make_geotiff_series(
        tmp_path_factory.mktemp("scene_series"), n_dates=N_DATES, size=SIZE, seed=6, max_crop_px=0
    )
    with rasterio.open(products.paths[SHORT_DATE], "r+") as dst:
        dn = dst.read()
        dn[:, :, SHORT_FROM:] = 0  # nodata
        dst.write(dn)
    return products


def _config(out: Path, paths: list[Path], **cluster: Any) -> dict[str, Any]:
    return {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths]},
        "output": {"path": str(out), "quicklooks": False},
        "tiling": {"tile_size": TILE, "overlap": 8},
        # aATM with λ̂* (the paper's solver), compared below with decompose of the whole band,
        # its ground capped at each pixel's median date (cloudcore.cap_ground)
        "solver": {"scope": "scene", "method": "aatm", "lam": "star", "cap_ground": True},
        # The solved layers as the solver wrote them (keep_clear would put observations in).
        "mask": {"keep_clear": False},
        "cluster": {"dashboard": False, "n_workers": 2, "threads_per_worker": 1, **cluster},
    }


@pytest.fixture(scope="module")
def local_run(series: SimulatedProducts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scene_local") / "out"
    summary = run(parse(_config(out, series.paths), Config))
    assert summary.ok, summary.describe()
    assert summary.solved == N_TILES * N_BANDS
    return out


def _band_markers(out: Path) -> list[str]:
    return [k for k in markers(out) if BAND_MARKER.fullmatch(k)]


def test_scope_is_tile_by_default_and_checked(tmp_path: Path) -> None:
    base = {"inputs": {"kind": "simulated"}, "output": {"path": str(tmp_path)}}
    assert parse(base, Config).solver.scope == "tile"
    with pytest.raises(ConfigError) as bad:
        parse({**base, "solver": {"scope": "band"}}, Config)
    message = str(bad.value)
    assert "\n" not in message
    assert "solver.scope" in message and "'tile' or 'scene'" in message
    with pytest.raises(
        ConfigError, match="scope 'scene' solves aatm, aatm-shadow, rpca or nnrpca, not atm"
    ):
        parse({**base, "solver": {"scope": "scene", "method": "atm"}}, Config)
    with pytest.raises(ConfigError, match=r"solver\.refine is done per tile"):
        parse({**base, "solver": {"scope": "scene", "refine": True}}, Config)
    scene = parse({**base, "solver": {"scope": "scene"}}, Config).solver
    assert scene.refine is False and not scene.refines  # left out: off (in every scope)


def test_partition_is_contiguous_and_balanced() -> None:
    tiles = list(TileGrid(1000, 1000, 256, 0))  # 16 tiles, the last row and column narrower
    parts = partition(tiles, 3)
    assert [t for p in parts for t in p] == tiles
    pixels = [sum(t.core.height * t.core.width for t in p) for p in parts]
    assert max(pixels) - min(pixels) <= 256 * 256
    assert len(partition(tiles[:2], 5)) == 2


def test_dn_scale_only_where_every_date_is_dn_over_one_max_dn(
    gf4_products: SimulatedProducts, tmp_path: Path
) -> None:
    acqs = discover_gf4(gf4_products.paths[:3], extract_dir=tmp_path)
    assert dn_scale(acqs) == acqs[0].max_dn
    assert dn_scale([acqs[0], dataclasses.replace(acqs[1], max_dn=4095.0), acqs[2]]) is None
    bands = len(acqs[1].bands)
    radiance = dataclasses.replace(acqs[1], scale=(0.1,) * bands, offset=(0.0,) * bands)
    assert dn_scale([acqs[0], radiance, acqs[2]]) is None


def test_cube_equals_whole_band_decompose(local_run: Path) -> None:
    observed = np.asarray(
        zarr.open_array(store=str(local_run / "work" / "input.zarr"), path="observed")[...]
    )
    n, bands, h, w = observed.shape
    assert (n, bands) == (N_DATES, N_BANDS)
    assert np.isnan(observed[SHORT_DATE, :, :, SHORT_FROM:]).all()  # the short footprint
    table = pd.read_csv(local_run / "diagnostics.csv")
    assert len(table) == N_TILES * N_BANDS
    for b in range(bands):
        D = observed[:, b].reshape(n, -1).T
        # The default's scale × λ̂* of the whole band, not of a tile.
        lam = SolverConfig().lam_scale * cloudcore.lambda_star(h * w, n)
        # To the pipeline's tolerance and growth of μ (solver.tol, solver.rho), which differ
        # from cloudcore's defaults.
        solver = SolverConfig()
        ref = cloudcore.decompose(
            D, "aatm", lam=lam, mask=np.isfinite(D), tol=solver.tol, rho=solver.rho
        )
        rows = table[table.band == f"B{b + 1}"]
        assert set(rows.iterations) == {ref.iterations}
        assert np.allclose(rows.lam, lam, rtol=1e-9)
        ground, cloud = ref.ground, ref.C.copy()
        cloudcore.cap_ground(ground, cloud, np.isfinite(D))
        layers = (ground, cloud, ref.N)
        for name, expected in zip(("clear", "cloud", "haze"), layers, strict=True):
            array = zarr.open_array(store=str(local_run / "cube.zarr"), path=name, mode="r")
            got = np.asarray(array[:, b]).reshape(n, -1).T
            assert np.array_equal(np.isnan(got), np.isnan(expected))
            m = ~np.isnan(expected)
            # In units of D, to the iterations' float32 rounding plus the refit's resolution
            # (tests/cloudcore/tolerances.py); the same bound holds the RMS difference.
            bound = scene_bound(ref.iterations, h * w, np.float32)
            # The cap moves L − median into C: two entries' errors in one.
            bound *= 2 if name == "cloud" else 1
            err = float(np.abs(got[m] - expected[m]).max())
            rms = float(np.linalg.norm(got[m] - expected[m])) / np.sqrt(m.sum())
            assert err <= bound and rms <= bound, (name, b, err, rms, bound)
    marker = json.loads(next((local_run / "work" / "done").glob("blended-B1-*.json")).read_text())
    assert marker["scope"] == "scene" and marker["shards"] == 2
    assert marker["iterations"] == int(table[table.band == "B1"].iterations.iloc[0])
    # The values are DN / max_dn: the shards held D as 16-bit DN (cloudcore.scene.Block), at
    # most 23 bytes an entry with C_next and the masks (24 without a mask if D were floats).
    assert sum(marker["state_bytes"]) <= 23 * n * h * w


def test_plan_and_status_count_scene_bands(local_run: Path, series: SimulatedProducts) -> None:
    cfg = parse(_config(local_run, series.paths), Config)
    states = tile_states(make_plan(cfg))
    assert {s.state for s in states if s.stage == "solve"} == {"done"}
    config = write_config(local_run.parent / "c.yaml", _config(local_run, series.paths))
    done = cli(config, "status")
    assert f"solve: {N_TILES * N_BANDS}/{N_TILES * N_BANDS} tiles done" in done.stdout, done.stdout


@pytest.fixture
def dask_processes(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and ``dask worker --nworkers 2`` on 127.0.0.1."""
    with dask_cli_cluster(tmp_path, n_workers=2) as address:
        yield address


def test_existing_scheduler_gives_the_same_cube(
    series: SimulatedProducts, tmp_path: Path, dask_processes: str, local_run: Path
) -> None:
    out = tmp_path / "out"
    cfg = _config(out, series.paths, kind="address", address=dask_processes)
    summary = run(parse(cfg, Config))
    assert summary.ok, summary.describe()
    # Two shards in worker order either way: the same sums in the same order, bit for bit.
    assert_identical(outputs(out), outputs(local_run))


@pytest.mark.slow
def test_failed_band_is_listed_and_only_it_is_redone(
    series: SimulatedProducts,
    tmp_path: Path,
    local_run: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    cfg = parse(_config(out, series.paths), Config)
    monkeypatch.setenv("CLOUDREMOVAL_FAIL_TILES", "B3-r01c01")  # read by the local workers
    broken = run(cfg)
    assert not broken.ok and [f.key[:10] for f in broken.failures] == ["blended-B3"]
    assert "injected failure" in broken.failures[0].message
    assert published(out) == []
    assert len(_band_markers(out)) == N_BANDS - 1
    monkeypatch.delenv("CLOUDREMOVAL_FAIL_TILES")
    before = markers(out)
    fixed = run(cfg)
    assert fixed.ok and (fixed.solved, fixed.solve_skipped) == (N_TILES, N_TILES * (N_BANDS - 1))
    assert {k: v for k, v in markers(out).items() if k in before} == before
    assert_identical(outputs(out), outputs(local_run))


@pytest.mark.slow
def test_kill9_mid_band_resumes_at_band_level(
    series: SimulatedProducts, tmp_path: Path, local_run: Path
) -> None:
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.yaml", _config(out, series.paths))
    # CLOUDREMOVAL_TASK_DELAY (0.25 s per tile as a shard loads it) makes each band take over
    # a second, so the kill lands after two bands and before the last.
    run_and_kill(cfg, out, lambda: len(_band_markers(out)) >= 2, "2 bands solved")
    done = _band_markers(out)
    assert 2 <= len(done) < N_BANDS and published(out) == []
    before = markers(out)
    final = cli(cfg, "run")
    assert final.returncode == 0, final.stderr
    counts = re.search(r"solved (\d+) \(skipped (\d+)\)", final.stdout)
    assert counts is not None, final.stdout
    # The bands done before the kill are skipped; the one in flight is redone whole.
    assert int(counts.group(2)) == N_TILES * len(done)
    assert int(counts.group(1)) == N_TILES * (N_BANDS - len(done))
    assert {k: v for k, v in markers(out).items() if k in before} == before
    assert_identical(outputs(out), outputs(local_run))


@pytest.mark.parametrize("ground", [True, False])
def test_shards_write_the_ground_only_when_asked(tmp_path: Path, ground: bool) -> None:
    """``ShardSpec.ground`` (Config.rows_write_ground): without it a shard writes every solved
    layer but the ground, which stays unwritten (no chunk, no data); the layers it writes are
    the same either way (the cap, which moves the ground's excess into the cloud, still runs)."""
    from datetime import datetime

    from affine import Affine

    from cloudcore.catalog import LAYERS
    from cloudcore.scene import LocalShards
    from pipeline.grid.target import TargetGrid
    from pipeline.solve.scene_scope import SceneShard, ShardSpec, solve_shards
    from pipeline.store.cube import create_store

    n, h, w, tile = 5, 40, 48, 16
    grid = TileGrid(h, w, tile, 0)
    rng = np.random.default_rng(3)
    values = (0.3 + 0.1 * rng.random((n, 1, h, w))).astype(np.float32)
    values[1, :, 5:20, 10:30] += 0.5  # a cloud
    source = zarr.create_array(
        store=str(tmp_path / "input.zarr"), name="observed", shape=values.shape, dtype="float32"
    )
    source[...] = values
    cubes = {}
    for written in (True, ground):
        cube = tmp_path / f"cube-{written}.zarr"
        create_store(
            cube,
            TargetGrid("EPSG:32650", Affine(50, 0, 440_000, 0, -50, 4_420_000), w, h),
            times=[datetime(2020, 6, d + 1) for d in range(n)],
            bands=["B1"],
            variables=LAYERS,
            tile_size=tile,
            chunk_rows=grid.cube_chunk_rows,
            attrs={},
        )
        tiles = list(grid)
        spec = ShardSpec(
            input_store=str(tmp_path / "input.zarr"),
            band_index=0,
            tiles=tuple(tiles),
            tile_ids=tuple(t.name for t in tiles),
            dtype="float32",
            threads=1,
            solver=SolverConfig(),
            ground=written,
        )
        shards = LocalShards([SceneShard(spec)])
        solve_shards(shards, h * w, n, SolverConfig())
        shards.map("write", str(cube), grid.cube_chunk_rows)
        cubes[written] = {
            name: np.asarray(zarr.open_array(store=str(cube), path=name)[...])
            for name in ("clear", "cloud", "haze")
        }
        assert (cube / "clear" / "c").is_dir() == written
    assert np.isfinite(cubes[True]["clear"]).all()
    if not ground:
        assert np.isnan(cubes[False]["clear"]).all()
    for name in ("cloud", "haze"):
        assert cubes[ground][name].tobytes() == cubes[True][name].tobytes()
