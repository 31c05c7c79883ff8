"""keep_observed: the values and provenance the mask pass writes for a core, entry by entry.

Its compiled pass is compared bit for bit with the composition it replaces, written here from
the public pieces (:func:`cloudcore.kept.keep_clear`, :func:`provenance_codes`) as the rule
says it: filled entries clip(D − R + offset, 0, 1), kept ones the observation, unobserved ones
no data unless the provider flagged them. The clip is written out (below 0: 0, above 1: 1,
anything else as it is) rather than read from ``np.clip``, whose result for −0 changed in
NumPy 2.1.
"""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore.kept import keep_clear
from cloudcore.masks import NODATA
from pipeline.grid.tiling import Window
from pipeline.outputs.kept import FILLED, FLAGGED, OBSERVED, keep_observed, provenance_codes

SHAPE = (4, 9, 11)  # dates, rows, cols of the core


def _expected(
    clear: np.ndarray,
    observation: np.ndarray,
    keep: np.ndarray,
    flagged: np.ndarray | None,
    offset: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray]:
    clear = clear.copy()
    if offset is not None:
        residual, shift = offset
        shifted = observation - residual
        shifted += shift
        shifted[shifted < 0] = 0.0
        shifted[shifted > 1] = 1.0
        filled = ~keep & np.isfinite(observation) & np.isfinite(shifted)
        np.copyto(clear, shifted, where=filled)
    clear, kept = keep_clear(clear, observation, keep)
    unseen = ~np.isfinite(observation)
    clear[unseen if flagged is None else unseen & ~flagged] = np.nan
    provenance = provenance_codes(clear, kept)
    if flagged is not None:
        provenance[flagged & np.isfinite(clear)] = FLAGGED
    return clear, provenance


def _scene(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    observation = rng.uniform(-0.1, 1.1, SHAPE).astype(np.float32)
    observation[rng.random(SHAPE) < 0.2] = np.nan
    residual = rng.normal(0, 0.4, SHAPE).astype(np.float32)
    residual[rng.random(SHAPE) < 0.1] = np.nan  # a date a tile left out
    shift = rng.normal(0, 0.1, SHAPE).astype(np.float32)
    keep = rng.random(SHAPE) < 0.5
    # A filled entry whose D − R + offset is −0 (−0 − 0 − 0), which the clip leaves as it is.
    observation[0, 0, 1], residual[0, 0, 1], shift[0, 0, 1], keep[0, 0, 1] = -0.0, 0, -0.0, False
    clear = rng.uniform(0, 1, SHAPE).astype(np.float32)
    clear[rng.random(SHAPE) < 0.1] = np.nan
    clear[np.isnan(residual)] = np.nan  # a run's solved layers are NaN together
    return {
        "observation": observation,
        "residual": residual,
        "shift": shift,
        "clear": clear,
        "keep": keep,
        "flagged": rng.random(SHAPE) < 0.2,
    }


class _Stored:
    """A layer as the mask pass sees a Zarr array: a read returns a copy, a write stores."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __getitem__(self, key: tuple) -> np.ndarray:
        return self.values[key].copy()

    def __setitem__(self, key: tuple, value: np.ndarray) -> None:
        self.values[key] = value


def _in_context(x: np.ndarray, margin: int = 3) -> np.ndarray:
    """``x`` as a crop of a larger (dates, rows, cols) array: the non-contiguous view the mask
    pass crops from a core's context."""
    around = np.zeros((x.shape[0], x.shape[1] + 2 * margin, x.shape[2] + 2 * margin), x.dtype)
    around[:, margin:-margin, margin:-margin] = x
    return around[:, margin:-margin, margin:-margin]


@pytest.mark.parametrize("with_offset", [False, True])
@pytest.mark.parametrize("with_flags", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_compiled_pass_writes_the_composition_s_bits(
    seed: int, with_offset: bool, with_flags: bool
) -> None:
    s = _scene(seed)
    # As mask_row passes them: the residual contiguous, the offset, the codes kept and the
    # provider's flags cropped from the core's context.
    shift, keep = _in_context(s["shift"]), _in_context(s["keep"])
    offset = (s["residual"], shift) if with_offset else None
    flagged = _in_context(s["flagged"]) if with_flags else None
    # (time, band, rows, cols) layers read and written through an array API, a core inside.
    layers = np.full((SHAPE[0], 2, SHAPE[1] + 3, SHAPE[2] + 5), 7.0, np.float32)
    source = np.full_like(layers, 7.0)
    core = Window(1, 2, SHAPE[1], SHAPE[2])
    rows, cols = core.slices
    layers[:, 1, rows, cols] = s["clear"]
    source[:, 1, rows, cols] = s["observation"]

    provenance = keep_observed({"clear": _Stored(layers)}, source, core, 1, keep, flagged, offset)

    clear, expected = _expected(s["clear"], s["observation"], s["keep"], flagged, offset)
    written = layers[:, 1, rows, cols]
    assert written.tobytes() == clear.tobytes()  # NaN payloads and the sign of 0 included
    assert np.array_equal(provenance, expected)
    # Nothing outside the core or the band is touched.
    untouched = np.ones(layers.shape, bool)
    untouched[:, 1, rows, cols] = False
    assert (layers[untouched] == 7.0).all()
    # Every branch is taken: kept, filled, no data, flagged; with the offset, clipped both ways.
    codes = set(np.unique(provenance).tolist())
    assert {FILLED, OBSERVED, NODATA} <= codes
    assert (FLAGGED in codes) == with_flags
    if with_offset:
        filled = (provenance == FILLED) & np.isfinite(s["observation"])
        assert (clear[filled] == 0).any() and (clear[filled] == 1).any()
    # −0 where filled with the offset; without one the ground stays.
    assert np.signbit(written[0, 0, 1]) == with_offset


class _Unread(_Stored):
    """A layer that must not be read: only written."""

    def __getitem__(self, key: tuple) -> np.ndarray:
        raise AssertionError("the stored clear was read")


@pytest.mark.parametrize("seed", [0, 1])
def test_with_an_offset_and_no_flags_the_stored_ground_is_not_read(seed: int) -> None:
    """With the offset and no provider's flags every entry is written from the observation,
    from D − R + offset, or is no data where R is NaN (where a run's cube holds NaN in every
    solved layer, its ground too): the rows' ``clear`` is not read, and the result is the
    composition of a ground that is NaN."""
    s = _scene(seed)
    layers = np.full((SHAPE[0], 1, *SHAPE[1:]), 7.0, np.float32)
    source = s["observation"][:, None].copy()
    core = Window(0, 0, *SHAPE[1:])
    offset = (s["residual"], s["shift"])
    provenance = keep_observed({"clear": _Unread(layers)}, source, core, 0, s["keep"], None, offset)

    unknown = np.full(SHAPE, np.nan, np.float32)
    clear, expected = _expected(unknown, s["observation"], s["keep"], None, offset)
    assert layers[:, 0].tobytes() == clear.tobytes()
    assert np.array_equal(provenance, expected)
    # Where R is NaN an observed entry that is not kept is no data (the stored ground's NaN).
    lost = np.isnan(s["residual"]) & np.isfinite(s["observation"]) & ~s["keep"]
    assert lost.any() and np.isnan(layers[:, 0][lost]).all()
