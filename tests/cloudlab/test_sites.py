"""The held-out benchmark's sites: each loads, is what its provenance note says, and is
documented in SOURCES.md."""

from pathlib import Path

import numpy as np
import pytest

from cloudlab.realdata import CLEAR, CLOUD, NODATA, SHADOW, SNOW
from cloudlab.sites import SITES_DIR, WINDOWS, load_site, site_names

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
    assert np.all(np.diff(s.dates.astype(np.int64)) >= 0)
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
