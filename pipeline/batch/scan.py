"""Scanning the archive: every GF-4 product under the archive roots, with its exact time and
footprint read from its metadata XML.

Products are directories or archives named ``GF4_{PMI|PMS|IRS}_E…_N…_YYYYMMDD_L1A…``. The XML
of an archive is read by streaming the tar (a gzip tar has no index); what was read is cached
by path, size and modification time, so a rerun decompresses nothing it has seen.
"""

from __future__ import annotations

import logging
import os
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError, InputError, PipelineError
from pipeline.ids import file_signature
from pipeline.inputs.gf4_product import find_product_files, parse_metadata, parse_product_name
from pipeline.store.durable import read_json, write_json

__all__ = ["Product", "ScanResult", "scan_archive"]

log = logging.getLogger(__name__)

#: Bumped when the scan-cache layout changes, so that an old cache is not misread.
CACHE_VERSION = 2  # 2: times converted from Beijing time (UTC+8)
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


@dataclass(frozen=True)
class Product:
    """One sensor image of one archived product, as far as grouping needs to know it.

    Attributes
    ----------
    path
        The product directory or archive.
    sensor
        ``"PMS"`` or ``"IRS"`` (a PMI product yields one Product per sensor).
    image_id
        Stem of the sensor image (``GF4_PMS_E116.4_N39.9_20200601_L1A0000001001``); the same
        string :func:`pipeline.inputs.gf4.discover_gf4` uses as the acquisition id.
    time, start, end
        ``CenterTime`` (and ``StartTime``/``EndTime`` when present) in UTC; the metadata
        writes Beijing time (UTC+8).
    footprint
        Corner (lon, lat) pairs from the XML, or the name's centre point when absent.
    signature
        Sizes and modification times of the files that make the product: any change means a
        re-delivered product.
    """

    path: Path
    sensor: str
    image_id: str
    time: datetime
    start: datetime
    end: datetime
    footprint: tuple[tuple[float, float], ...]
    signature: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record (scan cache)."""
        out = asdict(self)
        out["path"] = str(self.path)
        for key in ("time", "start", "end"):
            out[key] = getattr(self, key).isoformat()
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Product:
        """Inverse of :meth:`to_json`."""
        return cls(
            path=Path(record["path"]),
            sensor=record["sensor"],
            image_id=record["image_id"],
            time=datetime.fromisoformat(record["time"]),
            start=datetime.fromisoformat(record["start"]),
            end=datetime.fromisoformat(record["end"]),
            footprint=tuple((float(x), float(y)) for x, y in record["footprint"]),
            signature=tuple(int(v) for v in record["signature"]),
        )


@dataclass(frozen=True)
class ScanResult:
    """Products found (sorted by sensor, time, id) and the entries that could not be read."""

    products: tuple[Product, ...]
    unreadable: tuple[tuple[str, str], ...] = ()


def _product_from_xml(path: Path, xml: Path, sensor: str, sig: tuple[int, ...]) -> Product:
    """The product at ``path`` described by its metadata file ``xml``."""
    meta = parse_metadata(xml)  # checks <SensorID> (PMI, or the file's sensor)
    footprint = meta.footprint
    if footprint is None:
        name = parse_product_name(path.name)
        assert name is not None  # only named products are scanned
        footprint = ((name.lon, name.lat),)
    center = meta.center_time  # aware UTC: parse_metadata converts from Beijing time
    stem = xml.name[: -len(".xml")]  # names hold dots ("E116.4"): no Path.stem
    return Product(
        path=path,
        sensor=sensor,
        image_id=stem,
        time=center,
        start=meta.start_time or center,
        end=meta.end_time or center,
        footprint=footprint,
        signature=sig,
    )


def _read_directory(path: Path, sensor: str) -> Product | None:
    """The ``sensor`` image of a product directory, or None when it holds none."""
    files = find_product_files(path, sensor)
    if files is None:
        return None
    return _product_from_xml(path, files.xml, sensor, file_signature(files.xml, files.tiff))


def _read_archive(path: Path, sensor: str) -> Product | None:
    """Stream the tar to its metadata member; nothing else is written to disk."""
    try:
        with tarfile.open(path, "r|*") as tar, tempfile.TemporaryDirectory() as tmp:
            for member in tar:
                base = Path(member.name).name
                if member.isfile() and base.startswith(f"GF4_{sensor}_") and base.endswith(".xml"):
                    handle = tar.extractfile(member)
                    assert handle is not None
                    xml = Path(tmp) / base
                    xml.write_bytes(handle.read())
                    return _product_from_xml(path, xml, sensor, file_signature(path))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(
            f"{path.name}: archive is truncated or corrupt ({exc}); re-download it or move it "
            "out of the archive roots"
        ) from None
    return None


def _candidates(roots: Sequence[Path], skip: Sequence[Path]) -> Iterator[Path]:
    """Product directories and archives under ``roots``, in a stable order."""
    skip_resolved = {p.resolve() for p in skip}
    for root in roots:
        if not root.is_dir():
            raise ConfigError(f"archive.roots: {root} is not a directory; fix archive.roots")
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            keep = []
            for d in sorted(dirnames):
                sub = here / d
                if d.startswith(".") or sub.resolve() in skip_resolved:
                    continue
                if parse_product_name(d) is not None:
                    yield sub  # a product directory: do not descend into it
                else:
                    keep.append(d)
            dirnames[:] = keep
            for f in sorted(filenames):
                if f.endswith(_ARCHIVE_SUFFIXES) and parse_product_name(f) is not None:
                    yield here / f


class _ArchiveCache:
    """What was read from each archive, by path and sensor, valid while its signature holds.

    Only archives are cached: reading a directory's XML costs no more than checking a cache.
    """

    def __init__(self, path: Path | None) -> None:
        """Load the cache at ``path``; an absent, unreadable or outdated one is empty."""
        self.path = path
        loaded = read_json(path) if path is not None else None
        valid = loaded is not None and loaded.get("version") == CACHE_VERSION
        self.old: dict[str, Any] = loaded.get("entries", {}) if loaded and valid else {}
        # Only what this scan saw is written back: products gone from the archive drop out.
        self.new: dict[str, Any] = {}

    def read(self, archive: Path, sensor: str) -> Product | None:
        """The ``sensor`` image of ``archive``, from the cache when the archive is unchanged."""
        key = f"{sensor}|{archive.resolve()}"
        sig = list(file_signature(archive))
        hit = self.old.get(key)
        if hit is not None and hit["signature"] == sig:
            product = Product.from_json(hit["product"]) if hit["product"] else None
        else:
            product = _read_archive(archive, sensor)
        self.new[key] = {"signature": sig, "product": product.to_json() if product else None}
        return product

    def save(self) -> None:
        """Write what this scan read (when the cache has a file)."""
        if self.path is not None:
            write_json(self.path, {"version": CACHE_VERSION, "entries": self.new})


def scan_archive(
    roots: Sequence[Path],
    sensors: Sequence[str],
    *,
    cache_path: Path | None = None,
    skip: Sequence[Path] = (),
) -> ScanResult:
    """Find the GF-4 products under ``roots`` and read their metadata.

    Parameters
    ----------
    roots
        Directories searched recursively; hidden directories and ``skip`` are not entered.
    sensors
        Sensors to collect; a PMI product contributes one :class:`Product` per sensor.
    cache_path
        JSON cache of archive metadata keyed by path, size and modification time.
    skip
        Directories not to search (the batch output, when it lies under a root).

    Returns
    -------
    ScanResult
        The products, and ``(path, message)`` for each entry that could not be read (these
        never stop the scan).

    Raises
    ------
    ConfigError
        A root is not a directory.
    """
    cache = _ArchiveCache(cache_path)
    by_id: dict[tuple[str, str], Product] = {}
    unreadable: list[tuple[str, str]] = []
    for entry in _candidates(roots, skip):
        name = parse_product_name(entry.name)
        assert name is not None
        for sensor in sensors:
            if name.kind not in (sensor, "PMI"):
                continue
            try:
                if entry.is_dir():
                    product = _read_directory(entry, sensor)
                else:
                    product = cache.read(entry, sensor)
            except PipelineError as exc:
                unreadable.append((str(entry), str(exc)))
                log.warning("skipping %s: %s", entry, exc)
                continue
            if product is None:
                # A PMI product need not hold both sensors; a PMS or IRS one must hold its own.
                if name.kind != "PMI":
                    unreadable.append((str(entry), f"holds no GF4_{sensor}_*.xml"))
                continue
            # The same image delivered twice (archive and extracted directory): keep the first,
            # directories sort before archives of the same name.
            ident = (sensor, product.image_id)
            if ident in by_id:
                log.info("%s duplicates %s; using the latter", entry, by_id[ident].path)
                continue
            by_id[ident] = product
    cache.save()
    products = sorted(by_id.values(), key=lambda p: (p.sensor, p.time, p.image_id))
    return ScanResult(tuple(products), tuple(unreadable))
