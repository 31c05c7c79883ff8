"""cloudcore.scene_refit: the blocks' sample of a date is the one decompose takes of the whole.

The refit is a statistical fit, so a wrong sample of the same pixels moves it by less than the
tolerance of the block-wise solve (tests/cloudcore/tolerances.py): the sample is checked here
exactly, pixel by pixel.
"""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore.scene import Block
from cloudcore.scene_refit import row_offsets

H, W, N = 30, 23, 4


def _blocks(stack: np.ndarray, tile: tuple[int, int]) -> list[Block]:
    """Blocks of ``tile`` (rows, columns) at their origins, given in a shuffled order."""
    windows = [(r, c) for r in range(0, H, tile[0]) for c in range(0, W, tile[1])]
    np.random.default_rng(1).shuffle(windows)
    blocks = []
    for r, c in windows:
        block = Block(stack[:, r : r + tile[0], c : c + tile[1]], "float64", origin=(r, c))
        block.L = block.D.copy()  # any ground: the sample does not depend on it
        block.refit_begin(np.arange(N), np.eye(N)[:, :1])
        blocks.append(block)
    return blocks


@pytest.mark.parametrize("tile", [(7, 5), (30, 23), (1, 23), (11, 23)])
@pytest.mark.parametrize("stride", [1, 3, 8])
def test_blocks_sample_the_whole_matrix_strided_rows(tile: tuple[int, int], stride: int) -> None:
    rng = np.random.default_rng(stride)
    pixel = (np.arange(H * W).reshape(H, W) + 1) / (H * W + 1)  # each pixel's own value
    stack = np.repeat(pixel[None], N, axis=0)
    stack[rng.random(stack.shape) < 0.3] = np.nan
    j = 2
    blocks = _blocks(stack, tile)
    offsets = row_offsets([b.refit_row_counts(j) for b in blocks])
    parts = [b.refit_sample(j, offsets, stride) for b in blocks]
    ranks = np.concatenate([p[0] for p in parts])
    values = np.concatenate([p[2][:, j] for p in parts])[np.argsort(ranks, kind="stable")]
    observed = np.isfinite(stack[j]).ravel()  # the whole frame's pixels in row-major order
    expected = np.flatnonzero(observed)[::stride]  # cloudcore.refit.strided_rows' sample
    assert np.array_equal(np.sort(ranks), np.arange(0, observed.sum(), stride))
    assert np.array_equal(values, pixel.ravel()[expected])


def test_blocks_need_distinct_origins() -> None:
    counts = [((0, 0), np.ones(3, np.int64)), ((0, 0), np.ones(3, np.int64))]
    with pytest.raises(ValueError, match="distinct origins"):
        row_offsets(counts)
