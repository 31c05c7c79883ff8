"""``solver.shadow_free_fill``: the default's mask, the ground of a solve with a shadow layer.

Real runs (GeoTIFFs, a real Dask scheduler, Zarr cube) of the floor's series
(``tests/pipeline/solve/test_floor_ground.py``) with a smaller shadow (date 3's clear pixels in
a 24 px square at 40 % of their reflectance), without and with the option; and the tile's
layers against the real-cloud benchmark's candidate they implement
(``cloudlab.sitescore.Solved.with_ground``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr

from cloudcore.masks import SHADOW
from pipeline.config import Config, SolverConfig, parse
from pipeline.config.solver import FILL_SOLVE
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.plan import make_plan, solver_key
from pipeline.run import run
from tests.pipeline.runs import SHADOWED, address_config
from tests.pipeline.runs import shadowed_series as make_shadowed

#: float32's machine epsilon. Rebuilding D from the four layers takes six float32 operations on
#: values below 1.5 (D − C − N, the ground less that, then clear + cloud + haze − shadow), each
#: off by at most half an ulp: under 6 × 1.5 × eps / 2 = 4.5 eps, so 8 eps bounds it (measured
#: 0.5 eps). The benchmark holds the ground in float64, the tile in float32: one rounding of a
#: value in [0, 1], at most eps / 2.
EPS32 = float(np.finfo(np.float32).eps)
#: The shadow's square: 24 px, inside one 48 px tile's core (the runs' tiling). A shadow as
#: large as a tile is a date darker over the whole tile, which the low-rank ground takes in
#: as that date's own level whatever the sparse layers' signs: with the floor's test's shadow
#: (half the scene) the option filled it at 0.556 of the truth, the default at 0.475.
SQUARE = (slice(52, 76), slice(52, 76))


@pytest.fixture(scope="module")
def shadowed_series(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulatedProducts, Any]:
    """The shadowed series (:func:`tests.pipeline.runs.shadowed_series`) with the shadow in a
    24 px square of date 3."""

    def square(clear: np.ndarray) -> np.ndarray:
        inside = np.zeros_like(clear)
        inside[SQUARE] = True
        return inside

    return make_shadowed(tmp_path_factory.mktemp("shadowed"), square)


# A whole run (18 s) of an option that is off by default: a slow test (CI runs them), which
# keeps the default suite under its 15 minutes on a slow 2-core machine.
@pytest.mark.slow
def test_the_mask_is_the_default_s_and_the_shadow_is_filled_with_the_shadow_free_ground(
    shadowed_series: tuple[SimulatedProducts, Any],
    scheduler: str,
    tmp_path: Path,
) -> None:
    products, shadow = shadowed_series
    with rasterio.open(products.truth_path) as src:
        truth = src.read()[:, shadow]  # the ground, in reflectance
    cubes = {}
    for fill in (False, True):
        out = tmp_path / f"fill-{fill}"
        summary = run(address_config(out, products.paths, scheduler, shadow_free_fill=fill))
        assert summary.ok, summary.describe()
        cubes[fill] = xr.open_zarr(out / "cube.zarr", consolidated=False, mask_and_scale=False)
    plain, fill = cubes[False], cubes[True]
    assert "shadow" not in plain and "shadow" in fill
    # The run's STAC Items say so, and only when it is on.
    for on in (False, True):
        item = next((tmp_path / f"fill-{on}" / "stac").glob("*/*.json"))
        properties = json.loads(item.read_text())["properties"]
        assert properties.get("cloudremoval:shadow_free_fill") is (True if on else None)
    # The same mask, the same provenance, the same observations kept: only the fill differs.
    np.testing.assert_array_equal(fill.mask.values, plain.mask.values)
    np.testing.assert_array_equal(fill.provenance.values, plain.provenance.values)
    kept = plain.provenance.values == 1
    np.testing.assert_array_equal(fill.clear.values[kept], plain.clear.values[kept])
    filled = plain.provenance.values == 0
    assert not np.allclose(fill.clear.values[filled], plain.clear.values[filled])
    # The shadowed pixels are flagged alike; the default fills them with the ground that took
    # the shadow in (about half the truth), the option with one that did not.
    assert float((fill.mask.values[SHADOWED][shadow] == SHADOW).mean()) > 0.9
    ratio = {
        name: float(np.nanmedian(cube.clear.values[SHADOWED][:, shadow] / truth))
        for name, cube in (("plain", plain), ("fill", fill))
    }
    # Measured 0.572 and 0.998 of the truth.
    assert ratio["plain"] < 0.75 and abs(ratio["fill"] - 1) < 0.05, ratio


def test_the_tile_writes_the_second_solve_s_ground_and_keeps_the_first_s_residual() -> None:
    """The tile's layers with the option: clear the capped ground of :data:`FILL_SOLVE`'s
    solve (as a tile of that method writes it), cloud and haze the default's, and D = clear +
    cloud + haze − shadow where observed, to float32 rounding; that ground is the real-cloud
    benchmark's ``ground_from`` candidate's (the same solve and cap), to float32's rounding."""
    from cloudcore.catalog import SHADOW_LAYER
    from cloudlab.candidates import SolveSpec
    from cloudlab.sitescore import solve_specs
    from pipeline.solve.tile import shadow_free_fill, solve_matrix, solver_lambda
    from pipeline.solve.tile import tile_layers as layers_of

    rng = np.random.default_rng(5)
    h, w, n = 24, 20, 6
    ground = 0.2 + 0.5 * rng.random((h * w, 1)).astype(np.float32)
    D = np.repeat(ground, n, axis=1) * (0.9 + 0.2 * rng.random((1, n))).astype(np.float32)
    D[: h * w // 3, 2] = np.minimum(D[: h * w // 3, 2] + 0.5, 1.0)  # a cloud
    D[h * w // 2 :, 4] *= 0.4  # a shadow
    mask = np.ones(D.shape, bool)
    mask[:40, 1] = False  # a date partly seen
    D[~mask] = np.nan
    D = np.ascontiguousarray(D.T).T  # (pixels, dates) view of dates-first, as a tile's
    solver = SolverConfig(shadow_free_fill=True)
    lam = solver_lambda(solver, *D.shape)
    first = solve_matrix(D, mask, solver, (h, w), lam, threads=1)
    layers = layers_of(first, mask, solver, threads=1)
    cloud, haze = layers[1].copy(), layers[2].copy()
    shadow_free_fill(D, mask, layers, solver, threads=1)
    assert len(layers) == len(solver.layers) == 4 and solver.layers[-1] == SHADOW_LAYER
    np.testing.assert_array_equal(layers[1], cloud)
    np.testing.assert_array_equal(layers[2], haze)

    other = SolverConfig(**FILL_SOLVE)  # a run of that method: its tile's clear layer
    alone = solve_matrix(D, mask, other, (h, w), solver_lambda(other, *D.shape), threads=1)
    np.testing.assert_array_equal(layers[0], layers_of(alone, mask, other, threads=1)[0])

    rebuilt = layers[0] + layers[1] + layers[2] - layers[3]
    assert np.all(np.abs(rebuilt - D)[mask] <= 8 * EPS32)

    # The benchmark's candidate: the default's mask with this solve's ground, capped.
    series = D.T.reshape(1, n, h * w).transpose(0, 2, 1)  # (bands, pixels, dates)
    spec = SolveSpec("aatm-shadow", "star", shadow_weight=1.0, cap=True)
    bench = solve_specs(series, mask, [spec], (h, w))[spec.name]
    np.testing.assert_allclose(bench.ground[0], layers[0], rtol=0, atol=EPS32 / 2)


def test_the_option_is_the_default_solve_s_alone_and_keys_the_tiles_only_when_on(
    shadowed_series: tuple[SimulatedProducts, Any],
    tmp_path: Path,
) -> None:
    base = {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in shadowed_series[0].paths]},
        "output": {"path": str(tmp_path)},
    }
    cases = [
        ({"method": "rpca"}, r"solver\.method 'aatm'"),
        ({"refine": True}, "solver.refine false"),
        ({"scope": "scene"}, "solver.scope 'tile'"),
        ({"cap_ground": False}, "solver.cap_ground true"),
        ({"floor_ground": 0.25}, "solver.floor_ground 0"),
    ]
    for solver, message in cases:
        with pytest.raises(ConfigError, match=message) as bad:
            parse({**base, "solver": {**solver, "shadow_free_fill": True}}, Config)
        assert "\n" not in str(bad.value) and "shadow_free_fill" in str(bad.value)

    def solve_ids(**solver: object) -> set[str]:
        plan = make_plan(parse({**base, "solver": solver}, Config))
        return {i for ids in plan.solve_ids.values() for i in ids.values()}

    # Off, the key is spelt as before it existed: earlier cubes resume; on, every tile is new.
    assert "shadow_free_fill" not in solver_key(SolverConfig())
    assert solver_key(SolverConfig(shadow_free_fill=True))["shadow_free_fill"] == FILL_SOLVE
    assert solve_ids(shadow_free_fill=False) == solve_ids()
    assert solve_ids(shadow_free_fill=True).isdisjoint(solve_ids())
