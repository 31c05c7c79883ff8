"""Outlines and footprints: densified polygon edges, and how much two footprints overlap."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

__all__ = ["METRES_PER_DEGREE", "densify", "footprint_centre", "overlap_fraction"]

Point = tuple[float, float]

#: Metres per degree of latitude (and of longitude at the equator): enough for sizes and GSDs.
METRES_PER_DEGREE = 111_320.0


def footprint_centre(corners: Sequence[Point]) -> Point:
    """The mean of a footprint's corners: the scene centre of GF-4 metadata (its sun angles
    are given there)."""
    return (
        sum(c[0] for c in corners) / len(corners),
        sum(c[1] for c in corners) / len(corners),
    )


def densify(corners: Sequence[Point], per_edge: int) -> tuple[np.ndarray, np.ndarray]:
    """Points along a closed polygon's edges, ``per_edge`` per edge starting at each corner.

    A straight edge in one CRS is curved in another (a UTM rectangle in lon/lat, an RPC image
    outline on the ground), so outlines are densified before they are transformed.

    Parameters
    ----------
    corners
        The polygon's corners in order (not repeated at the end).
    per_edge
        Points per edge, the corner included, the next corner not.

    Returns
    -------
    tuple of numpy.ndarray
        x and y of ``len(corners) · per_edge`` points.
    """
    xs, ys = [], []
    f = np.linspace(0.0, 1.0, per_edge, endpoint=False)
    for (x0, y0), (x1, y1) in itertools.pairwise([*corners, corners[0]]):
        xs.append(x0 + f * (x1 - x0))
        ys.append(y0 + f * (y1 - y0))
    return np.concatenate(xs), np.concatenate(ys)


def overlap_fraction(a: Sequence[Point], b: Sequence[Point]) -> float:
    """Area of ``a ∩ b`` over the smaller of the two areas (lon/lat footprints).

    Degrees are fine here: both footprints lie within a few degrees of each other when they
    overlap at all, and only the ratio is used.

    Parameters
    ----------
    a, b
        Footprint corners in order; a single point when the metadata has no corners.

    Returns
    -------
    float
        In [0, 1]; for point footprints 1 when the points are equal (same scene), else 0.
    """
    if len(a) < 3 or len(b) < 3:
        return 1.0 if a[0] == b[0] else 0.0
    import shapely  # here: only `pipeline batch` groups footprints, workers never do

    # make_valid: corners listed out of order give a self-intersecting outline, on which
    # GEOS's intersection raises; its valid form covers the same ground.
    pa, pb = (shapely.make_valid(shapely.Polygon(p)) for p in (a, b))
    smaller = min(pa.area, pb.area)
    if smaller <= 0:
        return 0.0
    return float(pa.intersection(pb).area / smaller)
