"""The date's departure from the ground, spread from its clear pixels (cloudcore.offset)."""

from __future__ import annotations

import numpy as np

from cloudcore.compose import compose
from cloudcore.masks import CLEAR, CLOUD, NODATA
from cloudcore.offset import PRIOR, clear_offset, offset_margin


def test_a_constant_departure_comes_back_up_to_the_prior() -> None:
    """A departure c seen everywhere is c everywhere, shrunk by the prior's pseudo-count at
    most: c · count / (count + PRIOR · block²), count ≥ a quarter of a block at a corner."""
    residual = np.full((2, 40, 52), 0.03, np.float32)
    out = clear_offset(residual, np.ones(residual.shape, bool), block=8, scale=8.0)
    worst = 0.03 / (1 + 4 * PRIOR)  # a corner block sees a quarter of the Gaussian's weight
    assert out.shape == residual.shape and out.dtype == np.float32
    assert np.all(out <= 0.03 + 1e-7) and np.all(out >= worst - 1e-7)


def test_only_the_clear_entries_are_read_and_the_offset_fades_far_from_them() -> None:
    rng = np.random.default_rng(0)
    residual = rng.normal(0.02, 0.005, (3, 64, 96)).astype(np.float32)
    clear = np.zeros(residual.shape, bool)
    clear[:, :, :24] = True  # the left quarter is clear; a cloud covers the rest
    clouded = residual.copy()
    clouded[~clear] = 0.7  # the cloud's own brightness: never evidence
    out = clear_offset(clouded, clear, block=8, scale=4.0)
    assert np.array_equal(out, clear_offset(residual, clear, block=8, scale=4.0))
    reach = 24 + offset_margin(block=8, scale=4.0)
    assert np.all(out[:, :, reach:] == 0.0)  # no clear pixel within reach: the ground alone
    assert np.all(np.abs(out[:, :, :20] - 0.02) < 0.01)  # near the clear ones: their departure


def test_a_window_reaching_the_margin_gives_the_whole_image_s_values() -> None:
    """What the pipeline relies on to compute the offset per tile: a window whose origin is a
    multiple of the block and that reaches :func:`offset_margin` beyond the pixels wanted."""
    rng = np.random.default_rng(1)
    residual = rng.normal(0.0, 0.03, (2, 100, 130)).astype(np.float32)
    clear = rng.random(residual.shape) > 0.4
    whole = clear_offset(residual, clear, block=8, scale=6.0)
    margin = offset_margin(block=8, scale=6.0)
    r0, r1, c0, c1 = 40, 72, 48, 80  # the pixels wanted, block-aligned
    rows = slice(r0 - margin, r1 + margin)
    cols = slice(max(c0 - margin, 0), min(c1 + margin, 130))
    part = clear_offset(residual[:, rows, cols], clear[:, rows, cols], block=8, scale=6.0)
    inner = part[:, margin : margin + r1 - r0, c0 - cols.start : c1 - cols.start]
    assert np.array_equal(inner, whole[:, r0:r1, c0:c1])


def test_compose_adds_the_offset_where_the_ground_is_written_over_an_observation() -> None:
    rng = np.random.default_rng(2)
    bands, dates, rows, cols = 2, 3, 24, 32
    ground = rng.uniform(0.1, 0.4, (bands, dates, rows, cols))
    observation = ground + 0.05  # this date is 0.05 brighter than the ground, everywhere
    codes = np.full((dates, rows, cols), CLEAR, np.uint8)
    codes[:, 8:16, 8:16] = CLOUD
    observation[:, :, 8:16, 8:16] = 0.9  # under the cloud
    codes[1, :, -4:] = NODATA
    observation[:, 1, :, -4:] = np.nan
    plain = compose(observation, ground, codes, haze="ground")
    out = compose(observation, ground, codes, haze="ground", offset=4.0)
    kept = np.broadcast_to(codes == CLEAR, out.shape)
    assert np.array_equal(out[kept], observation[kept])  # clear pixels: as observed
    cloud = np.broadcast_to(codes == CLOUD, out.shape)
    assert np.allclose(plain[cloud], ground[cloud])
    assert np.allclose(out[cloud], ground[cloud] + 0.05, atol=0.002)  # the departure restored
    unseen = np.broadcast_to(codes == NODATA, out.shape)
    assert np.array_equal(out[unseen], ground[unseen])  # not observed: the ground, as before


def test_a_nan_residual_is_no_evidence() -> None:
    """A date a tile left out has NaN layers where it observed: weighted or not, its residual
    must not spread NaN into the offset of the pixels around."""
    rng = np.random.default_rng(3)
    residual = rng.normal(0.01, 0.002, (2, 48, 48)).astype(np.float32)
    residual[0, 10:14, 10:14] = np.nan
    out = clear_offset(residual, np.ones(residual.shape, bool), block=8, scale=4.0)
    assert np.isfinite(out).all()
    assert np.allclose(out[0], 0.01, atol=0.004)
