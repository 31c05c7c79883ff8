"""The quicklooks' samples kept by the mask pass are the strided read of the stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.grid.tiling import TileGrid, Window
from pipeline.outputs.products import write_quicklooks
from pipeline.store.previews import PreviewSpec, assemble, keep_band, keep_mask, preview_step


def test_cores_samples_assemble_to_the_strided_scene(tmp_path: Path) -> None:
    # A stride (7) that divides neither the tile (64) nor the grid (300 × 250), and a window
    # padded by one pixel around the core.
    height, width, n, bands = 300, 250, 3, (2, 0, 1)
    step = preview_step(height, width, 43)
    assert step == 7
    rng = np.random.default_rng(0)
    observed = rng.random((n, 3, height, width)).astype(np.float32)
    clear = rng.random((n, 3, height, width)).astype(np.float32)
    mask = rng.integers(0, 4, (n, height, width)).astype(np.uint8)
    spec = PreviewSpec(bands, step, str(tmp_path / "previews"))
    grid = TileGrid(height, width, 64, 16)
    for tile in grid:
        core = tile.core
        r0, c0 = max(core.row_off - 1, 0), max(core.col_off - 1, 0)
        window = Window(
            r0, c0, min(core.row_end + 1, height) - r0, min(core.col_end + 1, width) - c0
        )
        # The stage task keeps the observations of the core, a band's COG task the clear
        # values (here over a window the core is part of), the mask task the codes.
        for b in range(3):
            keep_band(spec, tile, "observed", b, observed[:, b, *core.slices], core)
            keep_band(spec, tile, "clear", b, clear[:, b, *window.slices], window)
        keep_mask(spec, tile, mask[:, *core.slices])
    left, right, codes = assemble(spec, list(grid), range(n), height, width)
    every = slice(None, None, step)
    expected = np.stack([observed[:, b, every, every] for b in bands], axis=-1)
    assert left.shape == expected.shape == (n, 43, 36, 3)
    assert np.array_equal(left, expected)
    assert np.array_equal(right, np.stack([clear[:, b, every, every] for b in bands], axis=-1))
    assert np.array_equal(codes, mask[:, every, every])

    # Some dates only, in the order asked (a quicklook task per date reads its own).
    some = assemble(spec, list(grid), (2, 0), height, width)
    for whole, picked in zip((left, right, codes), some, strict=True):
        assert np.array_equal(picked, whole[[2, 0]])

    # A quicklook written alone is the same file as when every date's is written together.
    # (The panels are labelled with the file's name: the same names in two folders.)
    (tmp_path / "together").mkdir()
    (tmp_path / "alone").mkdir()
    together = [tmp_path / "together" / f"date-{i}.png" for i in range(n)]
    write_quicklooks(spec, list(grid), together, height=height, width=width)
    alone = tmp_path / "alone" / "date-1.png"
    write_quicklooks(spec, list(grid), [alone], height=height, width=width, dates=(1,))
    assert alone.read_bytes() == together[1].read_bytes() != together[0].read_bytes()
