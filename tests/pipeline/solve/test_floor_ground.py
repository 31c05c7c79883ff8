"""``solver.floor_ground``: a cloud's shadow taken into the ground comes out as shadow.

Real runs (GeoTIFFs, a real Dask scheduler, Zarr cube): the same series with one date under a
large shadow (half the scene at 40 % of its reflectance, as p035r032's reference shadows are
30–40 % of the clear level), solved with the ground capped, without and with the floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr

from cloudcore.masks import SHADOW
from pipeline.config import Config, SolverConfig, parse
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.plan import make_plan
from pipeline.run import run
from tests.pipeline.runs import SHADOWED, address_config
from tests.pipeline.runs import shadowed_series as make_shadowed


@pytest.fixture(scope="module")
def shadowed_series(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulatedProducts, Any]:
    """The shadowed series (:func:`tests.pipeline.runs.shadowed_series`) with the shadow over
    date 3's left half, as p035r032's reference shadows are 30–40 % of the clear level."""
    return make_shadowed(
        tmp_path_factory.mktemp("shadowed"), lambda clear: np.arange(clear.shape[1]) < 48
    )


# A whole run (16 s) of an option that is off by default: a slow test (CI runs them), which
# keeps the default suite under its 15 minutes on a slow 2-core machine.
@pytest.mark.slow
def test_a_shadow_is_found_and_filled_with_the_floor(
    shadowed_series: tuple[SimulatedProducts, Any], scheduler: str, tmp_path: Path
) -> None:
    products, shadow = shadowed_series
    shares, ratios = {}, {}
    with rasterio.open(products.truth_path) as src:
        truth = src.read()[:, shadow]  # the ground, in reflectance
    for floor in (0, 0.25):
        out = tmp_path / f"floor-{floor}"
        summary = run(address_config(out, products.paths, scheduler, floor_ground=floor))
        assert summary.ok, summary.describe()
        cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
        shares[floor] = float((cube.mask.values[SHADOWED][shadow] == SHADOW).mean())
        clear = cube.clear.values[SHADOWED][:, shadow]  # (bands, pixels)
        ratios[floor] = float(np.nanmedian(clear / truth))
    # Without the floor the ground takes the shadow. The shadow dark in every band (on by
    # default) still flags it, read against the pixel's median ground, but what fills it is
    # the ground that took it, so the "cloud-free" image of that date keeps it dark (measured:
    # 100 % flagged, 0.471 of the ground; 0.8 % flagged, 0.400, without that rule; with the
    # floor 100 % and 1.008).
    assert shares[0] > 0.9 and ratios[0] < 0.6, (shares, ratios)
    # With it nearly all of it is shadow, and its output is the ground.
    assert shares[0.25] > 0.9 and abs(ratios[0.25] - 1) < 0.05, (shares, ratios)


def test_the_floor_needs_the_cap_and_no_shadow_layer_and_keys_the_tiles(
    shadowed_series: tuple[SimulatedProducts, Any], tmp_path: Path
) -> None:
    base = {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in shadowed_series[0].paths]},
        "output": {"path": str(tmp_path)},
    }
    cases = [
        ({"cap_ground": False, "floor_ground": 0.25}, r"solver\.floor_ground raises the ground"),
        ({"method": "aatm-shadow", "floor_ground": 0.25}, "aatm-shadow the shadow layer S"),
        ({"refine": True, "floor_ground": 0.25}, "solver.refine the shadow layer S"),
        ({"floor_ground": 0.75}, "floor_ground"),
    ]
    for solver, message in cases:
        with pytest.raises(ConfigError, match=message) as bad:
            parse({**base, "solver": solver}, Config)
        assert "\n" not in str(bad.value)

    def solve_ids(**solver: object) -> set[str]:
        plan = make_plan(parse({**base, "solver": solver}, Config))
        return {i for ids in plan.solve_ids.values() for i in ids.values()}

    assert solve_ids(floor_ground=0.25).isdisjoint(solve_ids(floor_ground=0))
    assert solve_ids(floor_ground=0.25).isdisjoint(solve_ids(floor_ground=0.5))
    shadow = parse({**base, "solver": {"method": "aatm-shadow"}}, Config).solver
    assert shadow.ground_floor is None  # left out: none where S holds the shadows


@pytest.mark.parametrize("floor", [None, 0, 0.25])
def test_the_solve_ids_spell_the_floor_only_where_it_takes_effect(
    shadowed_series: tuple[SimulatedProducts, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    floor: float | None,
) -> None:
    """No floor is spelt as before the floor existed (the key absent from the settings every
    solve id hashes), so earlier cubes resume; a floor is spelt as it takes effect."""
    import pipeline.plan
    from pipeline.ids import tile_id

    seen: list[dict[str, Any]] = []

    def spelt(**kwargs: Any) -> str:  # the real tile_id, its settings kept to be read
        seen.append(kwargs["settings"])
        return tile_id(**kwargs)

    monkeypatch.setattr(pipeline.plan, "tile_id", spelt)
    solver = {} if floor is None else {"floor_ground": floor}
    make_plan(
        parse(
            {
                "inputs": {"kind": "geotiff", "paths": [str(p) for p in shadowed_series[0].paths]},
                "output": {"path": str(tmp_path)},
                "solver": solver,
            },
            Config,
        )
    )
    solves = [s["solver"] for s in seen if "solver" in s]
    assert solves
    for settings in solves:
        if floor:
            assert settings["floor_ground"] == floor
        else:
            assert "floor_ground" not in settings


def test_scene_scope_floors_each_block_as_the_whole_band() -> None:
    """A scene-scope block's written layers (dates, rows, cols) are capped and floored as
    :func:`cloudcore.cap_ground` does the (pixels, dates) matrix, the deficit out of the haze
    layer for aATM."""
    from cloudcore.cap import cap_ground
    from pipeline.solve.scene_scope import ShardSpec, _cap_block

    rng = np.random.default_rng(3)
    n, h, w = 7, 16, 12
    ground, cloud, haze = (rng.random((n, h, w)).astype(np.float32) for _ in range(3))
    obs = rng.random((n, h * w)) < 0.9
    want = [x.reshape(n, -1).T.copy() for x in (ground, cloud, haze)]
    cap_ground(want[0], want[1], obs.T, floor=0.25, below=want[2])
    solver = SolverConfig(floor_ground=0.25)  # aATM: the deficit leaves the haze layer
    spec = ShardSpec("", 0, (), (), "float32", 1, solver=solver)
    haze_before = haze.copy()
    _cap_block([ground, cloud, haze], obs, spec)
    for got, expected in zip((ground, cloud, haze), want, strict=True):
        np.testing.assert_array_equal(got.reshape(n, -1).T, expected)
    assert not np.array_equal(haze, haze_before)  # the deficit left the haze layer
