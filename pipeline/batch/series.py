"""Grouping products into series: same sensor, same time window, overlapping footprints.

Windows are ``grouping.window_days`` days long and counted from ``grouping.window_origin``, so a
new product can only ever change the series of its own window. Each series has a deterministic
id (a hash of its sensor and sorted image ids) that names its output folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from pipeline.batch.config import GroupingSection
from pipeline.batch.scan import Product
from pipeline.geom import overlap_fraction
from pipeline.ids import json_digest

__all__ = ["Series", "group_products", "series_id"]


@dataclass(frozen=True)
class Series:
    """Products of one sensor over one area within one time window, in time order."""

    id: str
    sensor: str
    window_start: date
    products: tuple[Product, ...]

    @property
    def start(self) -> datetime:
        """Start of the first acquisition."""
        return min(p.start for p in self.products)

    @property
    def end(self) -> datetime:
        """End of the last acquisition."""
        return max(p.end for p in self.products)


def series_id(sensor: str, image_ids: Sequence[str]) -> str:
    """Deterministic series id: ``gf4-<sensor>-`` and a hash of the sorted image ids.

    Parameters
    ----------
    sensor
        ``"PMS"`` or ``"IRS"``.
    image_ids
        The image ids of the series' products, in any order.

    Returns
    -------
    str
        ``gf4-<sensor>-<12 hex digits>``.
    """
    digest = json_digest({"sensor": sensor, "products": sorted(image_ids)}, 12)
    return f"gf4-{sensor.lower()}-{digest}"


def _by_footprint(members: Sequence[Product], min_overlap: float) -> list[list[Product]]:
    """Products of one window, each in the first group whose first footprint it overlaps."""
    groups: list[list[Product]] = []
    for p in members:
        for g in groups:
            if overlap_fraction(g[0].footprint, p.footprint) >= min_overlap:
                g.append(p)
                break
        else:
            groups.append([p])
    return groups


def group_products(products: Sequence[Product], grouping: GroupingSection) -> list[Series]:
    """Group products into series (same sensor, same time window, overlapping footprints).

    Windows are ``window_days`` long and counted from ``window_origin``, so a product that
    arrives late joins the series of its own window and never reshuffles another window. In a
    window, products are taken in time order; each joins the first series whose first
    footprint it overlaps by at least ``min_overlap`` of the smaller footprint, else starts a
    new one (anchoring on the first footprint keeps a chain of partly overlapping scenes from
    growing one ever larger grid).

    Parameters
    ----------
    products
        Products of any sensors and times.
    grouping
        The ``grouping`` section.

    Returns
    -------
    list of Series
        Every series, including those with fewer than ``min_dates`` products (the caller
        decides), sorted by sensor, window and time of their first product.
    """
    origin = datetime(*grouping.window_origin.timetuple()[:3], tzinfo=UTC)
    window_length = timedelta(days=grouping.window_days)
    buckets: dict[tuple[str, int], list[Product]] = {}
    for p in sorted(products, key=lambda p: (p.sensor, p.time, p.image_id)):
        window = math.floor((p.time - origin) / window_length)
        buckets.setdefault((p.sensor, window), []).append(p)
    out: list[Series] = []
    for (sensor, window), members in sorted(buckets.items()):
        start = (origin + window * window_length).date()
        for g in _by_footprint(members, grouping.min_overlap):
            out.append(Series(series_id(sensor, [p.image_id for p in g]), sensor, start, tuple(g)))
    return out
