"""The solve scopes as objects (:mod:`pipeline.solve.scopes`), and the setting that changes the
cube where it belongs: ``mask.keep_clear``, end to end in both scopes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr

from cloudcore.masks import CLEAR, HAZE, NODATA
from pipeline.config import Config, parse
from pipeline.config.solver import SCOPE_TRAITS
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.outputs.kept import FILLED, OBSERVED
from pipeline.plan import make_plan, short_band
from pipeline.run import run
from pipeline.solve.scopes import SCOPES, SceneScope, TileScope, scope_for


def _config(out: Path, paths: list[Path] | None = None, **sections: Any) -> Config:
    inputs = {"kind": "geotiff", "paths": [str(p) for p in paths or [out / "x.tif"]]}
    return parse({"inputs": inputs, "output": {"path": str(out)}, **sections}, Config)


def test_each_scope_value_has_its_object_and_traits() -> None:
    assert set(SCOPES) == set(SCOPE_TRAITS) == {"tile", "scene"}
    assert isinstance(scope_for(_config(Path("o")).solver), TileScope)
    scene = _config(Path("o"), solver={"scope": "scene"}).solver
    assert isinstance(scope_for(scene), SceneScope)
    # Refinement is off by default (held-out real clouds, docs/REAL-CLOUDS.md); tile only.
    assert not _config(Path("o")).solver.refines and not scene.refines
    assert _config(Path("o"), solver={"refine": True}).solver.refines


def test_keep_clear_is_a_mask_setting_and_the_old_key_still_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _config(Path("o")).mask.keep_clear  # on by default
    assert not _config(Path("o"), mask={"keep_clear": False}).mask.keep_clear
    old = {"inputs": {"kind": "geotiff", "paths": ["x.tif"]}}
    with caplog.at_level(logging.WARNING, logger="pipeline.config.run"):
        moved = parse({**old, "output": {"path": "o", "keep_clear": True}}, Config)
    assert moved.mask.keep_clear and "mask.keep_clear" in caplog.text
    with pytest.raises(ConfigError, match="both set"):
        parse(
            {**old, "output": {"path": "o", "keep_clear": True}, "mask": {"keep_clear": False}},
            Config,
        )
    with pytest.raises(ConfigError, match=r"output\.keep_clear: expected true or false"):
        parse({**old, "output": {"path": "o", "keep_clear": "maybe"}}, Config)


@pytest.mark.parametrize("scope", ["tile", "scene"])
def test_keep_clear_keeps_the_observation_where_the_mask_says_clear(
    scope: str, geotiff_series: SimulatedProducts, scheduler: str, tmp_path: Path
) -> None:
    """With ``mask.keep_clear`` the mask pass writes ``clear`` and ``provenance`` and the
    bands' COGs wait for it, in tile scope (outputs in the solve batch) and scene scope (a batch
    of their own): the COGs show the kept observations, as the cube does."""
    cfg = _config(
        tmp_path,
        geotiff_series.paths,
        tiling={"tile_size": 64, "overlap": 16},
        solver={"scope": scope},
        mask={"keep_clear": True},
        cluster={"kind": "address", "address": scheduler, "dashboard": False},
    )
    summary = run(cfg)
    assert summary.ok, summary.describe()
    cube = xr.open_zarr(tmp_path / "cube.zarr", consolidated=False)
    observed = xr.open_zarr(tmp_path / "work" / "input.zarr", consolidated=False).observed.values
    clear, provenance = cube.clear.values, cube.provenance.values
    codes = cube.mask.values[:, None]
    seen = np.isfinite(observed)
    # The observation is kept where the mask says clear or haze (mask.keep_haze, the default).
    said_clear = ((codes == CLEAR) | (codes == HAZE)) & seen
    assert said_clear.any() and not said_clear.all()
    np.testing.assert_array_equal(provenance == OBSERVED, said_clear)
    np.testing.assert_array_equal(clear[said_clear], observed[said_clear])
    modelled = (provenance == FILLED) | (provenance == NODATA)
    assert modelled[~said_clear].all()
    # A date is no data where its band did not observe: nothing is filled in for it.
    assert np.isnan(clear[~seen]).all() and (provenance[~seen] == NODATA).all()
    # The COGs hold the cube's clear layer, kept observations included (DN = round(clear·max)).
    max_dn = max(float(a.max_dn) for a in make_plan(cfg).acquisitions)
    band, date = 0, 0
    cog = sorted((tmp_path / "cog").glob(f"*_{cube.band.values[band]}.tif"))[date]
    with rasterio.open(cog) as src:
        dn = src.read(1).astype(np.float64)
    values = clear[date, band]
    finite = np.isfinite(values)
    assert np.abs(dn[finite] - values[finite] * max_dn).max() <= 0.5


def test_the_cube_token_and_attributes_are_spelt_as_before_keep_clear_moved(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    """``keep_clear`` moved into the mask section; the cube's identity and attributes did not,
    so cubes of earlier versions resume: the mask settings are dumped without it, and it
    follows as ``keep_clear=…`` (as when it was ``output.keep_clear``)."""
    import zarr

    from pipeline.ids import digest
    from pipeline.solve.cube import CUBE_TOKEN_ATTR, open_cube

    # The settings of then, written out (the defaults have changed since): the same token.
    before = {
        "cloud": 6.0,
        "haze": 4.0,
        "shadow": 3.0,
        "radius": 1,
        "keep_haze": False,
        "offset": 0,
        "white": 0,
        "white_cloud": 0,
        "shadow_near": 0,
        "shadow_flat": 0,
        "interpolate": False,
    }
    for keep in (False, True):
        mask = {**before, "keep_clear": keep}
        cfg = _config(tmp_path / str(keep), geotiff_series.paths, mask=mask)
        plan = make_plan(cfg)
        settings = '{"cloud":6.0,"haze":4.0,"shadow":3.0,"radius":1}' + f"keep_clear={keep}"
        blended = [plan.blended_id(b) for b in plan.bands]
        assert plan.cube_token == digest([*blended, settings])
        attrs = zarr.open_group(str(open_cube(plan)), mode="r").attrs
        assert attrs[CUBE_TOKEN_ATTR] == plan.cube_token
        assert attrs["mask"] == {"cloud": 6.0, "haze": 4.0, "shadow": 3.0, "radius": 1}
        assert attrs["keep_clear"] is keep
    # A shadow's edge, where it is on, is another cube, and the cube says so.
    edged = make_plan(
        _config(tmp_path / "edge", geotiff_series.paths, mask={**mask, "shadow_edge": 1.5})
    )
    assert edged.cube_token != plan.cube_token
    attrs = zarr.open_group(str(open_cube(edged)), mode="r").attrs
    assert (attrs["mask"]["shadow_edge"], attrs["mask"]["edge_reach"]) == (1.5, 3)
    # A shadow beside its cloud likewise.
    near = make_plan(
        _config(tmp_path / "near", geotiff_series.paths, mask={**mask, "shadow_near": 1.5})
    )
    assert near.cube_token not in {plan.cube_token, edged.cube_token}
    attrs = zarr.open_group(str(open_cube(near)), mode="r").attrs
    assert (attrs["mask"]["shadow_near"], attrs["mask"]["near_reach"]) == (1.5, 16)
    # White clouds likewise: on, another cube; another ratio, another again; recorded.
    flat = {**mask, "white_cloud": 3}
    tokens = {
        make_plan(_config(tmp_path / f"w{k}", geotiff_series.paths, mask=m)).cube_token
        for k, m in enumerate([mask, flat, {**flat, "white_cloud_ratio": 0.8}])
    }
    assert len(tokens) == 3
    clouds = make_plan(_config(tmp_path / "wc", geotiff_series.paths, mask=flat))
    attrs = zarr.open_group(str(open_cube(clouds)), mode="r").attrs
    assert (attrs["mask"]["white_cloud"], attrs["mask"]["white_cloud_ratio"]) == (3, 0.7)
    assert "white" not in attrs["mask"] and attrs["mask"]["white_band"] == "B2"


def test_the_whiteness_test_reads_the_band_of_shortest_wavelength(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    """GF-4 PMS's blue B2 (not the pan band B1, which spans 0.45–0.90 µm) unless another band
    is named; a name the run does not have is a configuration error naming the key. The cube
    records the test only when it is on, so cubes of earlier versions resume."""
    import zarr

    from pipeline.solve.cube import open_cube

    plan = make_plan(_config(tmp_path / "a", geotiff_series.paths))
    assert plan.bands[:2] == ("B1", "B2") and plan.bands[plan.short_band] == "B2"
    off = make_plan(
        _config(tmp_path / "b", geotiff_series.paths, mask={"white": 0, "white_cloud": 0})
    )
    b3 = make_plan(_config(tmp_path / "c", geotiff_series.paths, mask={"white_band": "B3"}))
    assert b3.bands[b3.short_band] == "B3"
    assert len({plan.cube_token, off.cube_token, b3.cube_token}) == 3

    def mask_attrs(p: Any) -> Any:
        return zarr.open_group(str(open_cube(p)), mode="r").attrs["mask"]

    assert "white" not in mask_attrs(off) and "white_band" not in mask_attrs(off)
    assert mask_attrs(plan)["white"] == 0.25 and mask_attrs(plan)["white_band"] == "B2"
    assert mask_attrs(b3)["white_band"] == "B3"
    with pytest.raises(ConfigError, match=r"mask.white_band: 'B9' is not one of .*B1, B2"):
        make_plan(_config(tmp_path / "d", geotiff_series.paths, mask={"white_band": "B9"}))
    assert short_band(("red", "nir")) == 0 and short_band(("B5", "B4", "B1")) == 1


def test_a_whiteness_test_on_bands_of_unknown_wavelength_says_which_it_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pipeline.plan import _short_band

    with caplog.at_level(logging.WARNING, logger="pipeline.plan"):
        _short_band(_config(Path("o")), ("B1", "B2"))  # GF-4's: known
        _short_band(_config(Path("o"), mask={"white_band": "nir"}), ("nir", "red"))
        _short_band(_config(Path("o"), mask={"white": 0, "white_cloud": 0}), ("nir", "red"))
        assert not caplog.records
        _short_band(_config(Path("o")), ("nir", "red"))
    assert "reads the first band, 'nir', as the shortest; set mask.white_band" in caplog.text


def _solve_batch(cfg: Config, tasks: dict[str, list[Any]]) -> tuple[Any, Any, bool]:
    """The tasks a scope puts in its solve batch (recorded, not run), and the outputs' tasks."""
    from pipeline.outputs.tasks import ProductTasks
    from pipeline.solve.scopes import SolveContext

    plan = make_plan(cfg)
    scope = scope_for(cfg.solver)
    outputs = ProductTasks(plan, scope.record_markers(plan))
    cube = plan.layout.cube_partial

    class Recorder:
        """Keeps each batch instead of running it (nothing runs: no marker is written)."""

        def __init__(self) -> None:
            self.counts = dict.fromkeys(("solved", "solve_skipped", "blended"), 0)
            self.failures: list[Any] = []

        def run_batch(
            self, client: Any, jobs: list[Any], stage: str, *, held: bool = True
        ) -> dict[str, Any]:
            tasks[stage] = jobs
            return {}

        def check(self, stage: str, failed: dict[str, BaseException]) -> None:
            assert not failed

    ctx = SolveContext(None, plan, cube, set(), Recorder())
    joined = scope.solve(ctx, lambda after, solving: outputs.with_solve(cube, after, solving))
    return plan, outputs, joined


@pytest.mark.parametrize("keep", [False, True])
def test_tile_scope_batch_orders_rows_seams_cogs_then_the_mask_chain(
    keep: bool, geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    """The dependencies and priorities the phase loop relies on in tile scope: a band's COGs
    after its rows and seams (after the mask pass with ``mask.keep_clear``, which changes
    ``clear``), the mask pass after every solve task, the mask COGs and quicklooks after it."""
    from pipeline.plan import BAND_COG_PRIORITY, MASK_PRIORITY, ROW_PRIORITY, SEAM_PRIORITY

    cfg = _config(
        tmp_path,
        geotiff_series.paths,
        tiling={"tile_size": 64, "overlap": 16},
        mask={"keep_clear": keep},
    )
    recorded: dict[str, list[Any]] = {}
    plan, _, joined = _solve_batch(cfg, recorded)
    assert joined and list(recorded) == ["solve"]
    jobs = recorded["solve"]
    by_stage: dict[str, list[Any]] = {}
    for t in jobs:
        by_stage.setdefault(t.stage or "solve", []).append(t)
    rows, seams, masks = by_stage["solve"], by_stage["blend"], by_stage["mask"]
    n_bands, tiles = len(plan.bands), plan.tiles
    assert len(rows) == n_bands * tiles.n_rows and len(seams) == n_bands * (tiles.n_rows - 1)
    assert {t.priority for t in rows} == {ROW_PRIORITY}
    assert {t.priority for t in seams} == {SEAM_PRIORITY}
    solving = {t.key for t in rows + seams}
    assert all(set(t.after) == solving for t in masks)
    assert {t.priority for t in masks} == {MASK_PRIORITY} and len(masks) == tiles.n_rows
    cogs = {t.key: t for t in by_stage["products"] if t.key.startswith("cog-B")}
    assert len(cogs) == n_bands and {t.priority for t in cogs.values()} == {BAND_COG_PRIORITY}
    mask_keys = {t.key for t in masks}
    for b, band in enumerate(plan.bands):
        own = {t.key for t in rows + seams if t.args[0].band_index == b}
        assert set(cogs[f"cog-{band}"].after) == (mask_keys if keep else own)
    # Solve tasks first, then the bands' COGs (unless they wait for the mask), then the mask
    # chain: the order in the batch breaks ties between tasks of one priority.
    stages = [t.stage or "solve" for t in jobs]
    assert stages.index("mask") > max(i for i, s in enumerate(stages) if s in ("solve", "blend"))
    last = [t for t in by_stage["products"] if not t.key.startswith("cog-B")]
    assert {t.key for t in last} >= {"cog-mask"} and all(set(t.after) >= mask_keys for t in last)


@pytest.mark.parametrize("keep", [False, True])
def test_scene_scope_leaves_the_outputs_to_a_batch_of_their_own(
    keep: bool, geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    cfg = _config(
        tmp_path,
        geotiff_series.paths,
        tiling={"tile_size": 64, "overlap": 0},
        solver={"scope": "scene"},
        mask={"keep_clear": keep},
    )
    from pipeline.outputs.tasks import ProductTasks

    plan = make_plan(cfg)
    outputs = ProductTasks(plan, SceneScope().record_markers(plan))
    tasks = outputs.after_solve(plan.layout.cube_partial)
    masks = {t.key for t in tasks if t.stage == "mask"}
    assert len(masks) == plan.tiles.n_rows and all(
        t.after == () for t in tasks if t.stage == "mask"
    )
    cogs = [t for t in tasks if t.key.startswith("cog-B")]
    assert len(cogs) == len(plan.bands)
    assert all(set(t.after) == (masks if keep else set()) for t in cogs)
