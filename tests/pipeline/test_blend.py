"""Blending per-tile solutions: exact where tiles agree, seamless and gap-filling where not."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import rioxarray  # noqa: F401
import xarray as xr
import zarr
from affine import Affine

from pipeline.blend import BlendJob, blend_core, blend_tile
from pipeline.errors import TileError
from pipeline.grid import TargetGrid
from pipeline.outputs import COMPONENTS, Layout, create_store
from pipeline.tiling import TileGrid

N_DATES = 3


def _write_parts(layout: Layout, grid: TileGrid, field: np.ndarray, offsets: dict) -> None:
    for tile in grid:
        part = field[:, :, tile.halo.slices[0], tile.halo.slices[1]] + offsets.get(tile.name, 0.0)
        store = zarr.create_array(
            store=str(layout.part(tile.name)),
            shape=part.shape,
            chunks=part.shape,
            dtype="float32",
            fill_value=np.nan,
        )
        store[...] = part.astype(np.float32)


def _job(layout: Layout, grid: TileGrid, row: int, col: int, cube: str = "") -> BlendJob:
    tile = grid.tile(row, col)
    sources = tuple((o, o.name) for o in grid.neighbours(tile))
    return BlendJob(tile, tile.name, 0, grid, sources, layout, cube)


@pytest.fixture
def field() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((len(COMPONENTS), N_DATES, 90, 70)).astype(np.float32)


def test_blend_reproduces_agreeing_tiles_exactly(tmp_path: Path, field: np.ndarray) -> None:
    layout, grid = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _write_parts(layout, grid, field, {})
    for tile in grid:
        got = blend_core(_job(layout, grid, tile.row, tile.col))
        np.testing.assert_allclose(
            got, field[:, :, tile.core.slices[0], tile.core.slices[1]], atol=1e-6
        )


def test_blend_is_continuous_across_disagreeing_tiles(tmp_path: Path) -> None:
    layout, grid = Layout(tmp_path), TileGrid(32, 64, 32, 8)
    flat = np.zeros((len(COMPONENTS), N_DATES, 32, 64), np.float32)
    _write_parts(layout, grid, flat, {"r00c01": 1.0})  # the right tile is offset by 1
    row = np.concatenate([blend_core(_job(layout, grid, 0, c))[0, 0, 5] for c in range(2)])
    assert row[: 32 - 8].max() == 0 and row[32 + 8 :].min() == 1  # own values away from edges
    assert np.abs(np.diff(row)).max() <= 1 / 16 + 1e-6  # a linear ramp, no step at the border


def test_blend_fills_from_neighbours_and_skips_missing(tmp_path: Path, field: np.ndarray) -> None:
    layout, grid = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _write_parts(layout, grid, field, {})
    # A neighbour's NaN (e.g. no data in its halo) is covered by the other tiles.
    part = zarr.open_array(store=str(layout.part("r00c01")), mode="r+")
    part[:, :, :, :4] = np.nan
    got = blend_core(_job(layout, grid, 0, 0))
    np.testing.assert_allclose(got, field[:, :, :32, :32], atol=1e-6)
    # A tile whose own solve is missing still gets its overlap strips from the neighbours.
    shutil.rmtree(layout.part("r01c01"))
    middle = blend_core(_job(layout, grid, 1, 1))
    assert np.isnan(middle[:, :, 10, 10]).all() and np.isfinite(middle[:, :, 0, 0]).all()
    for tile in grid:
        shutil.rmtree(layout.part(tile.name), ignore_errors=True)
    with pytest.raises(TileError, match="r01c01: no solved part covers this tile"):
        blend_core(_job(layout, grid, 1, 1))


def test_blend_tile_writes_its_core_into_the_cube(tmp_path: Path, field: np.ndarray) -> None:
    layout, tiles = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _write_parts(layout, tiles, field, {})
    target = TargetGrid("EPSG:32650", Affine(50, 0, 440_000, 0, -50, 4_420_000), 70, 90)
    times = [datetime(2020, 6, d + 1) for d in range(N_DATES)]
    create_store(
        layout.cube,
        target,
        times=times,
        bands=["B1"],
        variables=COMPONENTS,
        tile_size=tiles.tile_size,
        attrs={},
    )
    for tile in tiles:
        blend_tile(_job(layout, tiles, tile.row, tile.col, str(layout.cube)))
    cube = xr.open_zarr(layout.cube, consolidated=False)
    for k, name in enumerate(COMPONENTS):
        np.testing.assert_allclose(cube[name].values[:, 0], field[k], atol=1e-6)
    assert cube.rio.crs == "EPSG:32650" and cube.rio.transform() == target.transform
