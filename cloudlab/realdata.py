"""Real cloudy series with a reference cloud mask, as bundled in ``cloudlab/data/real-clouds``.

The bundled series (provenance in ``cloudlab/data/SOURCES.md``) is 105 Landsat 5 TM and
Landsat 7 ETM+ surface-reflectance scenes of a 61 × 61 px (30 m) forest site in Colorado,
path 035 row 032, April 2008 to May 2013: red, NIR and SWIR1 (TM/ETM+ bands 3, 4, 5) stored as
int16 reflectance × 10000 (−9999 no data; Landsat 7's SLC-off stripes are no data), and the
Fmask of every scene (0 clear land, 1 clear water, 2 cloud shadow, 3 snow, 4 cloud, 255 no data).

Values become D in [0, 1] as reflectance = stored / 10000, clipped to [0, 1]: surface
reflectance is already on that scale, but a few entries are slightly negative (atmospheric
over-correction) and bright clouds and snow saturate at 1.6; both are clipped, so a
saturated cloud enters D as 1.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

__all__ = [
    "BUNDLED_SERIES",
    "CLEAR",
    "CLOUD",
    "NODATA",
    "REFLECTANCE_SCALE",
    "SHADOW",
    "SNOW",
    "RealSeries",
    "fmask_codes",
    "load_real_series",
    "resolve_series",
]

#: ``bundled:NAME`` series references: files under ``cloudlab/data/real-clouds``.
BUNDLED_SERIES: dict[str, str] = {"p035r032": "p035r032-landsat.npz"}

#: Stored value of reflectance 1 (surface reflectance × 10000).
REFLECTANCE_SCALE = 10000.0

#: Reference codes, the same as :func:`cloudcore.classify`'s (0 clear, 2 cloud, 3 shadow,
#: 255 no data), plus snow, which is neither clear ground nor cloud.
CLEAR, CLOUD, SHADOW, SNOW, NODATA = 0, 2, 3, 4, 255

_STORED_NODATA = -9999
_DATA = Path(__file__).parent / "data" / "real-clouds"
#: Fmask code -> reference code (Fmask: 0 land, 1 water, 2 shadow, 3 snow, 4 cloud, 255 fill).
_FMASK = {0: CLEAR, 1: CLEAR, 2: SHADOW, 3: SNOW, 4: CLOUD, 255: NODATA}


@dataclass(frozen=True)
class RealSeries:
    """A multi-date, multi-band series with its reference mask.

    Attributes
    ----------
    values
        ``(dates, bands, rows, cols)`` float64 in [0, 1], NaN where not observed.
    reference
        ``(dates, rows, cols)`` uint8 reference codes: :data:`CLEAR`, :data:`CLOUD`,
        :data:`SHADOW`, :data:`SNOW`, :data:`NODATA` (exactly where ``values`` is NaN).
    dates
        ``(dates,)`` ``datetime64[D]``, increasing.
    bands
        Band names.
    scene_ids
        The source scene of each date.
    crs
        CRS of the grid (``EPSG:…``).
    transform
        Affine coefficients (a, b, c, d, e, f) of the grid, as rasterio orders them.
    """

    values: np.ndarray
    reference: np.ndarray
    dates: np.ndarray
    bands: tuple[str, ...]
    scene_ids: tuple[str, ...]
    crs: str
    transform: tuple[float, ...]

    @property
    def frame(self) -> tuple[int, int]:
        """(rows, cols) of one image."""
        return int(self.values.shape[2]), int(self.values.shape[3])

    @property
    def observed(self) -> np.ndarray:
        """``(dates, rows, cols)`` booleans: the date observed the pixel."""
        return np.asarray(self.reference != NODATA)

    def between(self, start: str | dt.date, end: str | dt.date) -> RealSeries:
        """The dates in [start, end] (inclusive).

        Parameters
        ----------
        start, end
            First and last day, as dates or ISO strings.

        Returns
        -------
        RealSeries
        """
        first, last = np.array([str(start), str(end)], dtype="datetime64[D]")
        keep = (self.dates >= first) & (self.dates <= last)
        return self.take(np.flatnonzero(keep))

    def take(self, index: np.ndarray) -> RealSeries:
        """The dates at positions ``index``, in that order."""
        index = np.asarray(index, dtype=np.intp)
        return replace(
            self,
            values=self.values[index],
            reference=self.reference[index],
            dates=self.dates[index],
            scene_ids=tuple(self.scene_ids[i] for i in index),
        )

    def crop(self, row: int, col: int, rows: int, cols: int) -> RealSeries:
        """The window of ``rows`` × ``cols`` pixels whose top-left pixel is (row, col)."""
        if rows < 1 or cols < 1 or row < 0 or col < 0:
            raise ValueError(f"crop: bad window {(row, col, rows, cols)}")
        a, b, c, d, e, f = self.transform
        return replace(
            self,
            values=self.values[:, :, row : row + rows, col : col + cols],
            reference=self.reference[:, row : row + rows, col : col + cols],
            transform=(a, b, c + a * col + b * row, d, e, f + d * col + e * row),
        )

    def matrix(self, band: int) -> tuple[np.ndarray, np.ndarray]:
        """One band as D (pixels × dates) and its observed mask, pixels in row-major order.

        Parameters
        ----------
        band
            Band index.

        Returns
        -------
        tuple of numpy.ndarray
            D ``(rows·cols, dates)`` float64 with NaN where not observed, and the boolean mask.
        """
        n = self.values.shape[0]
        D = self.values[:, band].reshape(n, -1).T.copy()
        return D, self.observed.reshape(n, -1).T.copy()


def fmask_codes(fmask: np.ndarray) -> np.ndarray:
    """Fmask codes to reference codes (clear land and water → clear, shadow, snow, cloud).

    Parameters
    ----------
    fmask
        Fmask values (0 land, 1 water, 2 cloud shadow, 3 snow, 4 cloud, 255 fill).

    Returns
    -------
    numpy.ndarray
        uint8 reference codes of the same shape.

    Raises
    ------
    ValueError
        On a value that is not an Fmask code.
    """
    fmask = np.asarray(fmask)
    lut = np.full(256, 254, dtype=np.uint8)
    for code, ref in _FMASK.items():
        lut[code] = ref
    codes = lut[fmask.astype(np.uint8)]
    if (codes == 254).any() or fmask.min() < 0 or fmask.max() > 255:
        bad = sorted(set(np.unique(fmask).tolist()) - set(_FMASK))
        raise ValueError(f"fmask_codes: values {bad} are not Fmask codes {sorted(_FMASK)}")
    return codes


def resolve_series(ref: str, base_dir: str | Path = ".") -> Path:
    """The file behind a series reference: ``bundled:NAME`` or a path to an ``.npz``.

    Parameters
    ----------
    ref
        ``bundled:p035r032`` or a file path, relative paths taken against ``base_dir``.
    base_dir
        The config file's folder.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ConfigError
        Unknown bundled name or missing file.
    """
    from cloudlab.config import resolve_bundled

    return resolve_bundled(
        ref, base_dir, key="data", what="series", bundled=BUNDLED_SERIES, folder=_DATA
    )


def load_real_series(path: str | Path | None = None) -> RealSeries:
    """Read a series file (default: the bundled Landsat series), dates sorted.

    The ``.npz`` holds ``reflectance`` (dates, bands, rows, cols) int16 × 10000 with −9999 as
    no data, ``fmask`` (dates, rows, cols) uint8, ``dates`` (ISO days), ``scene_ids``,
    ``bands``, ``crs`` and ``transform``. An entry is observed where every band has data and
    Fmask is not fill.

    Parameters
    ----------
    path
        The file; None for ``bundled:p035r032``.

    Returns
    -------
    RealSeries
    """
    path = resolve_series("bundled:p035r032") if path is None else Path(path)
    with np.load(path) as z:
        stored = z["reflectance"]
        codes = fmask_codes(z["fmask"])
        dates = z["dates"].astype("datetime64[D]")
        ids = tuple(str(s) for s in z["scene_ids"])
        bands = tuple(str(s) for s in z["bands"])
        crs = str(z["crs"])
        transform = tuple(float(v) for v in z["transform"])
    observed = (stored != _STORED_NODATA).all(axis=1) & (codes != NODATA)
    codes = np.where(observed, codes, NODATA).astype(np.uint8)
    values = np.clip(stored / REFLECTANCE_SCALE, 0.0, 1.0)
    values[~np.broadcast_to(observed[:, None], values.shape)] = np.nan
    order = np.argsort(dates, kind="stable")
    series = RealSeries(values, codes, dates, bands, ids, crs, transform)
    return series.take(order)
