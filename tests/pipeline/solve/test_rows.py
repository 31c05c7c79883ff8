"""Row and seam tasks' I/O: real Zarr cube and strip stores; exact where tiles agree, a seamless
ramp where they do not, strips durable and deleted once used, errors that name the task."""

from __future__ import annotations

import gc
import json
import weakref
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import rioxarray  # noqa: F401
import xarray as xr
import zarr
from affine import Affine

from cloudcore.catalog import LAYERS
from pipeline.errors import TileError
from pipeline.grid.target import TargetGrid
from pipeline.grid.tiling import TileGrid
from pipeline.solve.rowblend import row_blocks
from pipeline.solve.rows import SeamJob, blend_seam, strip_ids, write_row
from pipeline.store.cube import create_store
from pipeline.store.layout import Layout

N_DATES = 3
TARGET = TargetGrid("EPSG:32650", Affine(50, 0, 440_000, 0, -50, 4_420_000), 70, 90)


def _cube(layout: Layout, tiles: TileGrid) -> Path:
    create_store(
        layout.cube,
        TargetGrid(TARGET.crs, TARGET.transform, tiles.width, tiles.height),
        times=[datetime(2020, 6, d + 1) for d in range(N_DATES)],
        bands=["B1"],
        variables=LAYERS,
        tile_size=tiles.tile_size,
        chunk_rows=tiles.cube_chunk_rows,
        attrs={},
    )
    return layout.cube


def _write_row(layout: Layout, tiles: TileGrid, r: int, solve, ground: bool = True) -> None:
    top, bottom = (layout.strip(s) for s in strip_ids(f"B1-r{r:02d}"))
    write_row(
        row_blocks(tiles, r, solve),
        grid=tiles,
        band_index=0,
        cube=layout.cube,
        top=top if r > 0 else None,
        bottom=bottom if r < tiles.n_rows - 1 else None,
        what=f"B1-r{r:02d}",
        ground=ground,
    )


def _write_rows(layout: Layout, tiles: TileGrid, solutions: dict, ground: bool = True) -> None:
    for r in range(tiles.n_rows):
        _write_row(layout, tiles, r, lambda t: solutions[t.row, t.col], ground)


def _seam(layout: Layout, tiles: TileGrid, r: int) -> SeamJob:
    upper = layout.strip(strip_ids(f"B1-r{r - 1:02d}")[1])
    lower = layout.strip(strip_ids(f"B1-r{r:02d}")[0])
    return SeamJob(tiles, r, 0, f"B1-s{r:02d}", upper, lower, layout, str(layout.cube))


def _halos(tiles: TileGrid, field: np.ndarray, offsets: dict | None = None) -> dict:
    return {
        (t.row, t.col): field[:, :, t.halo.slices[0], t.halo.slices[1]]
        + np.float32((offsets or {}).get(t.name, 0.0))
        for t in tiles
    }


@pytest.fixture
def field() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((len(LAYERS), N_DATES, 90, 70)).astype(np.float32)


@pytest.mark.parametrize("ground", [True, False])
def test_rows_and_seams_write_agreeing_tiles_exactly(
    tmp_path: Path, field: np.ndarray, ground: bool
) -> None:
    """Without ``ground`` (Config.rows_write_ground) the rows and seams write every solved
    layer but the ground, which stays unwritten (no chunk, no data) and is not in the strips."""
    layout, tiles = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _cube(layout, tiles)
    _write_rows(layout, tiles, _halos(tiles, field), ground)
    # Strips are complete stores under their final names, nothing temporary is left.
    strips = sorted(layout.strips.glob("*.zarr"))
    assert len(strips) == 2 * (tiles.n_rows - 1)
    assert not list(layout.strips.glob(".*"))
    held = [name for name in LAYERS if ground or name != "clear"]
    assert zarr.open_array(store=str(strips[0]), mode="r").attrs["layers"] == held
    for r in range(1, tiles.n_rows):
        assert blend_seam(_seam(layout, tiles, r)) == f"B1-s{r:02d}"
        assert layout.marker(f"B1-s{r:02d}").exists()
    assert not list(layout.strips.iterdir())  # every strip deleted once its seam is written
    cube = xr.open_zarr(layout.cube, consolidated=False)
    for k, name in enumerate(LAYERS):
        if name in held:
            np.testing.assert_allclose(cube[name].values[:, 0], field[k], atol=1e-6)
            assert (layout.cube / name / "c").is_dir()
        else:
            assert np.isnan(cube[name].values).all()
            assert not (layout.cube / name / "c").exists()  # zarr v3: no chunk written
    assert cube.rio.crs == "EPSG:32650" and cube.rio.transform() == TARGET.transform


def test_blend_is_a_ramp_across_disagreeing_tiles(tmp_path: Path) -> None:
    layout, tiles = Layout(tmp_path), TileGrid(64, 64, 32, 8)
    _cube(layout, tiles)
    flat = np.zeros((len(LAYERS), N_DATES, 64, 64), np.float32)
    _write_rows(layout, tiles, _halos(tiles, flat, {"r00c01": 1.0, "r01c01": 1.0}))
    blend_seam(_seam(layout, tiles, 1))
    clear = zarr.open_array(store=str(layout.cube), path="clear", mode="r")[0, 0]
    for row in (clear[5], clear[32], clear[60]):  # inside a row task and across the seam
        assert row[: 32 - 8].max() == 0 and row[32 + 8 :].min() == 1  # own values away from edges
        assert np.abs(np.diff(row)).max() <= 1 / 16 + 1e-6  # a linear ramp, no step


def test_a_row_that_fails_leaves_no_strip(tmp_path: Path, field: np.ndarray) -> None:
    layout, tiles = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _cube(layout, tiles)
    solutions = _halos(tiles, field)

    def solve(tile):  # the second tile of the row fails to solve
        if tile.col == 1:
            raise TileError(f"B1-{tile.name}", "solver rejected the tile")
        return solutions[tile.row, tile.col]

    with pytest.raises(TileError, match="B1-r01c01: solver rejected"):
        _write_row(layout, tiles, 1, solve)
    assert not layout.strips.exists() or not list(layout.strips.iterdir())


def test_a_row_holds_no_more_than_two_tile_solutions(tmp_path: Path) -> None:
    """While a tile solves, the solution of the tile two to its left is gone: the row's blend
    keeps its left neighbour's, and the writer keeps no block it wrote (a tile's memory peak)."""
    layout, tiles = Layout(tmp_path), TileGrid(90, 170, 32, 8)
    _cube(layout, tiles)
    rng = np.random.default_rng(1)
    alive: list[weakref.ref] = []
    held_while_solving: list[int] = []

    def solve(tile):
        gc.collect()
        held_while_solving.append(sum(ref() is not None for ref in alive[:-1]))
        shape = (len(LAYERS), N_DATES, tile.halo.height, tile.halo.width)
        solution = rng.random(shape).astype(np.float32)
        alive.append(weakref.ref(solution))
        return solution

    _write_row(layout, tiles, 1, solve)
    assert tiles.n_cols >= 5 and len(held_while_solving) == tiles.n_cols
    # Only the left neighbour's solution (the last one, not counted) may still be alive.
    assert held_while_solving == [0] * tiles.n_cols


def test_a_seam_without_its_strips_names_itself(tmp_path: Path) -> None:
    layout, tiles = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _cube(layout, tiles)
    with pytest.raises(TileError, match="B1-s01: its strips are missing"):
        blend_seam(_seam(layout, tiles, 1))
    assert not layout.marker("B1-s01").exists()


def test_a_seam_of_strips_from_two_versions_blends_the_layers_both_hold(
    tmp_path: Path, field: np.ndarray
) -> None:
    """A run resumed across versions: the upper strip written with the ground by an earlier
    version (no ``layers`` attribute), the lower without it (the rows leave it to the mask
    pass). The seam blends the layers both hold, each by its name."""
    layout, tiles = Layout(tmp_path), TileGrid(90, 70, 32, 8)
    _cube(layout, tiles)
    halos = _halos(tiles, field)
    _write_row(layout, tiles, 0, lambda t: halos[t.row, t.col], ground=True)
    upper = layout.strip(strip_ids("B1-r00")[1])
    meta = upper / "zarr.json"  # as an earlier version wrote it: no attribute
    written = json.loads(meta.read_text())
    written["attributes"] = {}
    meta.write_text(json.dumps(written))
    for r in range(1, tiles.n_rows):
        _write_row(layout, tiles, r, lambda t: halos[t.row, t.col], ground=False)
    for r in range(1, tiles.n_rows):
        blend_seam(_seam(layout, tiles, r))
    cube = xr.open_zarr(layout.cube, consolidated=False)
    for k, name in enumerate(LAYERS):
        if name != "clear":
            np.testing.assert_allclose(cube[name].values[:, 0], field[k], atol=1e-6)
