"""Scene tiling: cores that partition the scene, halos that overlap, feather weights.

Each tile gets its own low-rank model, so results depend on where tiles end.
Every tile is solved on its *halo* (core ± overlap, clipped to the scene) and the overlapping
halos are blended with :func:`feather_weights`, which form a partition of unity across tiles.
All window arithmetic lives here, in :class:`TileGrid`, and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

__all__ = [
    "Tile",
    "TileGrid",
    "Window",
    "feather_ramps",
    "feather_weights",
]


@dataclass(frozen=True)
class Window:
    """A rectangle of pixels: offsets and size, rows first."""

    row_off: int
    col_off: int
    height: int
    width: int

    @property
    def row_end(self) -> int:
        return self.row_off + self.height

    @property
    def col_end(self) -> int:
        return self.col_off + self.width

    @property
    def slices(self) -> tuple[slice, slice]:
        """``(rows, cols)`` slices for indexing a 2-D array."""
        return slice(self.row_off, self.row_end), slice(self.col_off, self.col_end)

    def intersection(self, other: Window) -> Window | None:
        """The overlap with ``other``, or None when they do not overlap."""
        r0, c0 = max(self.row_off, other.row_off), max(self.col_off, other.col_off)
        r1, c1 = min(self.row_end, other.row_end), min(self.col_end, other.col_end)
        if r1 <= r0 or c1 <= c0:
            return None
        return Window(r0, c0, r1 - r0, c1 - c0)

    def relative_to(self, outer: Window) -> Window:
        """This window in the pixel frame of ``outer`` (which must contain it)."""
        return Window(
            self.row_off - outer.row_off, self.col_off - outer.col_off, self.height, self.width
        )

    def to_rasterio(self) -> Any:
        """The equivalent :class:`rasterio.windows.Window` (column offset first)."""
        from rasterio.windows import Window as RioWindow

        return RioWindow(self.col_off, self.row_off, self.width, self.height)


@dataclass(frozen=True)
class Tile:
    """One tile of a :class:`TileGrid`.

    Attributes
    ----------
    row, col
        Tile index (rows from the top).
    core
        The pixels this tile owns in the output; cores partition the scene.
    halo
        The pixels it is solved on: core ± overlap, clipped to the scene.
    core_in_halo
        Where the core lies inside the halo array.
    """

    row: int
    col: int
    core: Window
    halo: Window
    core_in_halo: Window

    @property
    def name(self) -> str:
        """Short human-readable index, e.g. ``r03c07``."""
        return f"r{self.row:02d}c{self.col:02d}"


@dataclass(frozen=True)
class TileGrid:
    """A scene of ``height`` × ``width`` pixels cut into square cores of ``tile_size``.

    The last row and column of cores may be smaller. Halos extend ``overlap`` pixels beyond the
    core on every side that faces another tile.
    """

    height: int
    width: int
    tile_size: int
    overlap: int

    def __post_init__(self) -> None:
        if self.height < 1 or self.width < 1:
            raise ValueError(f"TileGrid: empty scene {self.height}x{self.width}")
        if self.tile_size < 1 or not 0 <= 2 * self.overlap <= self.tile_size:
            raise ValueError(
                f"TileGrid: overlap {self.overlap} must be in [0, tile_size/2] "
                f"(tile_size {self.tile_size})"
            )

    @property
    def n_rows(self) -> int:
        return -(-self.height // self.tile_size)

    @property
    def n_cols(self) -> int:
        return -(-self.width // self.tile_size)

    @property
    def scene(self) -> Window:
        return Window(0, 0, self.height, self.width)

    @property
    def inner_chunk(self) -> int | None:
        """Edge of the inner Zarr chunks of the staged input store, or None for one chunk per
        tile.

        Halos start and end on multiples of ``overlap`` (cores are multiples of it), so with
        inner chunks of that edge a solve's halo read decodes exactly the pixels it needs
        instead of the 9 whole tiles it touches (about 6x less at 1024 + 128).
        """
        if self.overlap and self.tile_size % self.overlap == 0:
            return self.overlap
        return None

    @property
    def cube_chunk_rows(self) -> int:
        """Rows per chunk of the cube: every row-fused write starts on a multiple of it.

        The row task writes each core's interior rows, the seam task the ``2·overlap`` rows
        around a core border (:mod:`pipeline.solve.rowblend`); those row ranges start on
        multiples of ``gcd(tile_size, overlap)``, so chunks of that height (``overlap`` when the
        core is a multiple of it: 128 at 1024 + 128) have exactly one writer each.
        """
        return math.gcd(self.tile_size, self.overlap) if self.overlap else self.tile_size

    def __len__(self) -> int:
        return self.n_rows * self.n_cols

    def __iter__(self) -> Iterator[Tile]:
        return iter(self._tiles)

    @cached_property
    def _tiles(self) -> tuple[Tile, ...]:
        return tuple(self._make(r, c) for r in range(self.n_rows) for c in range(self.n_cols))

    def tile(self, row: int, col: int) -> Tile:
        """The tile at index ``(row, col)``."""
        if not (0 <= row < self.n_rows and 0 <= col < self.n_cols):
            raise IndexError(f"tile r{row}c{col} outside a {self.n_rows}x{self.n_cols} grid")
        return self._tiles[row * self.n_cols + col]

    def _make(self, row: int, col: int) -> Tile:
        ts, ov = self.tile_size, self.overlap
        r0, c0 = row * ts, col * ts
        core = Window(r0, c0, min(ts, self.height - r0), min(ts, self.width - c0))
        hr0, hc0 = max(r0 - ov, 0), max(c0 - ov, 0)
        hr1, hc1 = min(core.row_end + ov, self.height), min(core.col_end + ov, self.width)
        halo = Window(hr0, hc0, hr1 - hr0, hc1 - hc0)
        return Tile(row, col, core, halo, core.relative_to(halo))

    def neighbours(self, tile: Tile) -> list[Tile]:
        """Tiles (``tile`` included) whose halo overlaps the core of ``tile``."""
        found = []
        for r in range(max(tile.row - 1, 0), min(tile.row + 2, self.n_rows)):
            for c in range(max(tile.col - 1, 0), min(tile.col + 2, self.n_cols)):
                other = self.tile(r, c)
                if other.halo.intersection(tile.core) is not None:
                    found.append(other)
        return found


def _ramp(start: int, stop: int, core_start: int, core_stop: int, size: int, ov: int) -> np.ndarray:
    """1-D feather weights over the halo ``[start, stop)`` of a core ``[core_start, core_stop)``.

    Towards a neighbour, the weight rises linearly across the ``2·overlap`` pixels that the two
    halos share, measured from the *unclipped* halo edge so that the weights of the two tiles sum
    to exactly 1 there; towards the scene border it stays 1.
    """
    x = np.arange(start, stop, dtype=np.float64) + 0.5  # pixel centres
    w = np.ones_like(x)
    if ov == 0:
        return w
    if core_start > 0:
        w = np.minimum(w, (x - (core_start - ov)) / (2 * ov))
    if core_stop < size:
        w = np.minimum(w, ((core_stop + ov) - x) / (2 * ov))
    return np.clip(w, 0.0, 1.0)


def feather_weights(tile: Tile, grid: TileGrid) -> np.ndarray:
    """Blending weights over the halo of ``tile``.

    Parameters
    ----------
    tile
        A tile of ``grid``.
    grid
        The tiling.

    Returns
    -------
    numpy.ndarray
        float32 array of the halo's shape. Weights ramp linearly to about 0 at halo edges that
        face a neighbour tile and stay 1 at scene borders; summed over all tiles they are 1 at
        every pixel, so overlapping tiles blend without seams.
    """
    wy, wx = feather_ramps(tile, grid)
    return np.outer(wy, wx).astype(np.float32)


def feather_ramps(tile: Tile, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    """The row and column factors (float64) of :func:`feather_weights` over the halo:
    w = wy[:, None]·wx. Row-fused blending (:mod:`pipeline.solve.rowblend`) uses them apart."""
    h, c = tile.halo, tile.core
    wy = _ramp(h.row_off, h.row_end, c.row_off, c.row_end, grid.height, grid.overlap)
    wx = _ramp(h.col_off, h.col_end, c.col_off, c.col_end, grid.width, grid.overlap)
    return wy, wx
