"""Archive reprocessing: scan an archive of GF-4 products, group them into scene series, run
each series once, and publish a STAC catalog of the results.

``python -m pipeline batch ARCHIVE_CONFIG`` (or ``python -m pipeline.batch ARCHIVE_CONFIG``)
is meant to run on a schedule. Each run:

1. **scans** the archive roots for products named ``GF4_{PMI|PMS|IRS}_E…_N…_YYYYMMDD_L1A…``
   (directories or ``.tar.gz``) and reads each product's metadata XML for the exact time and
   footprint. The XML of an archive is read by streaming the tar (a gzip tar has no index);
   what was read is cached by path, size and modification time, so a rerun decompresses
   nothing it has seen;
2. **groups** products into series: same sensor, same time window (windows of
   ``grouping.window_days`` days counted from ``grouping.window_origin``, so a new product can
   only ever change the series of its own window), and footprints that overlap the series'
   first footprint by at least ``grouping.min_overlap``;
3. gives each series a **deterministic id** (a hash of its sensor and sorted product ids) and
   its own folder ``OUTPUT/series/<id>/``, and skips it when its manifest
   (``series.json``: products with file sizes and times, configuration hash, code version)
   says it is already done. Series that need work run one after another, through
   :func:`pipeline.run.run`, on **one** cluster started once for the batch (runs connect to it
   by address); a failed series is reported and the others go on;
4. **publishes** a STAC catalog of every completed series under ``OUTPUT/stac/``
   (:mod:`pipeline.stac`).

Output layout::

    OUTPUT/series/<id>/       one pipeline.run output (cube.zarr, cog/, quicklooks/, ...)
    OUTPUT/series/<id>/series.json   the manifest, written last, only after a clean run
    OUTPUT/stac/catalog.json  the catalog, replaced as a whole on every batch
    OUTPUT/.batch/            scan cache and the lock that keeps two batches apart
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.backends import ClusterSpec, ConfigSection, open_cluster
from pipeline.config import (
    GridConfig,
    SolverConfig,
    TilingConfig,
    parse_config,
    read_yaml,
    validate,
)
from pipeline.errors import ConfigError, InputError, PipelineError
from pipeline.gf4 import find_product_files, parse_metadata, parse_product_name
from pipeline.outputs import write_json

__all__ = [
    "ArchiveConfig",
    "BatchSummary",
    "Plan",
    "Product",
    "ScanResult",
    "Series",
    "SeriesOutcome",
    "add_batch_parser",
    "group_products",
    "load_archive_config",
    "overlap_fraction",
    "parse_archive_config",
    "plan_batch",
    "read_manifest",
    "run_batch",
    "run_batch_command",
    "scan_archive",
    "series_config",
    "series_id",
]

log = logging.getLogger(__name__)

MANIFEST_NAME = "series.json"
#: Bumped when the manifest or scan-cache layout changes, so old files are not misread.
MANIFEST_VERSION = 1
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
EXIT_OK, EXIT_SERIES_FAILED = 0, 3


# --------------------------------------------------------------------------- configuration


class ArchiveSection(ConfigSection):
    """Where the products are (``archive``)."""

    roots: tuple[Path, ...]
    sensors: tuple[Literal["PMS", "IRS"], ...] = ("PMS",)

    @field_validator("roots", "sensors", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str | Path) else value

    @field_validator("roots")
    @classmethod
    def _some_root(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        if not value:
            raise ValueError("expected at least one archive root directory")
        return tuple(Path(os.path.expanduser(str(p))) for p in value)


class GroupingSection(ConfigSection):
    """How products are grouped into series (``grouping``)."""

    window_days: int = Field(default=16, ge=1)
    window_origin: date = date(2016, 1, 1)
    min_overlap: float = Field(default=0.5, gt=0, le=1)
    min_dates: int = Field(default=3, ge=2)


class OutputSection(ConfigSection):
    """Where results go (``output``)."""

    path: Path
    extract_dir: Path | None = None
    keep_work: bool = False
    remove_superseded: bool = False
    catalog_title: str = "GF-4 cloud-free series"


class SeriesInputs(ConfigSection):
    """Input options applied to every series (``run.inputs``)."""

    max_dn: float | None = Field(default=None, gt=0)
    dn_rule: Literal["sensor", "pow2"] = "sensor"


class SeriesOutput(ConfigSection):
    """Output options applied to every series (``run.output``)."""

    cog_dtype: Literal["uint16", "float32"] = "uint16"
    quicklooks: bool = True


class RunTemplate(ConfigSection):
    """The single-run sections applied to every series (``run``); see ``configs/*.yaml``."""

    inputs: SeriesInputs = SeriesInputs()
    output: SeriesOutput = SeriesOutput()
    grid: GridConfig = GridConfig()
    tiling: TilingConfig = TilingConfig()
    solver: SolverConfig = SolverConfig()


class ArchiveConfig(ConfigSection):
    """The whole batch configuration; see ``configs/archive-example.yaml``.

    ``cluster`` sits beside ``run``, not inside it: one cluster is started for the whole batch
    and every series runs on it.
    """

    archive: ArchiveSection
    output: OutputSection
    grouping: GroupingSection = GroupingSection()
    run: RunTemplate = RunTemplate()
    cluster: ClusterSpec = ClusterSpec()

    def config_hash(self) -> str:
        """Hash of everything that changes a series' results (the ``run`` template)."""
        return _digest(self.run.model_dump(mode="json"))[:16]


def load_archive_config(path: str | Path) -> ArchiveConfig:
    """Read and validate a YAML batch configuration.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    ArchiveConfig
        The frozen, validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown, missing or of the wrong type.
    """
    path = Path(path)
    data = read_yaml(path, "archive config")
    return parse_archive_config(data, source=str(path))


def parse_archive_config(data: Any, *, source: str = "<archive config>") -> ArchiveConfig:
    """Validate an already parsed batch configuration mapping (see :func:`load_archive_config`).

    Parameters
    ----------
    data
        The mapping, as read from YAML.
    source
        Name of where it came from, used in error messages.

    Returns
    -------
    ArchiveConfig
        The frozen, validated configuration.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with sections archive, output, ...")
    data = _drop_empty(data)
    return validate(ArchiveConfig, data, source)


def _drop_empty(data: Mapping[str, Any]) -> dict[str, Any]:
    """A section left empty in YAML (only comments under it) means "all defaults"."""
    return {
        k: (_drop_empty(v) if isinstance(v, Mapping) else v)
        for k, v in data.items()
        if v is not None
    }


# --------------------------------------------------------------------------- scanning


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
        string :func:`pipeline.sources.discover_gf4` uses as the acquisition id.
    time, start, end
        ``CenterTime`` (and ``StartTime``/``EndTime`` when present), taken as UTC.
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
        """JSON-ready record (scan cache, manifests)."""
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


def _stat_sig(*paths: Path) -> tuple[int, ...]:
    out: list[int] = []
    for p in paths:
        st = p.stat()
        out += [st.st_size, st.st_mtime_ns]
    return tuple(out)


def _utc(value: datetime) -> datetime:
    # GF-4 metadata times carry no zone; they are UTC like every other L1A time stamp.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _product_from_xml(path: Path, xml: Path, sensor: str, sig: tuple[int, ...]) -> Product:
    meta = parse_metadata(xml)
    if meta.sensor_id.upper() != sensor:
        raise InputError(f"{xml.name}: <SensorID> is {meta.sensor_id!r}, expected {sensor}")
    footprint = meta.footprint
    if footprint is None:
        name = parse_product_name(path.name)
        assert name is not None  # only named products are scanned
        footprint = ((name.lon, name.lat),)
    center = _utc(meta.center_time)
    stem = xml.name[: -len(".xml")]  # names hold dots ("E116.4"): no Path.stem
    return Product(
        path=path,
        sensor=sensor,
        image_id=stem,
        time=center,
        start=_utc(meta.start_time) if meta.start_time else center,
        end=_utc(meta.end_time) if meta.end_time else center,
        footprint=footprint,
        signature=sig,
    )


def _read_directory(path: Path, sensor: str) -> Product | None:
    files = find_product_files(path, sensor)
    if files is None:
        return None
    return _product_from_xml(path, files.xml, sensor, _stat_sig(files.xml, files.tiff))


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
                    return _product_from_xml(path, xml, sensor, _stat_sig(path))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(
            f"{path.name}: archive is truncated or corrupt ({exc}); re-download it or move it "
            "out of the archive roots"
        ) from None
    return None


@dataclass(frozen=True)
class ScanResult:
    """Products found (sorted by sensor, time, id) and the entries that could not be read."""

    products: tuple[Product, ...]
    unreadable: tuple[tuple[str, str], ...] = ()


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
    """
    cache: dict[str, Any] = {}
    if cache_path is not None and cache_path.exists():
        with contextlib.suppress(ValueError, OSError):
            loaded = json.loads(cache_path.read_text())
            if loaded.get("version") == MANIFEST_VERSION:
                cache = loaded["entries"]
    new_cache: dict[str, Any] = {}
    by_id: dict[tuple[str, str], Product] = {}
    unreadable: list[tuple[str, str]] = []
    for entry in _candidates(roots, skip):
        name = parse_product_name(entry.name)
        assert name is not None
        for sensor in sensors:
            if name.kind not in (sensor, "PMI"):
                continue
            key = f"{sensor}|{entry.resolve()}"
            try:
                if entry.is_dir():
                    product = _read_directory(entry, sensor)
                else:
                    sig = list(_stat_sig(entry))
                    hit = cache.get(key)
                    if hit is not None and hit["signature"] == sig:
                        product = Product.from_json(hit["product"]) if hit["product"] else None
                    else:
                        product = _read_archive(entry, sensor)
                    new_cache[key] = {
                        "signature": sig,
                        "product": product.to_json() if product else None,
                    }
            except PipelineError as exc:
                unreadable.append((str(entry), str(exc)))
                log.warning("skipping %s: %s", entry, exc)
                continue
            if product is None:
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
    if cache_path is not None:
        write_json(cache_path, {"version": MANIFEST_VERSION, "entries": new_cache})
    products = sorted(by_id.values(), key=lambda p: (p.sensor, p.time, p.image_id))
    return ScanResult(tuple(products), tuple(unreadable))


# --------------------------------------------------------------------------- grouping


@dataclass(frozen=True)
class Series:
    """Products of one sensor over one area within one time window, in time order."""

    id: str
    sensor: str
    window_start: date
    products: tuple[Product, ...]

    @property
    def start(self) -> datetime:
        return min(p.start for p in self.products)

    @property
    def end(self) -> datetime:
        return max(p.end for p in self.products)


def series_id(sensor: str, image_ids: Sequence[str]) -> str:
    """Deterministic series id: ``gf4-<sensor>-`` and a hash of the sorted image ids."""
    digest = _digest({"sensor": sensor, "products": sorted(image_ids)})
    return f"gf4-{sensor.lower()}-{digest[:12]}"


def _ccw(poly: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return list(poly) if _signed_area(poly) >= 0 else list(reversed(poly))


def _signed_area(poly: Sequence[tuple[float, float]]) -> float:
    n = len(poly)
    return 0.5 * sum(
        poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n)
    )


def _side(a: tuple[float, float], b: tuple[float, float], p: tuple[float, float]) -> float:
    """Positive when ``p`` lies left of the directed edge a→b."""
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def _clip(
    subject: list[tuple[float, float]], clip: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Sutherland–Hodgman: ``subject`` ∩ convex ``clip`` (both counter-clockwise)."""
    out = subject
    for i in range(len(clip)):
        a, b = clip[i], clip[(i + 1) % len(clip)]
        src, out = out, []
        for j in range(len(src)):
            p, q = src[j], src[(j + 1) % len(src)]
            dp, dq = _side(a, b, p), _side(a, b, q)
            if (dp >= 0) != (dq >= 0):  # the edge p→q crosses the clip line
                t = dp / (dp - dq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
            if dq >= 0:
                out.append(q)
        if not out:
            break
    return out


def overlap_fraction(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Area of ``a ∩ b`` over the smaller of the two areas (lon/lat quadrilaterals, convex).

    Degrees are fine here: both footprints lie within a few degrees of each other when they
    overlap at all, and only the ratio is used.
    """
    if len(a) < 3 or len(b) < 3:
        # Point footprints (no corners in the XML): same point means same scene.
        return 1.0 if a[0] == b[0] else 0.0
    pa, pb = _ccw(a), _ccw(b)
    inter = _clip(pa, pb)
    smaller = min(abs(_signed_area(pa)), abs(_signed_area(pb)))
    if len(inter) < 3 or smaller <= 0:
        return 0.0
    return abs(_signed_area(inter)) / smaller


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
    buckets: dict[tuple[str, int], list[Product]] = {}
    for p in sorted(products, key=lambda p: (p.sensor, p.time, p.image_id)):
        window = math.floor((p.time - origin) / timedelta(days=grouping.window_days))
        buckets.setdefault((p.sensor, window), []).append(p)
    out: list[Series] = []
    for (sensor, window), members in sorted(buckets.items()):
        groups: list[list[Product]] = []
        for p in members:
            for g in groups:
                if overlap_fraction(g[0].footprint, p.footprint) >= grouping.min_overlap:
                    g.append(p)
                    break
            else:
                groups.append([p])
        start = (origin + timedelta(days=window * grouping.window_days)).date()
        for g in groups:
            out.append(Series(series_id(sensor, [p.image_id for p in g]), sensor, start, tuple(g)))
    return out


# --------------------------------------------------------------------------- manifests


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _expected_manifest(series: Series, config_hash: str, version: str) -> dict[str, Any]:
    """The fields a completed manifest must hold for the series to count as done."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "series_id": series.id,
        "sensor": series.sensor,
        "products": [[p.image_id, list(p.signature)] for p in series.products],
        "config_hash": config_hash,
        "code_version": version,
    }


def read_manifest(series_dir: Path) -> dict[str, Any] | None:
    """The manifest of a series folder, or None when absent or unreadable."""
    try:
        record = json.loads((series_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _is_done(manifest: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> bool:
    return (
        manifest is not None
        and manifest.get("status") == "complete"
        and all(manifest.get(k) == v for k, v in expected.items())
    )


# --------------------------------------------------------------------------- running


Status = Literal["processed", "skipped", "failed", "pending", "planned"]


@dataclass(frozen=True)
class SeriesOutcome:
    """What happened to one series in a batch."""

    series_id: str
    status: Status
    products: int
    output: Path
    message: str = ""
    solved: int = 0


@dataclass(frozen=True)
class BatchSummary:
    """What a batch did; ``ok`` is False when any series failed."""

    outcomes: tuple[SeriesOutcome, ...]
    unreadable: tuple[tuple[str, str], ...] = ()
    superseded: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    catalog: Path | None = None
    cluster_started: bool = False
    seconds: float = 0.0

    def _ids(self, status: str) -> tuple[str, ...]:
        return tuple(o.series_id for o in self.outcomes if o.status == status)

    @property
    def processed(self) -> tuple[str, ...]:
        return self._ids("processed")

    @property
    def skipped(self) -> tuple[str, ...]:
        return self._ids("skipped")

    @property
    def failed(self) -> tuple[str, ...]:
        return self._ids("failed")

    @property
    def pending(self) -> tuple[str, ...]:
        return self._ids("pending")

    @property
    def ok(self) -> bool:
        return not self.failed

    def describe(self) -> str:
        """A short account for the terminal: one line per series that did not simply skip."""
        lines = [
            f"series: {len(self.processed)} processed, {len(self.skipped)} up to date, "
            f"{len(self.failed)} failed, {len(self.pending)} waiting for more dates; "
            f"{self.seconds:.1f} s"
        ]
        if self._ids("planned"):
            lines[0] += f" (dry run: {len(self._ids('planned'))} would be processed)"
        for o in self.outcomes:
            if o.status != "skipped":
                detail = f": {o.message}" if o.message else ""
                lines.append(f"  {o.status.upper():9} {o.series_id} ({o.products} dates){detail}")
        lines += [f"  UNREADABLE {path}: {msg}" for path, msg in self.unreadable]
        lines += [f"  superseded (kept) {s}" for s in self.superseded if s not in self.removed]
        lines += [f"  superseded (removed) {s}" for s in self.removed]
        if self.catalog is not None:
            lines.append(f"catalog: {self.catalog}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Plan:
    """The series of a batch and what each needs."""

    series: tuple[Series, ...]
    todo: tuple[Series, ...]
    done: tuple[Series, ...]
    pending: tuple[Series, ...]
    unreadable: tuple[tuple[str, str], ...]
    config_hash: str
    code_version: str


def _series_root(cfg: ArchiveConfig) -> Path:
    return cfg.output.path / "series"


def _state_dir(cfg: ArchiveConfig) -> Path:
    return cfg.output.path / ".batch"


def plan_batch(cfg: ArchiveConfig, *, force: bool = False) -> Plan:
    """Scan, group and compare with the manifests: which series need work.

    Parameters
    ----------
    cfg
        The batch configuration.
    force
        Treat every series with enough dates as needing work.

    Returns
    -------
    Plan
        The series in order, split into to do, already done and pending (too few dates).
    """
    from pipeline.plan import code_version

    skip = [cfg.output.path] + ([cfg.output.extract_dir] if cfg.output.extract_dir else [])
    scan = scan_archive(
        cfg.archive.roots,
        cfg.archive.sensors,
        cache_path=_state_dir(cfg) / "scan-cache.json",
        skip=skip,
    )
    series = group_products(scan.products, cfg.grouping)
    version, chash = code_version(), cfg.config_hash()
    todo, done, pending = [], [], []
    for s in series:
        if len(s.products) < cfg.grouping.min_dates:
            pending.append(s)
            continue
        manifest = read_manifest(_series_root(cfg) / s.id)
        if not force and _is_done(manifest, _expected_manifest(s, chash, version)):
            done.append(s)
        else:
            todo.append(s)
    return Plan(
        tuple(series), tuple(todo), tuple(done), tuple(pending), scan.unreadable, chash, version
    )


def series_config(cfg: ArchiveConfig, series: Series, address: str) -> Any:
    """The single-run :class:`pipeline.config.Config` of one series on the batch's cluster."""
    out = _series_root(cfg) / series.id
    extract = cfg.output.extract_dir or out / "work" / "extract"
    run = cfg.run
    return parse_config(
        {
            "inputs": {
                "kind": "gf4",
                "paths": [str(p.path) for p in series.products],
                "sensor": series.sensor,
                "extract_dir": str(extract),
                **run.inputs.model_dump(mode="json"),
            },
            "output": {"path": str(out), **run.output.model_dump(mode="json")},
            "grid": run.grid.model_dump(mode="json"),
            "tiling": run.tiling.model_dump(mode="json"),
            "solver": run.solver.model_dump(mode="json"),
            # The batch owns the cluster; each run only connects to it (and the batch already
            # printed the dashboard link once).
            "cluster": {
                "kind": "address",
                "address": address,
                "solver_threads": cfg.cluster.solver_threads,
                "dashboard": False,
            },
        },
        source=f"series {series.id}",
    )


def _process(cfg: ArchiveConfig, plan: Plan, series: Series, address: str, force: bool):
    from pipeline.run import run

    out = _series_root(cfg) / series.id
    out.mkdir(parents=True, exist_ok=True)
    # An old manifest must not outlive a run that starts rewriting the outputs it describes.
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    log.info("series %s: %d dates -> %s", series.id, len(series.products), out)
    try:
        summary = run(series_config(cfg, series, address), overwrite=force)
    except PipelineError as exc:
        return SeriesOutcome(series.id, "failed", len(series.products), out, str(exc))
    except Exception as exc:  # a broken series must not stop the archive
        log.exception("series %s failed", series.id)
        msg = f"internal error: {type(exc).__name__}: {exc}"
        return SeriesOutcome(series.id, "failed", len(series.products), out, msg)
    log.info("series %s:\n%s", series.id, summary.describe())
    if not summary.ok:
        msg = f"{len(summary.failures)} tile task(s) failed; the next batch retries only those"
        return SeriesOutcome(series.id, "failed", len(series.products), out, msg, summary.solved)
    manifest = {
        **_expected_manifest(series, plan.config_hash, plan.code_version),
        "status": "complete",
        "completed": datetime.now(UTC).isoformat(timespec="seconds"),
        "window_start": series.window_start.isoformat(),
        "start": series.start.isoformat(),
        "end": series.end.isoformat(),
        "dates": [p.time.isoformat() for p in series.products],
        "footprints": [p.footprint for p in series.products],
        "paths": [str(p.path) for p in series.products],
        "run": cfg.run.model_dump(mode="json"),
        "tiles": {"solved": summary.solved, "skipped": summary.solve_skipped},
    }
    if not cfg.output.keep_work:
        # Staged inputs and extracted products are several times the size of
        # the results; the manifest, not the markers, is what makes the next batch skip.
        shutil.rmtree(out / "work", ignore_errors=True)
    write_json(out / MANIFEST_NAME, manifest)
    return SeriesOutcome(series.id, "processed", len(series.products), out, "", summary.solved)


def _superseded(cfg: ArchiveConfig, plan: Plan, finished: set[str]) -> tuple[list[str], list[str]]:
    """Series folders not in the plan; those whose products a finished series now contains
    (a series that grew) are removed when ``output.remove_superseded`` is set."""
    root = _series_root(cfg)
    if not root.is_dir():
        return [], []
    current = {s.id: s for s in plan.series}
    grown = [{p.image_id for p in s.products} for s in plan.series if s.id in finished]
    stale, removed = [], []
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name in current or d.name.startswith("."):
            continue
        stale.append(d.name)
        manifest = read_manifest(d)
        ids = {pid for pid, _ in manifest["products"]} if manifest else None
        if cfg.output.remove_superseded and ids and any(ids < g for g in grown):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return stale, removed


@contextlib.contextmanager
def _batch_lock(cfg: ArchiveConfig) -> Iterator[None]:
    """Keep two batches on one output apart (a cron overlap); released if the process dies."""
    path = _state_dir(cfg) / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise PipelineError(
                f"another batch is running on output.path {cfg.output.path} (lock {path}); "
                "wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_batch(cfg: ArchiveConfig, *, force: bool = False, dry_run: bool = False) -> BatchSummary:
    """Process every series of the archive that is new or changed, then publish the catalog.

    Parameters
    ----------
    cfg
        The validated batch configuration.
    force
        Reprocess every series, ignoring manifests and tile markers.
    dry_run
        Scan, group and report what would run; process and publish nothing.

    Returns
    -------
    BatchSummary
        Processed, skipped (up to date), failed and pending series; ``ok`` is False when any
        failed. A failed series never stops the others.

    Raises
    ------
    PipelineError
        An archive root is missing, the cluster cannot be started or reached, or another batch
        holds the lock on the output.
    """
    from pipeline.stac import publish_catalog

    started = time.perf_counter()
    cfg.output.path.mkdir(parents=True, exist_ok=True)
    with _batch_lock(cfg):
        plan = plan_batch(cfg, force=force)
        log.info(
            "%d series: %d to process, %d up to date, %d waiting for more than %s dates",
            len(plan.series),
            len(plan.todo),
            len(plan.done),
            len(plan.pending),
            cfg.grouping.min_dates - 1,
        )
        outcomes: dict[str, SeriesOutcome] = {}
        for s in plan.done:
            outcomes[s.id] = SeriesOutcome(
                s.id, "skipped", len(s.products), _series_root(cfg) / s.id
            )
        for s in plan.pending:
            msg = f"{len(s.products)} of {cfg.grouping.min_dates} dates (grouping.min_dates)"
            outcomes[s.id] = SeriesOutcome(
                s.id, "pending", len(s.products), _series_root(cfg) / s.id, msg
            )
        started_cluster = False
        if dry_run:
            for s in plan.todo:
                outcomes[s.id] = SeriesOutcome(
                    s.id, "planned", len(s.products), _series_root(cfg) / s.id, "would be processed"
                )
        elif plan.todo:
            # Only now start the cluster: a batch with nothing new must not queue jobs.
            with open_cluster(cfg.cluster) as address:
                started_cluster = True
                for s in plan.todo:
                    outcomes[s.id] = _process(cfg, plan, s, address, force)
        finished = {o.series_id for o in outcomes.values() if o.status in ("processed", "skipped")}
        stale, removed = ([], []) if dry_run else _superseded(cfg, plan, finished)
        catalog = None
        if not dry_run:
            manifests = [
                (d, m)
                for s in plan.series
                if s.id in finished
                and (m := read_manifest(d := _series_root(cfg) / s.id)) is not None
            ]
            catalog = publish_catalog(cfg.output.path, manifests, title=cfg.output.catalog_title)
    ordered = tuple(outcomes[s.id] for s in plan.series)
    summary = BatchSummary(
        outcomes=ordered,
        unreadable=plan.unreadable,
        superseded=tuple(stale),
        removed=tuple(removed),
        catalog=catalog,
        cluster_started=started_cluster,
        seconds=time.perf_counter() - started,
    )
    log.info("%s", summary.describe())
    return summary


# --------------------------------------------------------------------------- command line


def add_batch_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``batch`` subcommand to a ``python -m pipeline`` subparsers object.

    Parameters
    ----------
    subparsers
        What ``ArgumentParser.add_subparsers()`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The new subparser (its ``func`` default is :func:`run_batch_command`).
    """
    batch = subparsers.add_parser(
        "batch",
        help="reprocess an archive: group products into series, run new or changed ones",
    )
    batch.add_argument("config", type=Path, help="archive YAML (see configs/archive-example.yaml)")
    batch.add_argument("--dry-run", action="store_true", help="scan and group, process nothing")
    batch.add_argument("--force", action="store_true", help="reprocess every series")
    batch.set_defaults(func=run_batch_command)
    return batch


def run_batch_command(args: argparse.Namespace) -> int:
    """Run ``batch`` from parsed arguments; returns the exit code.

    Returns
    -------
    int
        0 when no series failed, 3 when any did (the next batch retries them). A
        :class:`PipelineError` (bad configuration, unreachable cluster) propagates to the
        caller, which prints it as one line with exit code 2.
    """
    summary = run_batch(load_archive_config(args.config), force=args.force, dry_run=args.dry_run)
    print(summary.describe())
    if summary.ok:
        return EXIT_OK
    print(
        f"error: {len(summary.failed)} series failed (see above); rerun the batch to retry them",
        file=sys.stderr,
    )
    return EXIT_SERIES_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipeline.batch ARCHIVE_CONFIG``: the batch without the main CLI."""
    parser = argparse.ArgumentParser(prog="python -m pipeline.batch")
    add_batch_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["batch", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
