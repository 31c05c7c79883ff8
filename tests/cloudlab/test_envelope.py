"""cloudlab.envelope: a written value held within its pixel's kept observations."""

from __future__ import annotations

import numpy as np
import pytest

from cloudlab.envelope import MIN_KEPT_DATES, kept_envelope, within_envelope


def test_the_envelope_is_the_range_of_the_kept_observations_in_each_band():
    rng = np.random.default_rng(0)
    obs = rng.uniform(0.0, 1.0, size=(2, 6, 5))  # bands, dates, pixels
    kept = rng.uniform(size=(6, 5)) < 0.7
    kept[:, 0] = [True, True, True, False, False, False]  # exactly three kept dates
    kept[:, 1] = [True, True, False, False, False, False]  # two: no envelope
    obs[1, 0, 2] = np.nan  # a kept date not observed in one band is no evidence there
    low, high = kept_envelope(obs, kept)
    for band in range(2):
        for pixel in range(5):
            values = obs[band, kept[:, pixel], pixel]
            values = values[np.isfinite(values)]
            if values.size < MIN_KEPT_DATES:
                assert np.isnan(low[band, pixel]) and np.isnan(high[band, pixel])
            else:
                assert low[band, pixel] == values.min()
                assert high[band, pixel] == values.max()
    assert np.isnan(low[:, 1]).all()
    assert low[0, 0] == obs[0, :3, 0].min() and high[0, 0] == obs[0, :3, 0].max()


def test_quantile_edges_lie_inside_the_range():
    rng = np.random.default_rng(1)
    obs = rng.uniform(size=(1, 20, 50))
    kept = np.ones((20, 50), dtype=bool)
    low, high = kept_envelope(obs, kept, (0.1, 0.9))
    assert np.all(low > obs.min(axis=1)) and np.all(high < obs.max(axis=1))
    np.testing.assert_allclose(low, np.quantile(obs, 0.1, axis=1))
    with pytest.raises(ValueError, match="quantiles"):
        kept_envelope(obs, kept, (0.9, 0.1))


def test_only_written_values_with_an_envelope_move_and_only_to_its_nearer_edge():
    values = np.array([[0.05, 0.95, 0.5, 0.05, 0.05]])
    low = np.array([[0.2, 0.2, 0.2, 0.2, np.nan]])
    high = np.array([[0.8, 0.8, 0.8, 0.8, np.nan]])
    written = np.array([True, True, True, False, True])
    out = within_envelope(values, low, high, written)
    # below the envelope: its low edge; above: its high; inside: as written; a kept
    # observation and a pixel without an envelope: unchanged
    np.testing.assert_array_equal(out, [[0.2, 0.8, 0.5, 0.05, 0.05]])
    assert values[0, 0] == 0.05  # the input is not changed in place
