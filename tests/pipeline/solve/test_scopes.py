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

from cloudcore.masks import CLEAR, NODATA
from pipeline.config import Config, parse
from pipeline.config.run import SCOPE_TRAITS
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.outputs.mask_layer import FILLED, OBSERVED
from pipeline.plan import make_plan
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
    # Refinement by default where the scope refines, never where it cannot.
    assert _config(Path("o")).solver.refines and not scene.refines


def test_keep_clear_is_a_mask_setting_and_the_old_key_still_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert not _config(Path("o")).mask.keep_clear
    assert _config(Path("o"), mask={"keep_clear": True}).mask.keep_clear
    old = {"inputs": {"kind": "geotiff", "paths": ["x.tif"]}}
    with caplog.at_level(logging.WARNING, logger="pipeline.config.run"):
        moved = parse({**old, "output": {"path": "o", "keep_clear": True}}, Config)
    assert moved.mask.keep_clear and "mask.keep_clear" in caplog.text
    with pytest.raises(ConfigError, match="both set"):
        parse(
            {**old, "output": {"path": "o", "keep_clear": True}, "mask": {"keep_clear": False}},
            Config,
        )


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
    said_clear = (cube.mask.values == CLEAR)[:, None] & np.isfinite(observed)
    assert said_clear.any() and not said_clear.all()
    np.testing.assert_array_equal(provenance == OBSERVED, said_clear)
    np.testing.assert_array_equal(clear[said_clear], observed[said_clear])
    modelled = (provenance == FILLED) | (provenance == NODATA)
    assert modelled[~said_clear].all()
    # The COGs hold the cube's clear layer, kept observations included (DN = round(clear·max)).
    max_dn = max(float(a.max_dn) for a in make_plan(cfg).acquisitions)
    band, date = 0, 0
    cog = sorted((tmp_path / "cog").glob(f"*_{cube.band.values[band]}.tif"))[date]
    with rasterio.open(cog) as src:
        dn = src.read(1).astype(np.float64)
    values = clear[date, band]
    finite = np.isfinite(values)
    assert np.abs(dn[finite] - values[finite] * max_dn).max() <= 0.5
