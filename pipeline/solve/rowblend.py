"""Row-fused blending: blend a tile row in memory, leave only the strips it shares.

Why: at full GF-4 size the two-pass design (every tile's whole halo written as a part, then
read back by the blend of every core) writes ~45 GB of parts for a 29 GB cube, and the disk,
not the solver, sets the pace (see the #3 notes). Feather weights are separable,
w = wy(row) · wx(col), and the weights of overlapping tiles sum to 1 along each axis, so the
blend can be done in two 1-D steps:

1. a *row task* solves the tiles of one tile row left to right and mixes each pair of
   neighbours across their shared columns in memory (only two tiles' results are alive);
   each core's block (halo rows × core columns) is then final horizontally. Its rows that no
   other tile row reaches (``interior``) are final and can go straight into the cube; its top
   and bottom ``2·overlap`` rows (``strips``) are kept for step 2;
2. a *seam task* per pair of tile rows mixes the lower strip of the upper row with the
   upper strip of the lower row, with the vertical weights, and writes those rows.

For every pixel that is either finite in every tile covering it or NaN in all of them (the
case in the pipeline: a tile's NaN means "observed on no date", a property of the pixel), this
equals the 2-D feather blend Σ w·x / Σ w with w = :func:`pipeline.grid.tiling.feather_weights` up
to float32 rounding. Only strips (≈ 50 % of the scene at 1024 + 128) are written and read back
instead of every halo (156 %).

Cube chunks must not straddle the interior/strip row boundaries, which lie on multiples of
``gcd(tile_size, overlap)``: chunks of :attr:`pipeline.grid.tiling.TileGrid.cube_chunk_rows` rows ×
``tile_size`` columns keep every chunk written by exactly one task. The I/O around this
arithmetic is in :mod:`pipeline.solve.rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.grid.tiling import Tile, TileGrid, Window, feather_ramps

__all__ = ["RowBlock", "boundary_window", "mix", "mix_boundary", "row_blocks"]


@dataclass(frozen=True)
class RowBlock:
    """One core's horizontally blended values over its halo rows, cut by vertical finality.

    ``layers`` are one (time, rows, cols) array per component over ``window`` (halo rows ×
    core columns); they are views of the tile's solution, not copies. ``interior`` is the part
    of ``window`` no other tile row covers (final; may be empty); ``top``/``bottom`` the strips
    shared with the rows above/below (None at the scene edge).
    """

    tile: Tile
    window: Window
    layers: tuple[np.ndarray, ...]
    interior: Window | None
    top: Window | None
    bottom: Window | None

    def layers_over(self, part: Window) -> list[np.ndarray]:
        """Each component's values over ``part`` (a sub-window of :attr:`window`), as views."""
        rows, cols = part.relative_to(self.window).slices
        return [layer[:, rows, cols] for layer in self.layers]


def mix(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Σ w·x / Σ w over the two pieces with a finite value; NaN where neither has one.

    One pass of a compiled kernel (:func:`pipeline.solve._feather.mix_pair`), the same bits as
    the NumPy expression it replaced.

    Parameters
    ----------
    first, second
        Each piece as (values, weights): float32 values whose last two axes are (rows, cols),
        and weights broadcastable to (rows, cols).

    Returns
    -------
    numpy.ndarray
        The blend, float32, of the values' shape.
    """
    from pipeline.solve._feather import mix_pair

    shape = first[0].shape
    rows, cols = shape[-2:]
    out = np.empty(shape, np.float32)
    values = [np.asarray(x, np.float32).reshape(-1, rows, cols) for x, _ in (first, second)]
    weights = [_weight_plane(w, rows, cols) for _, w in (first, second)]
    mix_pair(values[0], weights[0], values[1], weights[1], out.reshape(-1, rows, cols))
    return out


def _weight_plane(weights: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``weights`` as the kernel takes them: a writable, C-ordered float32 (rows, cols) array;
    one already so is passed as it is (the row task makes its planes once for every layer)."""
    w = np.asarray(weights, np.float32)
    if w.shape == (rows, cols) and w.flags.c_contiguous and w.flags.writeable:
        return w
    plane = np.empty((rows, cols), np.float32)
    plane[...] = w
    return plane


@dataclass(frozen=True)
class _Piece:
    """A tile's solution over a range of scene columns (all its halo rows), per component."""

    tile: Tile
    col_off: int
    layers: tuple[np.ndarray, ...]  # (time, halo rows, cols) each

    @property
    def col_end(self) -> int:
        return self.col_off + self.layers[0].shape[-1]

    def columns(self, start: int, stop: int) -> list[np.ndarray]:
        """Views of each component over scene columns [start, stop)."""
        return [layer[:, :, start - self.col_off : stop - self.col_off] for layer in self.layers]


def _row_split(
    tile: Tile, grid: TileGrid
) -> tuple[Window | None, Window | None, Window | None, Window]:
    """interior, top strip, bottom strip and the whole block of one core, in scene pixels."""
    halo, core, ov = tile.halo, tile.core, grid.overlap
    block = Window(halo.row_off, core.col_off, halo.height, core.width)
    first, last = tile.row == 0, tile.row == grid.n_rows - 1
    top_end = core.row_off if first else min(core.row_off + ov, grid.height)
    bottom_start = core.row_end if last else core.row_end - ov

    def rows(start: int, stop: int) -> Window | None:
        return Window(start, core.col_off, stop - start, core.width) if stop > start else None

    top = None if first else rows(halo.row_off, top_end)
    bottom = None if last else rows(bottom_start, halo.row_end)
    return rows(top_end, bottom_start), top, bottom, block


def row_blocks(
    grid: TileGrid, row: int, solve: Callable[[Tile], Sequence[np.ndarray]]
) -> Iterator[RowBlock]:
    """Solve the tiles of one tile row in order and yield each core's blended block.

    ``solve(tile)`` returns the solution over the tile's halo: one (time, halo rows, halo cols)
    float32 array per component (or one array stacked on a first component axis). The core
    columns are blended *in place*, so yielded blocks are views, not copies: a core is final
    once its right neighbour is solved, and of the tile to its left only the columns that reach
    into it are kept (copied before the left tile's own columns were changed — they lie outside
    its core, which is all that changes). At most two whole solutions are alive.
    """
    left: _Piece | None = None  # the previous tile's values over the current core's columns
    current: _Piece | None = None
    for col in range(grid.n_cols + 1):
        following = None
        if col < grid.n_cols:
            tile = grid.tile(row, col)
            following = _Piece(tile, tile.halo.col_off, tuple(solve(tile)))
        if current is not None:
            yield _blend_core_columns(grid, current, left, following)
            left = None
            if following is not None:
                start = following.tile.core.col_off
                kept = tuple(x.copy() for x in current.columns(start, current.col_end))
                left = _Piece(current.tile, start, kept)
        current = following


def _blend_core_columns(
    grid: TileGrid, current: _Piece, left: _Piece | None, right: _Piece | None
) -> RowBlock:
    tile = current.tile
    core = tile.core
    interior, top, bottom, block = _row_split(tile, grid)
    # Mix every overlap first, then write them all: a narrow core's two overlaps could touch.
    mixed: list[tuple[int, int, list[np.ndarray]]] = []
    for other in (left, right):
        if other is None:
            continue
        start, stop = max(other.col_off, core.col_off), min(other.col_end, core.col_end)
        if stop <= start:
            continue
        rows = current.layers[0].shape[-2]  # halo rows, the same for every layer
        weights = [
            _weight_plane(_column_weights(grid, p, start, stop), rows, stop - start)
            for p in (current, other)
        ]
        layers = [
            mix((own, weights[0]), (theirs, weights[1]))
            for own, theirs in zip(
                current.columns(start, stop), other.columns(start, stop), strict=True
            )
        ]
        mixed.append((start, stop, layers))
    for start, stop, layers in mixed:
        for target, values in zip(current.columns(start, stop), layers, strict=True):
            target[...] = values
    return RowBlock(
        tile, block, tuple(current.columns(core.col_off, core.col_end)), interior, top, bottom
    )


def _column_weights(grid: TileGrid, piece: _Piece, start: int, stop: int) -> np.ndarray:
    """The horizontal feather weights of ``piece``'s tile over scene columns [start, stop)."""
    _, wx = feather_ramps(piece.tile, grid)
    offset = start - piece.tile.halo.col_off
    return wx[offset : offset + stop - start]


def boundary_window(grid: TileGrid, row: int, col: int) -> Window:
    """The rows shared by tile rows ``row − 1`` and ``row``, over the core columns of ``col``."""
    upper, lower = grid.tile(row - 1, col), grid.tile(row, col)
    start, stop = lower.halo.row_off, upper.halo.row_end
    return Window(start, lower.core.col_off, stop - start, lower.core.width)


def mix_boundary(
    grid: TileGrid, row: int, col: int, upper: np.ndarray, lower: np.ndarray
) -> np.ndarray:
    """Vertically blend the bottom strip of tile ``(row − 1, col)`` with the top strip of
    ``(row, col)`` (both over :func:`boundary_window`, horizontally blended already)."""
    window = boundary_window(grid, row, col)
    pieces = []
    for values, tile in ((upper, grid.tile(row - 1, col)), (lower, grid.tile(row, col))):
        wy, _ = feather_ramps(tile, grid)
        r0 = window.row_off - tile.halo.row_off
        pieces.append((values, wy[r0 : r0 + window.height, None]))
    return mix(*pieces)
