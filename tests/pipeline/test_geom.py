"""Outlines and footprint overlaps."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.geom import densify, footprint_centre, overlap_fraction

SQUARE = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]


def test_densify_walks_every_edge_from_its_corner() -> None:
    xs, ys = densify(SQUARE, 4)
    assert xs.shape == ys.shape == (16,)
    np.testing.assert_array_equal(xs[:5], [0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(ys[4:9], [0.0, 0.25, 0.5, 0.75, 1.0])


def test_overlap_is_over_the_smaller_footprint() -> None:
    half = [(0.5, 0.0), (1.5, 0.0), (1.5, 1.0), (0.5, 1.0)]
    small = [(0.0, 0.0), (0.5, 0.0), (0.5, 0.5), (0.0, 0.5)]
    assert overlap_fraction(SQUARE, half) == pytest.approx(0.5)
    assert overlap_fraction(SQUARE, small) == pytest.approx(1.0)
    assert overlap_fraction(SQUARE, [(5.0, 5.0), (6.0, 5.0), (6.0, 6.0)]) == 0.0
    # Clockwise corners are the same footprint.
    assert overlap_fraction(SQUARE[::-1], half) == pytest.approx(0.5)


def test_corners_out_of_order_do_not_raise() -> None:
    # A footprint whose corners are listed out of order crosses itself; GEOS refuses to
    # intersect such a polygon, so it is repaired first.
    bow_tie = [(0.0, 0.0), (2.0, 2.0), (2.0, 0.0), (0.0, 1.0)]
    assert 0.0 < overlap_fraction(bow_tie, SQUARE) <= 1.0


def test_point_footprints_match_only_themselves() -> None:
    assert overlap_fraction([(1.0, 2.0)], [(1.0, 2.0)]) == 1.0
    assert overlap_fraction([(1.0, 2.0)], [(1.0, 2.5)]) == 0.0


def test_footprint_centre_is_the_mean_of_the_corners() -> None:
    corners = [(113.2, 42.1), (119.6, 42.3), (119.9, 37.6), (113.6, 37.4)]
    lon, lat = footprint_centre(corners)
    assert lon == pytest.approx(116.575) and lat == pytest.approx(39.85)
