"""cloudcore._morphology against scipy.ndimage: the same booleans, borders included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

# The mask's and the refinement's morphology (cloudcore._morphology, private to the package) is
# held to scipy.ndimage on its own, by the module's path: through the public mask a wrong
# border would show only where a cloud touches the edge.
from cloudcore._morphology import dilate, erode, extend, opening


def _square(radius: int) -> np.ndarray:
    """scipy's structure for a square within each image of a (n, h, w) stack."""
    size = 2 * radius + 1
    structure = np.zeros((3, size, size), dtype=bool)
    structure[1] = True
    return structure


def _stack(shape: tuple[int, ...], density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = rng.random(shape) < density
    # Blobs as well as specks, so that openings keep something.
    image |= ndimage.binary_dilation(rng.random(shape) < density / 20, structure=_square(3))
    return image


SHAPES = [(3, 40, 57), (1, 5, 5), (2, 1, 9), (2, 7, 1), (4, 3, 4), (2, 64, 64)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("radius", [0, 1, 2, 3])
@pytest.mark.parametrize("density", [0.1, 0.6, 0.95])
def test_same_as_scipy(shape: tuple[int, ...], radius: int, density: float) -> None:
    image = _stack(shape, density, seed=radius * 31 + shape[1])
    structure = _square(radius)
    expected = {
        "erode": ndimage.binary_erosion(image, structure=structure),
        "dilate": ndimage.binary_dilation(image, structure=structure),
        "opening": ndimage.binary_opening(image, structure=structure),
    }
    for name, op in (("erode", erode), ("dilate", dilate), ("opening", opening)):
        got = op(image, radius)
        assert got.dtype == np.bool_ and got.shape == image.shape
        np.testing.assert_array_equal(got, expected[name], err_msg=f"{name}, radius {radius}")


@pytest.mark.parametrize("radius", [4, 5, 7, 8, 16, 31, 32, 40])
@pytest.mark.parametrize("density", [0.002, 0.3, 0.97])
def test_same_as_scipy_at_the_mask_s_reaches(radius: int, density: float) -> None:
    """The radii the mask dilates by (``near_reach`` 16, ``flat_reach`` 32) and those either
    side of a power of two, where the doubling's last two spans overlap most and least; the
    images narrower than the square in one axis and wider in the other."""
    image = _stack((2, 23, 90), density, seed=radius)
    structure = _square(radius)
    np.testing.assert_array_equal(
        dilate(image, radius), ndimage.binary_dilation(image, structure=structure)
    )
    np.testing.assert_array_equal(
        erode(image, radius), ndimage.binary_erosion(image, structure=structure)
    )


def test_in_place_and_given_scratch() -> None:
    image = _stack((3, 50, 41), 0.5, seed=7)
    expected = ndimage.binary_opening(image, structure=_square(2))
    original = image.copy()
    scratch = np.empty_like(image)
    eroded = erode(image, 2, scratch=scratch)
    np.testing.assert_array_equal(image, original)  # the input is only read
    np.testing.assert_array_equal(eroded, ndimage.binary_erosion(original, structure=_square(2)))
    result = opening(image, 2, out=image, scratch=scratch)
    assert result is image
    np.testing.assert_array_equal(image, expected)


def test_whole_image_eroded_when_square_exceeds_it() -> None:
    image = np.ones((2, 3, 3), dtype=bool)
    assert not erode(image, 2).any()
    assert dilate(np.zeros_like(image), 2).sum() == 0


def test_rejects_what_is_not_a_boolean_stack() -> None:
    with pytest.raises(ValueError, match="boolean"):
        erode(np.ones((3, 4), dtype=np.uint8), 1)
    with pytest.raises(ValueError, match="radius"):
        dilate(np.ones((2, 3, 4), dtype=bool), -1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reach", [1, 3, 50])
def test_extend_is_scipys_geodesic_dilation(shape: tuple[int, ...], reach: int) -> None:
    """A seed grows into the allowed pixels connected to it, one 3 × 3 step at a time, at most
    ``reach`` steps: ``binary_dilation`` with a mask, as many iterations."""
    seeds = _stack(shape, 0.02, seed=reach + shape[2])
    allowed = _stack(shape, 0.5, seed=reach + shape[1] + 7)
    expected = ndimage.binary_dilation(
        seeds, structure=_square(1), iterations=reach, mask=allowed | seeds
    )
    got = extend(seeds, allowed, reach)
    assert np.array_equal(got, expected)
    assert got is not seeds and (got >= seeds).all()
