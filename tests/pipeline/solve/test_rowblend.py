"""Row-fused blending equals the 2-D feather blend, and its writes start on cube chunk edges."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.grid.tiling import TileGrid, feather_weights
from pipeline.solve.rowblend import boundary_window, mix_boundary, row_blocks

N = 3  # dates


def _solutions(grid: TileGrid, seed: int) -> dict:
    """Per-tile halo solutions that disagree (a per-tile offset) and share NaN pixels."""
    rng = np.random.default_rng(seed)
    field = rng.random((3, N, grid.height, grid.width)).astype(np.float32)
    field[:, :, rng.random((grid.height, grid.width)) < 0.02] = np.nan  # unobserved pixels
    return {
        (t.row, t.col): field[:, :, t.halo.slices[0], t.halo.slices[1]] + rng.random() for t in grid
    }


def _feather_2d(grid: TileGrid, sols: dict) -> np.ndarray:
    num = np.zeros((3, N, grid.height, grid.width))
    den = np.zeros_like(num)
    for t in grid:
        x = sols[t.row, t.col]
        w = np.where(np.isfinite(x), feather_weights(t, grid), 0.0)
        num[:, :, t.halo.slices[0], t.halo.slices[1]] += np.nan_to_num(x) * w
        den[:, :, t.halo.slices[0], t.halo.slices[1]] += w
    with np.errstate(invalid="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _row_fused(grid: TileGrid, sols: dict) -> np.ndarray:
    mosaic = np.full((3, N, grid.height, grid.width), np.nan, np.float32)
    written = np.zeros((grid.height, grid.width), int)
    strips: dict = {}
    for r in range(grid.n_rows):
        for block in row_blocks(grid, r, lambda t: sols[t.row, t.col]):
            # Each write starts on a chunk edge of the cube, so chunks have a single writer.
            for part in (block.interior, block.top, block.bottom):
                assert part is None or part.row_off % grid.cube_chunk_rows == 0
            if block.interior is not None:
                rows, cols = block.interior.slices
                mosaic[:, :, rows, cols] = np.stack(block.layers_over(block.interior))
                written[rows, cols] += 1
            for side, part in (("top", block.top), ("bottom", block.bottom)):
                if part is not None:
                    strips[side, block.tile.row, block.tile.col] = np.stack(block.layers_over(part))
    for r in range(1, grid.n_rows if grid.overlap else 0):  # no overlap: nothing shared
        for c in range(grid.n_cols):
            window = boundary_window(grid, r, c)
            assert window.row_off % grid.cube_chunk_rows == 0
            mixed = mix_boundary(grid, r, c, strips["bottom", r - 1, c], strips["top", r, c])
            mosaic[:, :, window.slices[0], window.slices[1]] = mixed
            written[window.slices] += 1
    assert (written == 1).all()  # every pixel written by exactly one task
    return mosaic


@pytest.mark.parametrize(
    "shape, tile, overlap",
    [
        ((90, 70), 32, 8),  # last row and column shorter than the overlap band
        ((64, 64), 32, 16),  # tile = 2 x overlap: no interior rows
        ((100, 37), 32, 8),
        ((40, 40), 64, 16),  # one tile
        ((150, 130), 40, 12),  # overlap does not divide the tile: chunks of gcd = 4 rows
        ((70, 90), 20, 0),  # no overlap
    ],
)
def test_row_fused_blend_equals_the_2d_feather_blend(shape, tile, overlap) -> None:
    grid = TileGrid(*shape, tile, overlap)
    sols = _solutions(grid, seed=sum(shape) + tile)
    expected = _feather_2d(grid, sols)
    got = _row_fused(grid, sols)
    np.testing.assert_allclose(got, expected, atol=2e-6, rtol=0)
    assert np.array_equal(np.isnan(got), np.isnan(expected))


def _numpy_mix(pieces: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The NumPy expression the compiled kernel replaced, kept as its reference: masked
    in-place adds of w·x and w where x is finite, then Σ w·x / Σ w, NaN where Σ w is 0."""
    shape = pieces[0][0].shape
    num = np.zeros(shape, np.float32)
    den = np.zeros(shape, np.float32)
    for values, weights in pieces:
        w = np.broadcast_to(np.asarray(weights, np.float32), shape)
        finite = np.isfinite(values)
        with np.errstate(invalid="ignore"):
            np.add(num, values * w, out=num, where=finite)
        np.add(den, w, out=den, where=finite)
    out = np.full(shape, np.nan, np.float32)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _awkward(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values with NaN, ±inf, −0, subnormals and large magnitudes among them."""
    x = rng.normal(0.3, 0.5, shape).astype(np.float32)
    for value, share in ((np.nan, 0.1), (np.inf, 0.01), (-np.inf, 0.01), (-0.0, 0.01)):
        x[rng.random(shape) < share] = value
    x[rng.random(shape) < 0.01] = np.float32(1e-40)
    x[rng.random(shape) < 0.01] *= np.float32(1e30)
    return x


def test_the_compiled_mix_gives_the_numpy_blend_bit_for_bit() -> None:
    """Overlapping columns (strided views, one weight per column, one of them 0) and a seam
    (4-D strips, one weight per row): the same float32 bits, NaN where neither is finite."""
    from pipeline.solve.rowblend import mix

    rng = np.random.default_rng(7)
    left, right = _awkward(rng, (N, 40, 96)), _awkward(rng, (N, 40, 96))
    own, theirs = left[:, :, 64:], right[:, :, :32]  # views, as the row task passes them
    ramp = np.linspace(0.0, 1.0, 32, dtype=np.float32)
    cases = [
        ((own, 1 - ramp), (theirs, ramp)),
        (
            (_awkward(rng, (3, N, 16, 24)), ramp[:16, None]),
            (_awkward(rng, (3, N, 16, 24)), 1 - ramp[:16, None]),
        ),
    ]
    for first, second in cases:
        expected = _numpy_mix([first, second])
        got = mix(first, second)
        assert got.dtype == np.float32 and got.shape == expected.shape
        assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert np.isnan(got).any() and np.isfinite(got).any()  # both branches were taken
