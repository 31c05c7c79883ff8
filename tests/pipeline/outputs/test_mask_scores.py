"""The mask pass's held scores: cut to the columns still needed, the same values, no view kept
of the columns cut (so they are freed while the next core's scores are computed)."""

from __future__ import annotations

import numpy as np

from pipeline.outputs.kept import ResidualEdges
from pipeline.outputs.mask_scores import Scores, columns, from_column


def _scores(col_off: int, width: int, seed: int, with_optional: bool) -> Scores:
    rng = np.random.default_rng(seed)
    shape = (3, 5, width)

    def flags() -> np.ndarray | None:
        return rng.random(shape) < 0.5 if with_optional else None

    return Scores(
        col_off,
        rng.normal(size=shape).astype(np.float32),
        rng.normal(size=shape).astype(np.float32) if with_optional else None,
        rng.random(shape) < 0.9,
        flags(),
        flags(),
        flags(),
        ResidualEdges(col_off, col_off + width, 0, 2),
    )


def test_from_column_keeps_the_same_values_and_frees_the_rest() -> None:
    for with_optional in (True, False):
        held = [_scores(0, 8, 1, with_optional), _scores(8, 8, 2, with_optional)]
        cut = [from_column(s, 6) for s in held]
        assert cut[0].col_off == 6 and cut[0].col_end == 8
        assert cut[1] is held[1]  # starts after the column: held as it is
        assert cut[0].edges is held[0].edges  # the core to the right still reads them
        for a, b in zip(columns(held, 6, 13), columns(cut, 6, 13), strict=True):
            if a is None:
                assert b is None
            else:
                np.testing.assert_array_equal(a, b)
        assert not np.shares_memory(cut[0].bright, held[0].bright)
        assert cut[0].bright.base is None  # a copy of its own, not a view of the whole
