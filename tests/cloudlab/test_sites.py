"""The held-out benchmark's sites: each loads, is what its provenance note says, and is
documented in SOURCES.md."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cloudcore._morphology import opening
from cloudlab.realdata import CLEAR, CLOUD, NODATA, SHADOW, SNOW
from cloudlab.sites import (
    SITES_DIR,
    WINDOWS,
    load_site,
    other_years,
    site_names,
    window_of,
    year_of,
)

SOURCES = (SITES_DIR.parent / "SOURCES.md").read_text(encoding="utf-8")


def test_at_least_five_sites_from_three_sensors() -> None:
    sites = [load_site(n) for n in site_names()]
    assert len(sites) >= 5
    families = {s.sensor.split()[0] for s in sites}  # Landsat, Sentinel-2, CBERS-4
    assert len(families) >= 3, families


@pytest.mark.parametrize("name", site_names())
def test_site_loads_with_valid_codes_and_enough_dates(name: str) -> None:
    site = load_site(name)
    s = site.series
    assert s.dates.size >= 12
    # Days apart, in order: each date's neighbours for ground that stays (mask.persist) are the
    # dates before and after it (cloudlab.sitescore.Solved).
    assert np.all(np.diff(s.dates.astype(np.int64)) >= 1)
    assert set(np.unique(s.reference).tolist()) <= {CLEAR, CLOUD, SHADOW, SNOW, NODATA}
    unseen = s.reference == NODATA
    assert np.isnan(s.values[:, 0][unseen]).all()
    assert np.isfinite(s.values).all(axis=1)[~unseen].all()
    assert np.nanmin(s.values) >= 0 and np.nanmax(s.values) <= 1
    # The bands are in the order of their wavelengths: the benchmark's whiteness test reads the
    # first as the shortest (cloudlab.sitescore.Solved).
    order = ["blue", "green", "red", "nir", "swir1", "swir2"]
    assert [order.index(b) for b in s.bands] == sorted(order.index(b) for b in s.bands)
    # Clouds are brighter than clear ground in the first visible band (the mapping's check).
    vis = s.values[:, 0]
    assert np.nanmedian(vis[s.reference == CLOUD]) > 2 * np.nanmedian(vis[s.reference == CLEAR])
    if name in WINDOWS:
        full = load_site(name, window=False).series
        assert full.dates.size > s.dates.size
    # The window cut from the whole file is the site as loaded (solve_folds reads each once).
    cut = window_of(load_site(name, window=False)).series
    assert np.array_equal(cut.dates, s.dates) and np.array_equal(cut.reference, s.reference)
    assert f"real-clouds/{name}.npz" in SOURCES
    assert (SITES_DIR / f"{name}.md").exists() or name == "p035r032-landsat"


def test_thin_cloud_is_read_as_cloud(tmp_path: Path) -> None:
    values = np.full((12, 2, 2, 2), 500, np.uint16)
    reference = np.zeros((12, 2, 2), np.uint8)
    reference[3, 0, 0] = 1
    values[3, :, 0, 0] = 4000
    values[5, 1, 1, 1] = 0  # no data in one band: the entry is not observed
    np.savez_compressed(
        tmp_path / "tiny.npz",
        values=values,
        scale=1e-4,
        offset=0.0,
        nodata=0,
        reference=reference,
        reference_source="test",
        dates=[f"2020-01-{d:02d}" for d in range(1, 13)],
        scene_ids=[""] * 12,
        bands=["blue", "red"],
        sensor="Test",
        gsd=10.0,
        crs="",
        transform=np.zeros(6),
    )
    site = load_site("tiny", folder=tmp_path)
    assert site.series.reference[3, 0, 0] == CLOUD
    assert site.series.reference[5, 1, 1] == NODATA
    assert np.isnan(site.series.values[5, :, 1, 1]).all()
    assert site.series.values[0, 0, 0, 0] == pytest.approx(0.05)


def _opened_away(reference: np.ndarray, code: int, radius: int) -> float:
    """The share of a class's pixels that an opening by a (2·radius + 1)² square removes, over
    the dates where the class has at least 20 pixels and leaves 5 % of the frame (a date covered
    whole says nothing of shapes); the frame's edge padded by its own values, so a region cut by
    the crop is not counted as too thin."""
    side = 2 * radius + 1
    total = removed = 0
    for date in reference:
        region = date == code
        if region.sum() < 20 or region.mean() > 0.95:
            continue
        padded = np.pad(region, side, mode="edge")
        kept = opening(padded, radius)[side:-side, side:-side]
        total += int(region.sum())
        removed += int((region & ~kept).sum())
    return removed / total


def test_the_fmask_references_grow_their_clouds_by_three_pixels_and_scl_does_not() -> None:
    # Fmask's default dilates clouds and shadows by a 7 x 7 square: its regions are unions of
    # such squares, so an opening by 7 x 7 leaves them as they are and one by 9 x 9 does not.
    fmask = load_site("p035r032-landsat").series.reference
    assert _opened_away(fmask, CLOUD, 3) < 0.01
    assert _opened_away(fmask, CLOUD, 4) > 0.03
    union = np.where(np.isin(fmask, (CLOUD, SHADOW)), CLOUD, CLEAR)
    assert _opened_away(union, CLOUD, 3) < 0.01
    assert _opened_away(union, CLOUD, 4) > 0.03
    # Sentinel-2's SCL is not grown: a 7 x 7 opening already takes its clouds' thin parts.
    scl = load_site("s2_nrt_romania_10m").series.reference
    assert _opened_away(scl, CLOUD, 3) > 0.03


@pytest.mark.parametrize("name", site_names())
def test_every_fmask_site_and_only_those_have_fmasks_buffer(name: str) -> None:
    site = load_site(name)
    assert site.reference_buffer == (3 if site.reference_source.startswith("Fmask") else 0)


@pytest.mark.parametrize("name", site_names())
def test_other_years_are_whole_years_outside_the_window_with_enough_dates(name: str) -> None:
    full = load_site(name, window=False)
    years = other_years(full)
    if name not in WINDOWS:  # one series only (CBERS's 24 composites)
        assert years == []
        return
    window_year = int(WINDOWS[name][0][:4])
    assert WINDOWS[name] == (f"{window_year}-01-01", f"{window_year}-12-31")
    assert window_year not in years and years
    all_years = full.series.dates.astype("datetime64[Y]").astype(int) + 1970
    for year in years:
        dates = year_of(full, year).series.dates
        assert dates.size >= 12
        assert dates.size == (all_years == year).sum()  # every date of the year, no other
        assert (dates.astype("datetime64[Y]").astype(int) + 1970 == year).all()
    # Every year left out either is the window or has fewer than 12 dates.
    for year in set(all_years.tolist()) - set(years) - {window_year}:
        assert (all_years == year).sum() < 12


def test_p035r032s_other_years_are_the_four_whole_years_of_its_stack() -> None:
    # The stack holds 2008-04 to 2013-05: 23, 22, 18, 22 (the window), 17 and 3 dates a year.
    assert other_years(load_site("p035r032-landsat", window=False)) == [2008, 2009, 2010, 2012]


def test_a_year_keeps_its_first_and_last_day_and_nothing_across_the_new_year() -> None:
    full = load_site("landsat_p013r030_harvard_transect", window=False)
    days = np.array(["2005-12-31", "2006-01-01", "2006-12-31", "2007-01-01"], "datetime64[D]")
    years = full.series.dates.astype("datetime64[Y]").astype(int) + 1970
    first, last = np.flatnonzero(years == 2006)[[0, -1]]
    at = [first - 1, first, last, last + 1]  # the dates either side of 2006's edges
    moved = full.series.dates.copy()
    moved[at] = days  # moved onto the edges, the order kept
    edged = replace(full, series=replace(full.series, dates=moved))
    kept = year_of(edged, 2006).series.dates
    assert days[1] in kept and days[2] in kept
    assert days[0] not in kept and days[3] not in kept
    assert other_years(full, min_dates=23) == []


def test_the_transects_short_years_are_those_of_7_to_11_dates() -> None:
    # From the data: 1986 8, 1987 9, 1989 11, 1992 10, 1993-1994 11, 1995-1996 10, 1997 9,
    # 1998 7 dates; 1984 (4) and 1985 (6) fewer, 1988, 1990 and 1991 (12-13) more.
    full = load_site("landsat_p013r030_harvard_transect", window=False)
    short = other_years(full, min_dates=7, max_dates=11)
    assert short == [1986, 1987, 1989, *range(1992, 1999)]
    assert not set(short) & set(other_years(full))
