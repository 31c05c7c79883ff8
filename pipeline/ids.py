"""Every digest and id the pipeline makes: deterministic, so that the same work has one name.

A tile's id names its task, its completion marker and its log lines; a series id names a batch
folder; file signatures tell a rewritten input from the one a marker was made for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = [
    "ALL_BANDS",
    "as_utc",
    "code_version",
    "digest",
    "file_signature",
    "json_digest",
    "seed_from",
    "tile_id",
    "time_label",
]

#: Band label of work that covers every band at once (staging).
ALL_BANDS = "all"


def digest(lines: Iterable[str], length: int = 16) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``lines`` joined by newlines."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:length]


def json_digest(obj: Any, length: int = 64) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``obj`` as canonical JSON."""
    payload = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:length]


def seed_from(text: str) -> int:
    """A non-negative 63-bit integer from the SHA-256 of ``text`` (a reproducible RNG seed)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def file_signature(*paths: Path) -> tuple[int, ...]:
    """Size and modification time (ns) of each file: cheap, and changes when a file is rewritten."""
    out: list[int] = []
    for path in paths:
        st = Path(path).stat()
        out += [st.st_size, st.st_mtime_ns]
    return tuple(out)


def code_version() -> str:
    """Package and solver versions: part of every tile id, so new code never reuses old results."""
    import cloudcore

    try:
        package = version("cloudremoval")
    except PackageNotFoundError:
        package = "unknown"
    return f"cloudremoval-{package}+cloudcore-{getattr(cloudcore, '__version__', 'unknown')}"


def tile_id(
    *,
    input_ids: Sequence[str],
    tile: Any,
    band: str | None,
    settings: Any,
    version: str,
) -> str:
    """Deterministic id of one tile's work, naming its task, completion marker and log lines.

    Parameters
    ----------
    input_ids
        Ids of the acquisitions, in series order.
    tile
        The tile (:class:`pipeline.grid.tiling.Tile`).
    band
        Band name, or None for work that covers all bands (staging).
    settings
        Everything else the result depends on (target grid, tiling, solver settings, stage name);
        must be JSON-serialisable.
    version
        Code version (package and solver versions).

    Returns
    -------
    str
        ``<band>-r..c..-<16 hex digits>``: readable prefix, hash of all of the above.
    """
    payload = {
        "inputs": list(input_ids),
        "band": band,
        "tile": [tile.row, tile.col],
        "settings": settings,
        "version": version,
    }
    return f"{band or ALL_BANDS}-{tile.name}-{json_digest(payload, 16)}"


def as_utc(time: datetime) -> datetime:
    """``time`` in UTC; a time without a zone is taken as UTC, like every time the pipeline
    writes."""
    return time.replace(tzinfo=UTC) if time.tzinfo is None else time.astimezone(UTC)


def time_label(time: datetime) -> str:
    """An acquisition's time in output file names: UTC, to the second, ``20200601T011500Z``.

    GF-4 stares: many acquisitions of one area a day, so a date alone would make two outputs
    share a name. A time without a zone is taken as UTC.
    """
    return as_utc(time).strftime("%Y%m%dT%H%M%SZ")
