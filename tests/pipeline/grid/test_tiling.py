"""Tiling: cores partition the scene, halos are clipped, feather weights blend without seams."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipeline.grid.tiling import TileGrid, Window, feather_weights
from pipeline.ids import tile_id

SHAPES = [(200, 130, 64, 16), (128, 128, 64, 32), (100, 257, 50, 0), (40, 30, 64, 8)]


@pytest.mark.parametrize(("height", "width", "size", "overlap"), SHAPES)
def test_every_pixel_in_exactly_one_core(height: int, width: int, size: int, overlap: int) -> None:
    grid = TileGrid(height, width, size, overlap)
    count = np.zeros((height, width), int)
    for tile in grid:
        count[tile.core.slices] += 1
    assert (count == 1).all()
    assert len(grid) == grid.n_rows * grid.n_cols == len(list(grid))


@pytest.mark.parametrize(("height", "width", "size", "overlap"), SHAPES)
def test_halos_are_core_plus_overlap_clipped(
    height: int, width: int, size: int, overlap: int
) -> None:
    grid = TileGrid(height, width, size, overlap)
    for tile in grid:
        h, c = tile.halo, tile.core
        assert h.row_off == max(c.row_off - overlap, 0) and h.col_off == max(c.col_off - overlap, 0)
        assert h.row_end == min(c.row_end + overlap, height)
        assert h.col_end == min(c.col_end + overlap, width)
        assert grid.scene.intersection(h) == h
        # The core sits where core_in_halo says.
        frame = np.arange(height * width).reshape(height, width)
        assert (frame[h.slices][tile.core_in_halo.slices] == frame[c.slices]).all()


@pytest.mark.parametrize(("height", "width", "size", "overlap"), SHAPES)
def test_feather_weights_partition_unity(height: int, width: int, size: int, overlap: int) -> None:
    grid = TileGrid(height, width, size, overlap)
    total = np.zeros((height, width))
    for tile in grid:
        w = feather_weights(tile, grid)
        assert w.shape == (tile.halo.height, tile.halo.width)
        assert (w > 0).all() and (w <= 1).all()
        assert (w[tile.core_in_halo.slices] >= 0.25).all()  # a core is dominated by its own tile
        total[tile.halo.slices] += w
    np.testing.assert_allclose(total, 1.0, atol=1e-6)


def test_feather_weights_ramp_towards_neighbours_only() -> None:
    grid = TileGrid(192, 192, 64, 16)
    corner = grid.tile(0, 0)
    w = feather_weights(corner, grid)
    # Scene borders (top row, left column) keep full weight away from the inner edges.
    assert (w[0, : 64 - 16] == 1).all() and (w[: 64 - 16, 0] == 1).all()
    # Edges facing a neighbour fall to about 0.
    assert w[0, -1] < 0.05 and w[-1, 0] < 0.05
    middle = feather_weights(grid.tile(1, 1), grid)
    assert middle.max() == 1 and middle[0, :].max() < 0.05 and middle[:, -1].max() < 0.05
    one = TileGrid(50, 70, 128, 32)
    assert (feather_weights(one.tile(0, 0), one) == 1).all()


def test_neighbours_are_the_halos_touching_the_core() -> None:
    grid = TileGrid(300, 300, 100, 20)
    names = {t.name for t in grid.neighbours(grid.tile(1, 1))}
    assert len(names) == 9
    assert {t.name for t in grid.neighbours(grid.tile(0, 0))} == {
        "r00c00",
        "r00c01",
        "r01c00",
        "r01c01",
    }
    assert [t.name for t in TileGrid(300, 300, 100, 0).neighbours(grid.tile(1, 1))] == ["r01c01"]


def test_window_helpers() -> None:
    a, b = Window(0, 0, 10, 10), Window(5, 8, 10, 10)
    assert a.intersection(b) == Window(5, 8, 5, 2)
    assert a.intersection(Window(10, 0, 3, 3)) is None
    assert Window(5, 8, 5, 2).relative_to(b) == Window(0, 0, 5, 2)
    rio = b.to_rasterio()
    assert (rio.col_off, rio.row_off, rio.width, rio.height) == (8, 5, 10, 10)


def test_invalid_grids() -> None:
    with pytest.raises(ValueError, match="overlap"):
        TileGrid(100, 100, 64, 40)
    with pytest.raises(ValueError, match="empty"):
        TileGrid(0, 100, 64, 8)


def test_tile_id_is_deterministic_and_sensitive() -> None:
    grid = TileGrid(256, 256, 128, 16)
    base: dict[str, Any] = {
        "input_ids": ["a", "b"],
        "tile": grid.tile(0, 1),
        "band": "B2",
        "settings": {"lam": "auto"},
        "version": "1",
    }
    first = tile_id(**base)
    assert first == tile_id(**base) and first.startswith("B2-r00c01-")
    changes: list[dict[str, Any]] = [
        {"input_ids": ["a", "c"]},
        {"tile": grid.tile(1, 1)},
        {"band": "B3"},
        {"settings": {"lam": "star"}},
        {"version": "2"},
    ]
    ids = {tile_id(**{**base, **change}) for change in changes}
    assert first not in ids and len(ids) == len(changes)


def test_inner_chunk_follows_the_overlap() -> None:
    assert TileGrid(3000, 3000, 1024, 128).inner_chunk == 128
    assert TileGrid(3000, 3000, 1000, 96).inner_chunk is None  # cores not a multiple of it
    assert TileGrid(3000, 3000, 1024, 0).inner_chunk is None


def test_sharded_store_round_trips_a_halo(tmp_path) -> None:
    from datetime import datetime

    import zarr
    from affine import Affine

    from pipeline.grid.target import TargetGrid
    from pipeline.store.cube import create_store

    tiles = TileGrid(150, 170, 64, 16)
    grid = TargetGrid("EPSG:32650", Affine(50, 0, 0, 0, -50, 0), tiles.width, tiles.height)
    times = [datetime(2020, 6, d + 1) for d in range(4)]
    path = tmp_path / "input.zarr"
    create_store(
        path,
        grid,
        times=times,
        bands=["B1", "B2"],
        variables=["observed"],
        tile_size=64,
        inner_chunk=tiles.inner_chunk,
        attrs={},
    )
    stored = zarr.open_array(store=str(path), path="observed", mode="r+")
    # One shard per tile core (a staging task's write), inner chunks of the overlap's edge.
    assert stored.shards == (4, 1, 64, 64) and stored.chunks == (4, 1, 16, 16)
    values = np.random.default_rng(1).random((4, 2, 150, 170)).astype(np.float32)
    for tile in tiles:
        stored[:, :, tile.core.slices[0], tile.core.slices[1]] = values[
            :, :, tile.core.slices[0], tile.core.slices[1]
        ]
    halo = tiles.tile(1, 1).halo
    np.testing.assert_array_equal(
        stored[:, 1, halo.slices[0], halo.slices[1]], values[:, 1, halo.slices[0], halo.slices[1]]
    )


def test_cube_chunk_rows_divide_every_row_write() -> None:
    assert TileGrid(3000, 3000, 1024, 128).cube_chunk_rows == 128
    assert TileGrid(3000, 3000, 1000, 96).cube_chunk_rows == 8  # gcd(1000, 96)
    assert TileGrid(3000, 3000, 1024, 0).cube_chunk_rows == 1024  # no strips: whole cores
