"""``solver.cap_ground``: a date overcast over the whole scene comes out as cloud, not as ground.

Real runs (GeoTIFFs, a real Dask scheduler, Zarr cube): the same series with one date under a
white cloud deck everywhere, solved with the cap and without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import xarray as xr

from cloudcore.masks import CLOUD
from pipeline.config import Config, parse
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import SimulatedProducts, make_geotiff_series
from pipeline.plan import make_plan, solver_key
from pipeline.run import run
from tests.pipeline.runs import address_config

OVERCAST, DECK = 3, 0.8  # the overcast date, and the deck's mean reflectance


@pytest.fixture(scope="module")
def overcast_series(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """6 dates of 96² px (ground reflectance 0.3–0.58); date 3 under a white deck (0.72–0.88 in
    every band, varying slowly across the scene as a stratus top does)."""
    products = make_geotiff_series(
        tmp_path_factory.mktemp("overcast"), n_dates=6, size=96, seed=6, max_crop_px=0
    )
    with rasterio.open(products.paths[OVERCAST], "r+") as dst:
        dn = dst.read()
        _, h, w = dn.shape
        ramp = np.add.outer(np.linspace(-0.05, 0.05, h), np.linspace(-0.03, 0.03, w))
        deck = np.round((DECK + ramp) * 65535).astype(dn.dtype)
        dst.write(np.broadcast_to(deck, dn.shape))
    return products


def test_an_overcast_date_is_cloud_and_filled_with_the_cap(
    overcast_series: SimulatedProducts, scheduler: str, tmp_path: Path
) -> None:
    shares, outputs = {}, {}
    for cap in (False, True):
        out = tmp_path / f"cap-{cap}"
        summary = run(address_config(out, overcast_series.paths, scheduler, cap_ground=cap))
        assert summary.ok, summary.describe()
        cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
        shares[cap] = float((cube.mask.values[OVERCAST] == CLOUD).mean())
        outputs[cap] = float(np.nanmedian(cube.clear.values[OVERCAST]))
    with rasterio.open(overcast_series.truth_path) as src:
        truth = float(np.median(src.read()))  # the ground under the deck (0.42)
    # Without the cap the deck is taken into the ground: the mask misses much of it and the
    # "cloud-free" image of that date is the deck.
    assert shares[False] < 0.7 and outputs[False] > DECK - 0.1
    # With it the whole date is cloud and its output is the ground.
    assert shares[True] > 0.99 and abs(outputs[True] - truth) < 0.05


def test_the_cap_is_for_additive_methods_and_keys_the_tiles(
    overcast_series: SimulatedProducts, tmp_path: Path
) -> None:
    base = {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in overcast_series.paths]},
        "output": {"path": str(tmp_path)},
    }
    with pytest.raises(ConfigError, match=r"solver\.cap_ground .* atm's is an opacity") as bad:
        parse({**base, "solver": {"method": "atm", "cap_ground": True}}, Config)
    assert "\n" not in str(bad.value)

    def solve_ids(**solver: object) -> set[str]:
        plan = make_plan(parse({**base, "solver": solver}, Config))
        return {i for ids in plan.solve_ids.values() for i in ids.values()}

    assert solve_ids(cap_ground=True).isdisjoint(solve_ids(cap_ground=False))
    # Left out: on for aATM (the default method), as it takes effect; off for ATM, as before.
    assert solve_ids() == solve_ids(cap_ground=True) == solve_ids(cap_ground=None)
    atm = parse({**base, "solver": {"method": "atm"}}, Config).solver
    assert atm.cap_ground is None and not atm.caps_ground
    # μ's growth keys the tiles too; the paper's 1.5, every solve's before solver.rho existed,
    # is spelt as then (left out), so that cubes made before it still resume.
    assert solve_ids().isdisjoint(solve_ids(rho=1.5))
    assert "rho" not in solver_key(parse({**base, "solver": {"rho": 1.5}}, Config).solver)
    assert solver_key(parse(base, Config).solver)["rho"] == 2.0
