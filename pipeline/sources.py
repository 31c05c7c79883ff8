"""Input discovery: GF-4 L1A products and plain GeoTIFF series, as :class:`Acquisition` objects.

An :class:`Acquisition` is everything the rest of the pipeline needs to read one date: the
raster file on disk (extracted if it came from an archive), its time, band names, how DN scale
to reflectance-like values (``DN / max_dn``) and how it is georeferenced.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np
import rasterio
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError

from pipeline.errors import ConfigError, InputError
from pipeline.gf4 import (
    SENSORS,
    ProductFiles,
    extract_archive,
    find_product_files,
    is_archive,
    parse_metadata,
    parse_product_name,
)

__all__ = ["Acquisition", "check_series", "discover_geotiffs", "discover_gf4"]

log = logging.getLogger(__name__)

#: Maximum DN per GF-4 sensor: PMS files are uint16 but about 12-bit effective (SPEC-NOTES §7).
SENSOR_MAX_DN = {"PMS": 4095.0, "IRS": 65535.0}
_GLOB_CHARS = re.compile(r"[*?\[]")
_GEOTIFF_SUFFIXES = (".tif", ".tiff", ".TIF", ".TIFF")


@dataclass(frozen=True)
class Acquisition:
    """One date of a series, ready to be read window by window.

    Attributes
    ----------
    id
        Product image id (the GF-4 image file stem) or the GeoTIFF file stem; stable across runs.
    path
        The raster file; for archives, the file inside the extraction directory.
    time
        ``CenterTime`` of a GF-4 image, or the given or parsed date of a GeoTIFF.
    sensor
        ``"PMS"``, ``"IRS"`` or ``"geotiff"``.
    bands
        Band names in file order, e.g. ``("B1", "B2", "B3", "B4", "B5")``.
    max_dn
        Scaling: reflectance-like value = DN / max_dn.
    georef
        ``"rpc"`` (L1A: RPCs only, no CRS) or ``"crs"`` (CRS and geotransform).
    nodata
        Source no-data DN, or None.
    integration_time
        Per-band integration time from the GF-4 metadata (DN of different settings are not
        comparable), or None.
    cloud_percent
        ``CloudPercent`` from the GF-4 metadata, or None.
    footprint
        GF-4 corner (lon, lat) pairs: top-left, top-right, bottom-right, bottom-left; or None.
    gsd
        ``ImageGSD`` in metres (GF-4), or None. Used by :func:`pipeline.grid.derive_grid` as the
        default resolution.
    """

    id: str
    path: Path
    time: datetime
    sensor: str
    bands: tuple[str, ...]
    max_dn: float
    georef: Literal["rpc", "crs"]
    nodata: float | None
    integration_time: tuple[float, ...] | None
    cloud_percent: float | None
    footprint: tuple[tuple[float, float], ...] | None
    gsd: float | None = None


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    """Expand glob patterns; keep order, drop repeats; every entry must match something."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Path] = []
    seen: set[Path] = set()
    for entry in paths:
        text = os.path.expanduser(str(entry))
        if _GLOB_CHARS.search(text):
            matches = [Path(p) for p in sorted(glob.glob(text))]
            if not matches:
                raise InputError(
                    f"inputs.paths: pattern {text!r} matches no file; check the pattern and the "
                    "current directory"
                )
        else:
            matches = [Path(text)]
            if not matches[0].exists():
                raise InputError(f"{text}: no such file or directory; fix inputs.paths")
        for p in matches:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


def _check_complete(src: rasterio.io.DatasetReader, path: Path) -> None:
    """Raise :class:`InputError` when a TIFF's data blocks reach beyond the end of the file.

    A truncated download still opens (the header is at the start) and fails only when a task
    reads a block past the end, hours in and as a per-tile error. The block offsets and sizes
    are in the header, so checking them costs no pixel reads.
    """
    if src.driver != "GTiff":
        return
    size = path.stat().st_size
    block_h, block_w = src.block_shapes[0]
    rows, cols = -(-src.height // block_h), -(-src.width // block_w)
    # Pixel-interleaved files share one block per position across bands; check band 1 only.
    bands = [1] if src.interleaving != rasterio.enums.Interleaving.band else src.indexes
    end = 0
    for b in bands:
        for r in range(rows):
            for c in range(cols):
                offset = src.get_tag_item(f"BLOCK_OFFSET_{c}_{r}", "TIFF", bidx=b)
                nbytes = src.get_tag_item(f"BLOCK_SIZE_{c}_{r}", "TIFF", bidx=b)
                if offset and nbytes:
                    end = max(end, int(offset) + int(nbytes))
    if end > size:
        raise InputError(
            f"{path.name}: file is truncated ({size} bytes, its image data needs {end}); "
            "re-download the product or remove it from inputs.paths"
        )


def _check_dn_args(max_dn: float | None, dn_rule: str) -> None:
    if max_dn is not None and not (math.isfinite(max_dn) and max_dn > 0):
        raise ConfigError(
            f"inputs.max_dn: {max_dn} is not a positive number; set it to the "
            "sensor's maximum DN (e.g. 4095) or drop it"
        )
    if dn_rule not in ("sensor", "pow2"):
        raise ConfigError(f"inputs.dn_rule: {dn_rule!r} is not one of 'sensor', 'pow2'")


def _observed_max(path: Path, nodata: float | None) -> float:
    """Largest valid DN of a file, read in row strips to bound memory on 10240² images."""
    best = -math.inf
    with rasterio.open(path) as src:
        rows = max(1, (64 * 2**20) // max(1, src.width * src.count * 8))
        for row in range(0, src.height, rows):
            win = rasterio.windows.Window(0, row, src.width, min(rows, src.height - row))
            data = src.read(window=win)
            valid = np.isfinite(data) if data.dtype.kind == "f" else np.ones(data.shape, bool)
            if nodata is not None:
                valid &= data != nodata
            if valid.any():
                best = max(best, float(data[valid].max()))
    return best


def _pow2_max_dn(acqs: list[Acquisition]) -> float:
    """2**ceil(log2(observed max)) over the whole series, so every date shares one scale."""
    observed = max(_observed_max(a.path, a.nodata) for a in acqs)
    if not math.isfinite(observed) or observed <= 0:
        raise InputError(
            f"{acqs[0].path.name}: no positive valid DN in the series, cannot apply "
            "dn_rule 'pow2'; set inputs.max_dn explicitly"
        )
    return float(2 ** math.ceil(math.log2(observed)))


def _scaled_series(
    acqs: list[Acquisition], max_dn: float | None, dn_rule: str
) -> list[Acquisition]:
    """The series in time order, with ``max_dn`` (or the pow2 rule) replacing each sensor's DN
    scale when given."""
    if max_dn is not None:
        acqs = [replace(a, max_dn=float(max_dn)) for a in acqs]
    elif dn_rule == "pow2" and acqs:
        pow2 = _pow2_max_dn(acqs)
        acqs = [replace(a, max_dn=pow2) for a in acqs]
    return sorted(acqs, key=lambda a: (a.time, a.id))


def discover_gf4(
    paths: Sequence[str | Path],
    *,
    sensor: str = "PMS",
    extract_dir: Path,
    max_dn: float | None = None,
    dn_rule: Literal["sensor", "pow2"] = "sensor",
) -> list[Acquisition]:
    """Find the GF-4 L1A images of one sensor in product directories, archives or globs.

    Parameters
    ----------
    paths
        Product directories, ``.tar.gz`` archives, or glob patterns matching either. Products
        named for the other sensor (``GF4_IRS_…`` when ``sensor="PMS"``) are skipped; a PMI
        product holds both sensors and the requested one is picked.
    sensor
        ``"PMS"`` (5 bands, 50 m) or ``"IRS"`` (1 band, 400 m).
    extract_dir
        Where archives are extracted (once; an existing complete extraction is reused).
    max_dn
        DN that maps to 1.0; overrides ``dn_rule``.
    dn_rule
        ``"sensor"``: PMS 4095, IRS 65535. ``"pow2"``: 2**ceil(log2(observed max DN)) over the
        whole series (reads every file once).

    Returns
    -------
    list of Acquisition
        Sorted by time. ``nodata`` is the file's no-data value, or 0 when the file sets none
        (L1A fill is DN 0).

    Raises
    ------
    ConfigError
        Unknown sensor or dn_rule, or a non-positive max_dn.
    InputError
        A path or pattern matches nothing, an archive is truncated, a product lacks the
        sensor's files, its metadata is incomplete, or the image disagrees with its metadata.
    """
    sensor_u = sensor.upper()
    if sensor_u not in SENSORS:
        raise ConfigError(f"inputs.sensor: {sensor!r} is not a GF-4 sensor; use 'PMS' or 'IRS'")
    _check_dn_args(max_dn, dn_rule)
    acqs: list[Acquisition] = []
    seen: set[Path] = set()
    for entry in _expand(paths):
        name = parse_product_name(entry.name)
        if name is not None and name.kind not in (sensor_u, "PMI"):
            log.info(
                "skipping %s: a %s product, sensor %s requested", entry.name, name.kind, sensor_u
            )
            continue
        if entry.is_dir():
            directory = entry
        elif is_archive(entry):
            directory = extract_archive(entry, extract_dir)
        else:
            raise InputError(
                f"{entry.name}: not a GF-4 product directory or .tar.gz archive; list product "
                "directories or archives in inputs.paths"
            )
        files = find_product_files(directory, sensor_u)
        if files is None:
            raise InputError(
                f"{entry.name}: holds no GF4_{sensor_u}_*.xml; it is not a GF-4 {sensor_u} "
                "product — remove it from inputs.paths or set inputs.sensor"
            )
        if files.tiff.resolve() in seen:
            continue
        seen.add(files.tiff.resolve())
        acqs.append(_gf4_acquisition(files, sensor_u))

    return _scaled_series(acqs, max_dn, dn_rule)


def _gf4_acquisition(files: ProductFiles, sensor: str) -> Acquisition:
    tiff, xml = files.tiff, files.xml
    meta = parse_metadata(xml)
    if meta.sensor_id.upper() != sensor:
        raise InputError(
            f"{xml.name}: <SensorID> is {meta.sensor_id!r} but the file is named for {sensor}; "
            "the product is inconsistent — re-download it"
        )
    try:
        with warnings.catch_warnings():
            # L1A images have no geotransform by design; their georeferencing is the RPC.
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(tiff) as src:
                count, width, height = src.count, src.width, src.height
                nodata, has_rpcs = src.nodata, src.rpcs is not None
                _check_complete(src, tiff)
    except RasterioIOError as exc:
        raise InputError(
            f"{tiff.name}: image is not readable ({exc}); re-download the product"
        ) from None
    if count != len(meta.bands):
        raise InputError(
            f"{tiff.name}: image has {count} bands but {xml.name} lists {len(meta.bands)} "
            f"({','.join(meta.bands)}); the product is inconsistent — re-download it"
        )
    if (width, height) != (meta.width, meta.height):
        raise InputError(
            f"{tiff.name}: image is {width}x{height} but {xml.name} says "
            f"{meta.width}x{meta.height}; the product is inconsistent — re-download it"
        )
    if not has_rpcs:
        base = tiff.name[: -len(tiff.suffix)]  # product names contain dots: no with_suffix
        what = f"{files.rpb.name} is malformed" if files.rpb else f"missing {base}.rpb"
        raise InputError(
            f"{tiff.name}: no RPCs found ({what}); L1A images are georeferenced only by RPC — "
            "re-download the product"
        )
    return Acquisition(
        id=tiff.stem,
        path=tiff,
        time=meta.center_time,
        sensor=sensor,
        bands=meta.bands,
        max_dn=SENSOR_MAX_DN[sensor],
        georef="rpc",
        nodata=0.0 if nodata is None else float(nodata),
        integration_time=meta.integration_time,
        cloud_percent=meta.cloud_percent,
        footprint=meta.footprint,
        gsd=meta.image_gsd,
    )


_DATE_FORMATS = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S", 7: "%Y%j"}


def _parse_date(path: Path, pattern: re.Pattern[str]) -> datetime:
    m = pattern.search(path.name)
    hint = "give inputs.dates or change inputs.date_pattern"
    if m is None:
        raise InputError(f"{path.name}: no date matches date_pattern {pattern.pattern!r}; {hint}")
    text = m.group(1) if pattern.groups else m.group(0)
    fmt = _DATE_FORMATS.get(len(text)) if text.isdigit() else None
    try:
        return datetime.strptime(text, fmt) if fmt else datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{path.name}: {text!r} is not a date (YYYYMMDD, YYYYMMDDhhmm[ss], "
            f"YYYYDDD or ISO); {hint}"
        ) from None


def discover_geotiffs(
    paths: Sequence[str | Path],
    *,
    times: Sequence[datetime] | None = None,
    date_pattern: str = r"(\d{8})",
    max_dn: float | None = None,
    dn_rule: Literal["sensor", "pow2"] = "sensor",
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
        ``"sensor"``: the maximum of the file's integer dtype (255 for uint8, 65535 for
        uint16); float files are taken as already scaled (1.0). ``"pow2"``:
        2**ceil(log2(observed max)) over the whole series.

    Returns
    -------
    list of Acquisition
        Sorted by time; ``sensor`` is ``"geotiff"``. Files with a CRS and geotransform get
        ``georef="crs"``; files with only RPCs get ``georef="rpc"``.

    Raises
    ------
    ConfigError
        ``times`` does not match the number of files, ``date_pattern`` is not a valid regular
        expression, or the DN arguments are invalid.
    InputError
        A file is missing, unreadable, not georeferenced, or carries no parsable date.
    """
    _check_dn_args(max_dn, dn_rule)
    try:
        pattern = re.compile(date_pattern)
    except re.error as exc:
        raise ConfigError(
            f"inputs.date_pattern: {date_pattern!r} is not a valid regular expression ({exc})"
        ) from None
    files: list[Path] = []
    for entry in _expand(paths):
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
        acqs.append(_geotiff_acquisition(path, time))
    return _scaled_series(acqs, max_dn, dn_rule)


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
                count = src.count
                _check_complete(src, path)
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
    default_max = float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0
    return Acquisition(
        id=path.stem,
        path=path,
        time=time,
        sensor="geotiff",
        bands=names,
        max_dn=default_max,
        georef=georef,
        nodata=None if nodata is None else float(nodata),
        integration_time=None,
        cloud_percent=None,
        footprint=None,
    )


def check_series(acquisitions: Sequence[Acquisition]) -> list[str]:
    """Check that acquisitions form one stackable series.

    Parameters
    ----------
    acquisitions
        The dates of one series, e.g. from :func:`discover_gf4`.

    Returns
    -------
    list of str
        Warnings the user should see: dates with different ``IntegrationTime`` (their DN are
        not comparable without calibration), or different ``max_dn`` scaling.

    Raises
    ------
    InputError
        Fewer than 2 dates, band lists that differ between dates, or two acquisitions with
        the same time.
    """
    acqs = list(acquisitions)
    if len(acqs) < 2:
        which = f" ({acqs[0].path.name})" if acqs else ""
        raise InputError(
            f"inputs.paths: found {len(acqs)} acquisition(s){which}; aATM needs at least 2 "
            "dates — add products to inputs.paths"
        )
    first = acqs[0]
    for a in acqs[1:]:
        if a.bands != first.bands:
            raise InputError(
                f"{a.path.name}: bands {','.join(a.bands)} differ from {first.path.name}'s "
                f"{','.join(first.bands)}; use one sensor per series or remove the file from "
                "inputs.paths"
            )
    by_time: dict[datetime, Acquisition] = {}
    for a in acqs:
        if a.time in by_time:
            raise InputError(
                f"{a.path.name}: same time {a.time.isoformat(sep=' ')} as "
                f"{by_time[a.time].path.name}; the product is listed twice — remove one from "
                "inputs.paths"
            )
        by_time[a.time] = a
    warns: list[str] = []
    settings = {a.integration_time for a in acqs if a.integration_time is not None}
    if len(settings) > 1:
        groups = ", ".join(
            f"{'/'.join(f'{t:g}' for t in s)} s ({sum(a.integration_time == s for a in acqs)} "
            "dates)"
            for s in sorted(settings)
        )
        warns.append(
            f"IntegrationTime differs between dates ({groups}): their DN are not comparable "
            "without calibration — calibrate first or select dates with one setting"
        )
    scales = sorted({a.max_dn for a in acqs})
    if len(scales) > 1:
        warns.append(
            f"max_dn differs between dates ({', '.join(f'{s:g}' for s in scales)}): values are "
            "scaled differently — set inputs.max_dn to use one scale"
        )
    return warns
