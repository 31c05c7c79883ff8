"""cloudcore.simulate.realistic: a ground that changes, clouds from thin to thick, shadows."""

import numpy as np

from cloudcore.simulate.realistic import realistic_case


def _image() -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(20, 230, (64, 64, 3)).astype(np.uint8)


def test_shapes_ranges_and_reproducibility() -> None:
    a = realistic_case(_image(), 6, size=32, rng=np.random.default_rng(0))
    b = realistic_case(_image(), 6, size=32, rng=np.random.default_rng(0))
    assert a.truth.shape == a.observed.shape == (3, 6, 32, 32)
    assert a.clouds.shape == a.shadows.shape == (6, 32, 32)
    for x in (a.truth, a.observed, a.clouds):
        assert x.min() >= 0 and x.max() <= 1
    np.testing.assert_array_equal(a.observed, b.observed)


def test_the_ground_changes_and_shadows_darken_it() -> None:
    s = realistic_case(_image(), 8, size=48, rng=np.random.default_rng(3), max_cover=0.6)
    # Each date has its own ground: not a constant image over time.
    spread = s.truth.std(axis=1).mean()
    assert spread > 0.01
    # Where a shadow falls and no cloud: darker than the date's ground, by the shadow's depth.
    shade = np.broadcast_to((s.shadows > 0) & (s.clouds == 0), s.truth.shape)
    assert shade.any()
    ratio = s.observed[shade] / np.maximum(s.truth[shade], 1e-9)
    assert np.allclose(ratio[s.truth[shade] > 0.01], 0.4)
    # The clear, unshadowed entries are the ground itself.
    clear = np.broadcast_to((s.shadows == 0) & (s.clouds == 0), s.truth.shape)
    np.testing.assert_allclose(s.observed[clear], s.truth[clear])


def test_a_darkest_pixel_rule_is_no_oracle_here() -> None:
    # On the paper's simulation the temporal minimum is nearly exact; with shadows and a
    # changing ground it is far from each date's ground.
    s = realistic_case(_image(), 10, size=48, rng=np.random.default_rng(4))
    minimum = s.observed.min(axis=1, keepdims=True)
    r = np.linalg.norm(minimum - s.truth) / np.linalg.norm(s.truth)
    assert r > 0.2
