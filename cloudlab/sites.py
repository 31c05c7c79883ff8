"""The sites of the held-out real-cloud benchmark: small real series with a reference mask.

Each site is one ``.npz`` under ``cloudlab/data/real-clouds/`` (provenance and licence of each
in ``cloudlab/data/SOURCES.md``), holding the provider's values unchanged:

* ``values`` ``(dates, bands, rows, cols)`` integers as stored, ``scale``, ``offset`` and
  ``nodata``: reflectance = values · scale + offset, not observed where any band is ``nodata``;
* ``reference`` ``(dates, rows, cols)`` uint8 in the codes of :mod:`cloudlab.realdata`
  (0 clear, 1 thin cloud, 2 cloud, 3 shadow, 4 snow, 255 no data), mapped from the provider's
  mask when the file was made; ``reference_source`` names that mask;
* ``dates``, ``scene_ids``, ``bands`` (common names), ``sensor``, ``gsd`` (m), ``crs``,
  ``transform``.

Reflectance is clipped to [0, 1] as the pipeline clips its inputs. Thin cloud (1) is read as
cloud: the pasting protocol moves it with the clouds, and the mask's cloud-or-haze class is
scored against it. The bundled Landsat series of the first real-cloud experiment
(``p035r032-landsat.npz``, :func:`cloudlab.realdata.load_real_series`) is a site too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cloudlab.realdata import CLOUD, NODATA, RealSeries, load_real_series

__all__ = [
    "REFERENCE_BUFFERS",
    "SITES_DIR",
    "Site",
    "load_site",
    "other_years",
    "site_names",
    "window_of",
    "year_of",
]

SITES_DIR = Path(__file__).parent / "data" / "real-clouds"
_THIN = 1
_LEGACY = "p035r032-landsat"
#: The benchmark's window of each long series: one year, as an archive is reprocessed, with
#: 20–60 dates (the sites hold 24 to 423; a pipeline tile of GF-4 holds 7 to a few dozen).
WINDOWS: dict[str, tuple[str, str]] = {
    "p035r032-landsat": ("2011-01-01", "2011-12-31"),
    "landsat_p013r030_harvard_transect": ("2010-01-01", "2010-12-31"),
    "s2_nrt_romania_10m": ("2019-01-01", "2019-12-31"),
    "s2_nrt_subset": ("2017-01-01", "2017-12-31"),
}
#: How far (px) a site's reference grows its own cloud and shadow classes beyond what its
#: detector found: Fmask, as run on C. Holden's Landsat stacks (both Landsat sites), dilates
#: clouds and shadows by a 7 × 7 square, its default (``cldpix = 3``, ``sdpix = 3`` in Fmask
#: 3.x and CFmask). The data agree: an opening by that square removes 0.4 % of p035r032's
#: cloud pixels and one by 9 × 9 5.8 % (``tests/cloudlab/test_sites.py``), where Romania's SCL,
#: which shows no such growth, loses 5.0 % and 5.7 %. The mask F1 against such a reference is also
#: scored with the mask grown the same way (:func:`cloudlab.sitescore.mask_rows`).
REFERENCE_BUFFERS: dict[str, int] = {
    "p035r032-landsat": 3,
    "landsat_p013r030_harvard_transect": 3,
}


@dataclass(frozen=True)
class Site:
    """A benchmark site: its series and what it is.

    Attributes
    ----------
    name
        The file's stem.
    series
        Values in [0, 1] (NaN not observed) and the reference codes (thin cloud read as cloud).
    sensor, gsd, reference_source
        The instrument, its ground sampling distance in metres and the reference mask's origin.
    """

    name: str
    series: RealSeries
    sensor: str
    gsd: float
    reference_source: str

    @property
    def reference_buffer(self) -> int:
        """How far (px) the reference grows its cloud and shadow (:data:`REFERENCE_BUFFERS`)."""
        return REFERENCE_BUFFERS.get(self.name, 0)


def site_names(folder: Path = SITES_DIR) -> list[str]:
    """The sites in ``folder``: every ``.npz``, sorted by name."""
    return sorted(p.stem for p in folder.glob("*.npz"))


def load_site(name: str, folder: Path = SITES_DIR, window: bool = True) -> Site:
    """Read one site, its dates within :data:`WINDOWS` unless ``window`` is False.

    Parameters
    ----------
    name
        The file's stem (:func:`site_names`).
    folder
        Where the files are.
    window
        Keep only the dates of the site's window.

    Returns
    -------
    Site
    """
    site = _read(folder / f"{name}.npz", name)
    return window_of(site) if window else site


def window_of(site: Site) -> Site:
    """``site`` with the dates of its window (:data:`WINDOWS`) only; the whole site if it has
    none (a single series)."""
    if site.name not in WINDOWS:
        return site
    return replace(site, series=site.series.between(*WINDOWS[site.name]))


def _read(path: Path, name: str) -> Site:
    if name == _LEGACY:
        return Site(name, load_real_series(path), "Landsat 5 TM / 7 ETM+", 30.0, "Fmask")
    with np.load(path, allow_pickle=False) as z:
        stored = z["values"]
        observed = (stored != int(z["nodata"])).all(axis=1) & (z["reference"] != NODATA)
        values = np.clip(stored * float(z["scale"]) + float(z["offset"]), 0.0, 1.0)
        values[~np.broadcast_to(observed[:, None], values.shape)] = np.nan
        codes = np.where(z["reference"] == _THIN, CLOUD, z["reference"])
        series = RealSeries(
            values=values,
            reference=np.where(observed, codes, NODATA).astype(np.uint8),
            dates=np.array([str(s)[:10] for s in z["dates"]], dtype="datetime64[D]"),
            bands=tuple(str(b) for b in z["bands"]),
            scene_ids=tuple(str(s) for s in z["scene_ids"]),
            crs=str(z["crs"]),
            transform=tuple(float(v) for v in z["transform"]),
        )
        sensor, gsd, source = str(z["sensor"]), float(z["gsd"]), str(z["reference_source"])
    order = np.argsort(series.dates, kind="stable")
    return Site(name, series.take(order), sensor, gsd, source)


def other_years(site: Site, min_dates: int = 12, max_dates: int | None = None) -> list[int]:
    """The calendar years of ``site``'s whole series (``load_site(name, window=False)``) outside
    its window (:data:`WINDOWS`) with at least ``min_dates`` dates (#44's minimum) and, with
    ``max_dates``, at most that many: series the benchmark's default was not chosen on, held out
    in time (docs/REAL-CLOUDS.md, "Other years of the same sites"). A site without a window
    holds one series only, and has none.
    """
    if site.name not in WINDOWS:
        return []
    years, counts = np.unique(site.series.dates.astype("datetime64[Y]"), return_counts=True)
    window = np.datetime64(WINDOWS[site.name][0][:4], "Y")
    return [
        int(str(y))
        for y, c in zip(years, counts, strict=True)
        if y != window and c >= min_dates and (max_dates is None or c <= max_dates)
    ]


def year_of(site: Site, year: int) -> Site:
    """``site`` with the dates of one calendar year only."""
    return replace(site, series=site.series.between(f"{year}-01-01", f"{year}-12-31"))
