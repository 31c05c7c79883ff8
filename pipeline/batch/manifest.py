"""Series manifests: ``series.json``, written last in a series folder, only after a clean run.

A manifest lists the series' products with their file sizes and times, the configuration hash
and the code version; a series whose manifest still matches all of these is done, and the
next batch skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.batch.series import Series
from pipeline.store.durable import read_json

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "completed_manifest",
    "expected_manifest",
    "is_done",
    "read_manifest",
]

MANIFEST_NAME = "series.json"
#: Bumped when the manifest layout changes, so that old manifests are not misread.
MANIFEST_VERSION = 1


def expected_manifest(series: Series, config_hash: str, version: str) -> dict[str, Any]:
    """The fields a completed manifest must hold for the series to count as done.

    Parameters
    ----------
    series
        The series as scanned now.
    config_hash
        :meth:`pipeline.batch.ArchiveConfig.config_hash` of this batch.
    version
        :func:`pipeline.ids.code_version` of this batch.

    Returns
    -------
    dict
        Manifest version, series id, sensor, products (image id and file signature), the
        configuration hash and the code version.
    """
    return {
        "manifest_version": MANIFEST_VERSION,
        "series_id": series.id,
        "sensor": series.sensor,
        "products": [[p.image_id, list(p.signature)] for p in series.products],
        "config_hash": config_hash,
        "code_version": version,
    }


def completed_manifest(
    series: Series,
    config_hash: str,
    version: str,
    *,
    run: Mapping[str, Any],
    solved: int,
    skipped: int,
) -> dict[str, Any]:
    """The manifest of a series that has just run cleanly.

    Parameters
    ----------
    series
        The series.
    config_hash, version
        As for :func:`expected_manifest`.
    run
        The ``run`` template it ran with (JSON-ready).
    solved, skipped
        Tiles solved in this run, and skipped because earlier runs had solved them.

    Returns
    -------
    dict
        :func:`expected_manifest` plus status, completion time, time span, dates, footprints,
        product paths, the run settings and tile counts (the STAC item is built from these).
    """
    return {
        **expected_manifest(series, config_hash, version),
        "status": "complete",
        "completed": datetime.now(UTC).isoformat(timespec="seconds"),
        "window_start": series.window_start.isoformat(),
        "start": series.start.isoformat(),
        "end": series.end.isoformat(),
        "dates": [p.time.isoformat() for p in series.products],
        "footprints": [p.footprint for p in series.products],
        "paths": [str(p.path) for p in series.products],
        "run": dict(run),
        "tiles": {"solved": solved, "skipped": skipped},
    }


def read_manifest(series_dir: Path) -> dict[str, Any] | None:
    """The manifest of a series folder, or None when absent or unreadable.

    Parameters
    ----------
    series_dir
        The series' output folder.

    Returns
    -------
    dict or None
        The manifest as written.
    """
    return read_json(series_dir / MANIFEST_NAME)


def is_done(manifest: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> bool:
    """Whether a manifest says its series is complete for exactly the ``expected`` fields.

    Parameters
    ----------
    manifest
        What :func:`read_manifest` returned.
    expected
        What :func:`expected_manifest` returns for the series now.

    Returns
    -------
    bool
        True when the series needs no work.
    """
    return (
        manifest is not None
        and manifest.get("status") == "complete"
        and all(manifest.get(k) == v for k, v in expected.items())
    )
