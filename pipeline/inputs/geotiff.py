"""A series of georeferenced GeoTIFFs of any sensor, one file per date."""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import rasterio
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError

from pipeline.errors import ConfigError, InputError
from pipeline.ids import as_utc
from pipeline.inputs.acquisition import Acquisition
from pipeline.inputs.files import check_complete, expand_paths
from pipeline.inputs.scaling import bits_max, check_dn_args, scaled_series

__all__ = ["discover_geotiffs"]

_GEOTIFF_SUFFIXES = (".tif", ".tiff", ".TIF", ".TIFF")
_DATE_FORMATS = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S", 7: "%Y%j"}


def _parse_date(path: Path, pattern: re.Pattern[str]) -> datetime:
    m = pattern.search(path.name)
    hint = "give inputs.dates or change inputs.date_pattern"
    if m is None:
        raise InputError(f"{path.name}: no date matches date_pattern {pattern.pattern!r}; {hint}")
    text = m.group(1) if pattern.groups else m.group(0)
    fmt = _DATE_FORMATS.get(len(text)) if text.isdigit() else None
    try:
        parsed = datetime.strptime(text, fmt) if fmt else datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{path.name}: {text!r} is not a date (YYYYMMDD, YYYYMMDDhhmm[ss], "
            f"YYYYDDD or ISO); {hint}"
        ) from None
    return as_utc(parsed)


def discover_geotiffs(
    paths: Sequence[str | Path],
    *,
    times: Sequence[datetime] | None = None,
    date_pattern: str = r"(\d{8})",
    max_dn: float | None = None,
    dn_rule: str = "auto",
) -> list[Acquisition]:
    """Describe a series of georeferenced rasters (one file per date).

    Parameters
    ----------
    paths
        Files, directories (their ``*.tif``/``*.tiff``) or glob patterns.
    times
        One time per resolved file, in the order the paths resolve (patterns sorted by name).
        Without it, dates are parsed from file names with ``date_pattern``.
    date_pattern
        Regular expression whose first group (or whole match) is the date: ``YYYYMMDD``,
        ``YYYYMMDDhhmm[ss]``, ``YYYYDDD`` or ISO 8601.
    max_dn
        DN that maps to 1.0; overrides ``dn_rule``.
    dn_rule
        ``"auto"`` (default): the declared maximum — ``2^NBITS − 1`` when GDAL's NBITS is
        set, else the integer dtype's maximum (65535 for uint16), 1.0 for float files —
        checked against the data where it is below the dtype's range. ``"metadata"``: the
        same, a larger DN is an error. ``"pow2"``: 2**ceil(log2(observed max)) over the series.

    Returns
    -------
    list of Acquisition
        Sorted by time (aware UTC: a time without a zone is taken as UTC); ``sensor`` is
        ``"geotiff"``. Files with a CRS and geotransform get
        ``georef="crs"``; files with only RPCs get ``georef="rpc"``.

    Raises
    ------
    ConfigError
        ``times`` does not match the number of files, ``date_pattern`` is not a valid regular
        expression, or the DN arguments are invalid.
    InputError
        A file is missing, unreadable, not georeferenced, or carries no parsable date.
    """
    check_dn_args(max_dn, dn_rule)
    try:
        pattern = re.compile(date_pattern)
    except re.error as exc:
        raise ConfigError(
            f"inputs.date_pattern: {date_pattern!r} is not a valid regular expression ({exc})"
        ) from None
    files: list[Path] = []
    for entry in expand_paths(paths):
        if entry.is_dir():
            inside = sorted(p for p in entry.iterdir() if p.suffix in _GEOTIFF_SUFFIXES)
            if not inside:
                raise InputError(f"{entry}: directory holds no .tif/.tiff file; fix inputs.paths")
            files.extend(inside)
        else:
            files.append(entry)
    if times is not None and len(times) != len(files):
        raise ConfigError(
            f"inputs.dates: {len(times)} dates for {len(files)} files; give one date per file "
            "or drop inputs.dates to parse dates with inputs.date_pattern"
        )
    acqs = []
    for i, path in enumerate(files):
        time = times[i] if times is not None else _parse_date(path, pattern)
        if time.tzinfo is None:
            time = time.replace(tzinfo=UTC)
        acqs.append(_geotiff_acquisition(path, time))
    return scaled_series(acqs, max_dn, dn_rule)


def _geotiff_acquisition(path: Path, time: datetime) -> Acquisition:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(path) as src:
                has_crs = src.crs is not None and not src.transform.is_identity
                has_rpcs = src.rpcs is not None
                dtype = np.dtype(src.dtypes[0])
                nodata = src.nodata
                descriptions = src.descriptions
                nbits = src.tags(1, ns="IMAGE_STRUCTURE").get("NBITS")
                count = src.count
                check_complete(src, path)
    except RasterioIOError as exc:
        raise InputError(f"{path.name}: not a readable raster ({exc}); fix inputs.paths") from None
    if has_crs:
        georef: Literal["rpc", "crs"] = "crs"
    elif has_rpcs:
        georef = "rpc"
    else:
        raise InputError(
            f"{path.name}: no CRS/geotransform and no RPCs; georeference the file (e.g. "
            "gdal_translate -a_srs/-a_ullr) or remove it from inputs.paths"
        )
    names = tuple(d or "" for d in descriptions)
    if not all(names) or len(set(names)) != count:
        names = tuple(f"B{i + 1}" for i in range(count))
    dtype_max = float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0
    # GDAL's NBITS declares fewer valid bits than the type holds (e.g. 12-bit data in uint16).
    valid_bits = int(nbits) if nbits and nbits.isdigit() else None
    return Acquisition(
        id=path.stem,
        path=path,
        time=time,
        sensor="geotiff",
        bands=names,
        max_dn=bits_max(valid_bits) if valid_bits else dtype_max,
        georef=georef,
        nodata=None if nodata is None else float(nodata),
        integration_time=None,
        cloud_percent=None,
        footprint=None,
        dtype_max=dtype_max,
        valid_bits=valid_bits,
    )
