"""The pixel's own departure from the ground, interpolated in time (cloudcore.departure)."""

from __future__ import annotations

import numpy as np
import pytest

from cloudcore.departure import interpolated_departure


def test_each_entry_reads_its_nearest_evidence_before_and_after_weighted_by_time() -> None:
    # One pixel, five dates: evidence on dates 0 and 3 (times 0 and 4), none on the others.
    residual = np.array([1.0, 50.0, 60.0, 3.0, 70.0], np.float32)[:, None]
    evidence = np.array([True, False, False, True, False])[:, None]
    times = np.array([0.0, 1.0, 3.0, 4.0, 9.0])
    out = interpolated_departure(residual, evidence, times)[:, 0]
    assert out.dtype == np.float32
    # Date 1 is 1 after date 0 and 3 before date 3: 3/4 of the first, 1/4 of the second.
    assert out[1] == pytest.approx(0.75 * 1.0 + 0.25 * 3.0)
    assert out[2] == pytest.approx(0.25 * 1.0 + 0.75 * 3.0)
    # An evidence date reads the others, not itself: date 0 has none before, date 3 none after.
    assert out[0] == pytest.approx(3.0) and out[3] == pytest.approx(1.0)
    assert out[4] == pytest.approx(3.0)  # after the last evidence: its value


def test_a_pixel_never_kept_gets_nothing_and_a_nan_residual_is_no_evidence() -> None:
    residual = np.array([[0.2, 0.5], [np.nan, 0.1], [0.4, 0.3]], np.float32)
    evidence = np.array([[False, True], [True, False], [False, False]])
    out = interpolated_departure(residual, evidence, np.array([0.0, 1.0, 2.0]))
    # Pixel 0's only evidence is NaN: none at all. Pixel 1's only evidence is date 0.
    assert np.array_equal(out[:, 0], np.zeros(3, np.float32))
    assert np.array_equal(out[:, 1], np.array([0.0, 0.5, 0.5], np.float32))


def test_the_dates_order_does_not_matter_and_ties_weigh_alike() -> None:
    rng = np.random.default_rng(3)
    n = 9
    residual = rng.normal(size=(n, 4, 5)).astype(np.float32)
    evidence = rng.random((n, 4, 5)) < 0.5
    times = rng.permutation(n) * 3.5 + rng.uniform(0, 1, n)  # distinct, out of order
    out = interpolated_departure(residual, evidence, times)
    order = rng.permutation(n)
    shuffled = interpolated_departure(residual[order], evidence[order], times[order])
    back = np.empty_like(shuffled)
    back[order] = shuffled
    assert np.array_equal(back, out)
    # Evidence on both sides at equal distance: the mean of the two.
    r = np.array([2.0, 9.0, 4.0])[:, None]
    e = np.array([True, False, True])[:, None]
    assert interpolated_departure(r, e, np.array([5.0, 5.0, 5.0]))[1, 0] == pytest.approx(3.0)


def test_the_own_date_never_enters_its_own_value() -> None:
    rng = np.random.default_rng(0)
    residual = rng.normal(size=(6, 30)).astype(np.float32)
    evidence = rng.random((6, 30)) < 0.6
    times = np.arange(6.0)
    before = interpolated_departure(residual, evidence, times)
    changed = residual.copy()
    changed[2] += 10.0
    after = interpolated_departure(changed, evidence, times)
    assert np.array_equal(before[2], after[2])
    assert not np.array_equal(before[[1, 3]], after[[1, 3]])  # its neighbours read it


@pytest.mark.parametrize(
    ("shape", "evidence_shape", "times"),
    [
        ((3, 4), (3, 5), [0.0, 1.0, 2.0]),
        ((3, 4), (3, 4), [0.0, 1.0]),
        ((2, 4), (2, 4), [0.0, np.nan]),
    ],
)
def test_shapes_that_do_not_match_or_a_missing_time_are_refused(
    shape: tuple[int, int], evidence_shape: tuple[int, int], times: list[float]
) -> None:
    with pytest.raises(ValueError, match="interpolated_departure"):
        interpolated_departure(np.zeros(shape), np.ones(evidence_shape, bool), np.array(times))
