"""GaoFen-4 L1A products: metadata XML, product naming, archive extraction.

A GF-4 product is delivered as a directory or ``.tar.gz`` archive named
``GF4_{PMI|PMS|IRS}_E{lon}_N{lat}_{YYYYMMDD}_L1A{10-digit id}``. Per sensor it holds
``GF4_{PMS|IRS}_<…>.tiff`` (uint16 image, RPC-only georeferencing), ``.rpb`` (RPC00B sidecar
that GDAL reads), ``.xml`` (metadata, root ``<ProductMetaData>``), ``.jpg`` (browse) and
``_thumb.jpg``. A PMI product holds both sensors. See docs/CONVENTIONS.md §7.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from pipeline.errors import InputError
from pipeline.ids import file_signature
from pipeline.store.durable import read_json

__all__ = [
    "BEIJING",
    "PRODUCT_NAME_RE",
    "SENSORS",
    "GF4Metadata",
    "ProductFiles",
    "ProductName",
    "band_names",
    "check_pmi_complete",
    "extract_archive",
    "find_product_files",
    "is_archive",
    "parse_metadata",
    "parse_product_name",
    "sensor_of",
]

SENSORS = ("PMS", "IRS")

#: The zone of every time in GF-4 metadata: Beijing time, UTC+8 (CRESDA writes local time; the
#: sun position computed from ``CenterTime`` matches the XML's own sun angles only read so).
BEIJING = timezone(timedelta(hours=8), "UTC+08")

#: Product (archive or directory) name; PMI products hold both PMS and IRS files.
PRODUCT_NAME_RE = re.compile(
    r"^GF4_(?P<kind>PMI|PMS|IRS)_(?P<lon>[EW]\d+(?:\.\d+)?)_(?P<lat>[NS]\d+(?:\.\d+)?)"
    r"_(?P<date>\d{8})_L1A(?P<id>\d{10})$"
)

_REQUIRED = ("CenterTime", "Bands", "WidthInPixels", "HeightInPixels", "SensorID")
_CORNERS = ("TopLeft", "TopRight", "BottomRight", "BottomLeft")
_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f")
# Written into an extraction directory after all members are on disk; its presence (plus the
# archive's size and mtime inside it) is what makes an extraction reusable.
_EXTRACTED_MARKER = ".extracted.json"


@dataclass(frozen=True)
class GF4Metadata:
    """Metadata of one GF-4 sensor image, from its ``.xml`` file.

    Times are timezone-aware UTC: the XML writes Beijing time (UTC+8) without a zone, and
    :func:`parse_metadata` converts. ``footprint`` holds the four corner (lon, lat) pairs in the
    order top-left, top-right, bottom-right, bottom-left, or None when any corner tag is
    missing. ``integration_time`` is in milliseconds (GF-4 writes e.g. ``6,30,20,30,30``).
    ``gain`` and ``bias`` are the XML's ``<Gain>``/``<Bias>`` lists as written; they are *not*
    CRESDA's radiance coefficients (:mod:`pipeline.inputs.radiometry`). ``sun_elevation`` and
    ``satellite_elevation`` come from the tags ``SolarZenith`` and ``SatelliteZenith``, which in
    GF-4 metadata hold elevation angles despite their names (docs/CONVENTIONS.md §7).
    """

    path: Path
    sensor_id: str
    center_time: datetime
    bands: tuple[str, ...]
    width: int
    height: int
    satellite_id: str | None = None
    product_id: str | None = None
    product_level: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    integration_time: tuple[float, ...] | None = None
    pixel_bits: int | None = None
    valid_pixel_bits: int | None = None
    gain: tuple[float, ...] | None = None
    bias: tuple[float, ...] | None = None
    image_gsd: float | None = None
    footprint: tuple[tuple[float, float], ...] | None = None
    sun_elevation: float | None = None
    sun_azimuth: float | None = None
    satellite_elevation: float | None = None
    satellite_azimuth: float | None = None
    cloud_percent: float | None = None


def _bad(path: Path, what: str) -> InputError:
    return InputError(
        f"{path.name}: {what}; the product is damaged — re-download it or remove it "
        "from inputs.paths"
    )


def _parse_time(path: Path, tag: str, text: str) -> datetime:
    """A metadata time (Beijing time, no zone written) as an aware UTC datetime."""
    for fmt in _TIME_FORMATS:
        try:
            local = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return local.replace(tzinfo=BEIJING).astimezone(UTC)
    raise _bad(path, f"<{tag}> is {text!r}, expected a time 'YYYY-MM-DD HH:MM:SS'")


def _parse_float(path: Path, tag: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _bad(path, f"<{tag}> is {text!r}, expected a number") from None


def _parse_list(path: Path, tag: str, text: str, n: int) -> tuple[float, ...]:
    """A comma list of ``n`` numbers (one per band)."""
    values = tuple(_parse_float(path, tag, t.strip()) for t in text.split(",") if t.strip())
    if len(values) != n:
        raise _bad(path, f"<{tag}> lists {len(values)} values for {n} bands")
    return values


def _parse_int(path: Path, tag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _bad(path, f"<{tag}> is {text!r}, expected an integer") from None
    if value <= 0:
        raise _bad(path, f"<{tag}> is {value}, expected a positive size")
    return value


def band_names(sensor: str, listed: str) -> tuple[str, ...]:
    """Pipeline band names of a sensor image from the XML's ``<Bands>`` list.

    PMS lists ``1,2,3,4,5`` and becomes ``B1``…``B5``. IRS lists ``1`` as well, so its band is
    named ``IRS1``: a PMS and an IRS band never share a name (in COG names, cube coordinates or
    a ``bands:`` selection).
    """
    prefix = "IRS" if sensor == "IRS" else "B"
    tokens = [t.strip() for t in listed.split(",") if t.strip()]
    return tuple(f"{prefix}{t}" if t.isdigit() else t for t in tokens)


def sensor_of(name: str) -> str | None:
    """``"PMS"`` or ``"IRS"`` from a sensor file name ``GF4_{PMS|IRS}_…``, else None.

    The sensor of an image comes from its file name: real products write ``<SensorID>PMI``
    (the camera, which holds both) in the XML of either sensor.
    """
    m = re.match(r"^GF4_(PMS|IRS)_", name)
    return m[1] if m else None


def parse_metadata(xml_path: str | Path) -> GF4Metadata:
    """Read a GF-4 product metadata file.

    Parameters
    ----------
    xml_path
        The ``GF4_{PMS|IRS}_….xml`` file of one sensor image.

    Returns
    -------
    GF4Metadata
        The parsed tags, times converted from Beijing time to UTC. Unknown tags are ignored;
        optional tags that are absent or empty are None.

    Raises
    ------
    InputError
        The file is not readable XML, its root is not ``<ProductMetaData>``, a required tag
        (CenterTime, Bands, WidthInPixels, HeightInPixels, SensorID) is missing or empty, the
        satellite is not GF4, the sensor is neither the file's nor ``PMI``, a value cannot be
        parsed, or a per-band list has the wrong length.
    """
    path = Path(xml_path)
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise _bad(path, f"metadata is not readable XML ({exc})") from None
    if root.tag != "ProductMetaData":
        raise _bad(path, f"root element is <{root.tag}>, expected <ProductMetaData>")
    # Flat layout: the first occurrence of a tag wins; empty (<ProductQuality />), nested or
    # unknown tags are ignored.
    tags: dict[str, str] = {}
    for child in root:
        text = (child.text or "").strip()
        if text and child.tag not in tags:
            tags[child.tag] = text
    for tag in _REQUIRED:
        if tag not in tags:
            raise InputError(
                f"{path.name}: missing required tag <{tag}>; the product is incomplete — "
                "re-download it or remove it from inputs.paths"
            )
    satellite = tags.get("SatelliteID")
    if satellite is not None and satellite.upper() != "GF4":
        raise InputError(
            f"{path.name}: <SatelliteID> is {satellite!r}, not GF4; remove the product from "
            "inputs.paths"
        )
    sensor = sensor_of(path.name) or tags["SensorID"].upper()
    if tags["SensorID"].upper() not in (sensor, "PMI"):
        raise _bad(path, f"<SensorID> is {tags['SensorID']!r}, expected PMI or {sensor}")

    def opt_float(tag: str) -> float | None:
        return _parse_float(path, tag, tags[tag]) if tag in tags else None

    def opt_int(tag: str) -> int | None:
        return _parse_int(path, tag, tags[tag]) if tag in tags else None

    def opt_time(tag: str) -> datetime | None:
        return _parse_time(path, tag, tags[tag]) if tag in tags else None

    bands = band_names(sensor, tags["Bands"])
    if not bands:
        raise _bad(path, "<Bands> lists no band")

    def opt_list(tag: str) -> tuple[float, ...] | None:
        return _parse_list(path, tag, tags[tag], len(bands)) if tag in tags else None

    corners: list[tuple[float, float]] = []
    for corner in _CORNERS:
        lon, lat = tags.get(f"{corner}Longitude"), tags.get(f"{corner}Latitude")
        if lon is None or lat is None:
            break
        corners.append(
            (
                _parse_float(path, f"{corner}Longitude", lon),
                _parse_float(path, f"{corner}Latitude", lat),
            )
        )
    footprint = tuple(corners) if len(corners) == len(_CORNERS) else None
    pixel_bits, valid_bits = opt_int("PixelBits"), opt_int("ValidPixelBits")
    if valid_bits is not None and valid_bits > (pixel_bits or 16):
        raise _bad(path, f"<ValidPixelBits> is {valid_bits}, more than <PixelBits> {pixel_bits}")

    return GF4Metadata(
        path=path,
        sensor_id=tags["SensorID"],
        center_time=_parse_time(path, "CenterTime", tags["CenterTime"]),
        bands=bands,
        width=_parse_int(path, "WidthInPixels", tags["WidthInPixels"]),
        height=_parse_int(path, "HeightInPixels", tags["HeightInPixels"]),
        satellite_id=satellite,
        product_id=tags.get("ProductID"),
        product_level=tags.get("ProductLevel"),
        start_time=opt_time("StartTime"),
        end_time=opt_time("EndTime"),
        integration_time=opt_list("IntegrationTime"),
        pixel_bits=pixel_bits,
        valid_pixel_bits=valid_bits,
        gain=opt_list("Gain"),
        bias=opt_list("Bias"),
        image_gsd=opt_float("ImageGSD"),
        footprint=footprint,
        sun_elevation=opt_float("SolarZenith"),
        sun_azimuth=opt_float("SolarAzimuth"),
        satellite_elevation=opt_float("SatelliteZenith"),
        satellite_azimuth=opt_float("SatelliteAzimuth"),
        cloud_percent=opt_float("CloudPercent"),
    )


@dataclass(frozen=True)
class ProductName:
    """The parts of a product name ``GF4_{kind}_E{lon}_N{lat}_{date}_L1A{id}``."""

    kind: str
    lon: float
    lat: float
    date: str
    product_id: str


def parse_product_name(name: str) -> ProductName | None:
    """Split a product directory or archive name into its parts.

    Parameters
    ----------
    name
        A file or directory name; a ``.tar.gz``/``.tgz``/``.tar`` suffix is ignored.

    Returns
    -------
    ProductName or None
        None when the name does not follow the GF-4 naming scheme.
    """
    stem = _archive_stem(name)
    m = PRODUCT_NAME_RE.match(stem)
    if m is None:
        return None
    lon = float(m["lon"][1:]) * (-1.0 if m["lon"][0] == "W" else 1.0)
    lat = float(m["lat"][1:]) * (-1.0 if m["lat"][0] == "S" else 1.0)
    return ProductName(m["kind"], lon, lat, m["date"], m["id"])


def _archive_stem(name: str) -> str:
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_archive(path: Path) -> bool:
    """True for ``.tar.gz``, ``.tgz`` and ``.tar`` files."""
    return path.is_file() and path.name.endswith((".tar.gz", ".tgz", ".tar"))


@dataclass(frozen=True)
class ProductFiles:
    """The files of one sensor image inside a product directory."""

    tiff: Path
    xml: Path
    rpb: Path | None


def find_product_files(directory: Path, sensor: str) -> ProductFiles | None:
    """Find the image, metadata and RPC files of ``sensor`` in a product directory.

    Searches ``directory`` recursively, since archives are packed both flat and with a top-level
    folder.

    Parameters
    ----------
    directory
        An (extracted) product directory.
    sensor
        ``"PMS"`` or ``"IRS"``.

    Returns
    -------
    ProductFiles or None
        None when the directory holds no ``GF4_{sensor}_*.xml``.

    Raises
    ------
    InputError
        The metadata exists but its image is missing, or the directory holds several images of
        the sensor.
    """
    xmls = sorted(
        p
        for p in directory.rglob(f"GF4_{sensor}_*.xml")
        if p.is_file() and not p.name.startswith(".")
    )
    if not xmls:
        return None
    if len(xmls) > 1:
        names = ", ".join(p.name for p in xmls)
        raise InputError(
            f"{directory.name}: holds {len(xmls)} {sensor} images ({names}); "
            "give each product directory in inputs.paths separately"
        )
    xml = xmls[0]
    # Product names contain dots ("E116.4"), so never use Path.with_suffix on them.
    base = str(xml)[: -len(".xml")]
    for suffix in (".tiff", ".tif", ".TIFF", ".TIF"):
        tiff = Path(base + suffix)
        if tiff.is_file():
            break
    else:
        raise InputError(
            f"{directory.name}: {xml.name} has no image {Path(base).name}.tiff next to it; the "
            "product is incomplete — re-download it or remove it from inputs.paths"
        )
    rpb = next((Path(base + s) for s in (".rpb", ".RPB") if Path(base + s).is_file()), None)
    return ProductFiles(tiff=tiff, xml=xml, rpb=rpb)


def check_pmi_complete(found: Mapping[str, ProductFiles | None], product: str) -> None:
    """Raise unless a PMI product holds the image, metadata and RPCs of both sensors.

    A PMI delivery always holds PMS and IRS side by side (``.tiff``, ``.xml``, ``.rpb``, plus
    ``.jpg``/``_thumb.jpg`` browse images, which are not needed); one sensor's files missing
    means a truncated download, even when only the other sensor is used.

    Parameters
    ----------
    found
        :func:`find_product_files` of the product directory, per sensor.
    product
        The product's name, for the message.

    Raises
    ------
    InputError
        One line naming the product and the first missing file kind.
    """
    for sensor in SENSORS:
        files = found.get(sensor)
        missing = (
            f"GF4_{sensor}_*.xml"
            if files is None
            else (f"{files.xml.name[: -len('.xml')]}.rpb" if files.rpb is None else None)
        )
        if missing is not None:
            raise InputError(
                f"{product}: a PMI product holds PMS and IRS images, but {missing} is missing; "
                "the product is incomplete — re-download it or remove it from inputs.paths"
            )


def _archive_signature(archive: Path) -> dict[str, int]:
    size, mtime_ns = file_signature(archive)
    return {"size": size, "mtime_ns": mtime_ns}


def extract_archive(archive: str | Path, extract_dir: str | Path) -> Path:
    """Extract a product archive once, atomically, and return the extracted directory.

    A gzip tar is not seekable, so parallel windowed reads need the files on disk. The archive
    is extracted into a temporary directory inside ``extract_dir`` which is then renamed to
    ``extract_dir/<archive name without .tar.gz>``: a crash never leaves a half-extracted
    product under the final name. An existing extraction is reused when its marker matches the
    archive's size and modification time; a stale one (the archive was replaced) is redone.

    Parameters
    ----------
    archive
        The ``.tar.gz`` (or ``.tgz``/``.tar``) product archive.
    extract_dir
        Where products are extracted; created if needed.

    Returns
    -------
    Path
        The extracted product directory.

    Raises
    ------
    InputError
        The archive is truncated or corrupt, or holds unsafe member paths.
    """
    archive = Path(archive)
    extract_dir = Path(extract_dir)
    extract_dir.mkdir(parents=True, exist_ok=True)
    target = extract_dir / _archive_stem(archive.name)
    signature = _archive_signature(archive)
    if target.is_dir():
        if read_json(target / _EXTRACTED_MARKER) == signature:
            return target
        # Stale or foreign content under our name: move it aside first so that the rename
        # below stays atomic, then delete it.
        stale = Path(tempfile.mkdtemp(prefix=f".stale-{target.name}-", dir=extract_dir))
        os.replace(target, stale / target.name)
        shutil.rmtree(stale, ignore_errors=True)

    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=extract_dir))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                # The "data" filter refuses absolute paths, "..", devices and links leaving
                # the directory: archives come from outside.
                tar.extractall(tmp, filter="data")
        except tarfile.FilterError as exc:
            raise InputError(
                f"{archive.name}: archive holds an unsafe member ({exc}); it is not a GF-4 "
                "product — remove it from inputs.paths"
            ) from None
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            raise InputError(
                f"{archive.name}: archive is truncated or corrupt ({exc}); re-download it or "
                "remove it from inputs.paths"
            ) from None
        (tmp / _EXTRACTED_MARKER).write_text(json.dumps(signature))
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process finished the same extraction first: use theirs if complete.
            if read_json(target / _EXTRACTED_MARKER) == signature:
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
