"""Durability: fsync, atomic writes, completion markers, publication, storage errors.

Crash safety, in the order things become durable:

* a task's data (its chunks of ``input.zarr`` or of the cube, and its strip stores) is fsynced
  *before* its completion marker is written, and markers are written atomically, so a marker
  always means "this work is complete on disk" even after a power cut or a ``kill -9``;
* strip stores are written under a temporary name and renamed into place
  (:func:`durable_store`), so a strip without a marker is at worst a complete orphan, never a
  half-written store under the final name;
* final products are built under temporary names (``cube.zarr.partial``, ``cog.partial/``,
  ``quicklooks.partial/``, a hidden CSV) and published by :func:`publish_dir` /
  ``os.replace`` only once all of them are complete; ``COMPLETE.json`` is removed before and
  rewritten after publication, so a reader that finds it knows the set is whole.

A full or read-only disk is the user's to fix, so :func:`storage_error` turns it into one
:class:`OutputError` line that names the path and the fix.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError
from pipeline.store.layout import Layout

__all__ = [
    "OutputError",
    "atomic_write",
    "durable_store",
    "fsync_paths",
    "fsync_tree",
    "gdal_storage_error",
    "output_errors",
    "publish_dir",
    "read_json",
    "read_markers",
    "remove_published",
    "remove_store",
    "storage_error",
    "write_json",
    "write_marker",
]

#: errno values that mean "the output location cannot take this write": the user must free
#: space or choose another ``output.path``; retrying the tile elsewhere would not help.
_STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file size limit exceeded",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a parent is not a directory",
}


class OutputError(PipelineError):
    """The output location is not writable or full: the message names the path and the fix."""


def storage_error(exc: BaseException, what: str | Path) -> OutputError | None:
    """An :class:`OutputError` for an ``OSError`` that a retry cannot fix (full disk, read-only
    or not permitted), or None for any other exception.

    Parameters
    ----------
    exc
        The exception raised while writing.
    what
        The path (or a description of it) that was being written.
    """
    if not isinstance(exc, OSError) or exc.errno not in _STORAGE_ERRNOS:
        return None
    where = getattr(exc, "filename", None) or what
    full = exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    fix = (
        "free space or choose another `output.path`" if full else "choose a writable `output.path`"
    )
    return OutputError(
        f"output.path: cannot write {where}: {_STORAGE_ERRNOS[exc.errno]} "
        f"([Errno {exc.errno}]); {fix}"
    )


@contextmanager
def output_errors(what: str | Path) -> Iterator[None]:
    """Within the block, an ``OSError`` that a retry cannot fix becomes the user's one-line
    :class:`OutputError` naming ``what`` (:func:`storage_error`); any other passes unchanged."""
    try:
        yield
    except OSError as exc:
        error = storage_error(exc, what)
        if error is None:
            raise
        raise error from exc


#: Free bytes below which a failed GDAL write is taken for a full disk, and how close to the
#: process's file size limit a file must have grown for it to be taken for the cause (GDAL
#: writes a block of at most 1 MiB at a time).
_NEARLY_FULL = 16 * 2**20
_NEAR_LIMIT = 2 * 2**20


def gdal_storage_error(
    exc: BaseException, path: Path, written: Sequence[Path]
) -> OutputError | None:
    """:func:`storage_error` for a failed GDAL write, whose exception has no errno.

    GDAL logs the C library's reason ("File too large") but raises only "Write failed", so the
    cause is read off the file system instead: almost no free space, one of the files
    ``written`` grown to the process's file size limit (``ulimit -f``), or a directory this
    process may not write. None when none holds.
    """
    import resource

    error = storage_error(exc, path)
    # rasterio raises GDAL's errors as its own classes (CPLE_…Error), which are neither: a
    # scratch GeoTIFF cut short by a full disk surfaces only when the COG driver reads it back.
    from_gdal = type(exc).__module__.startswith("rasterio")
    if error is not None or not (isinstance(exc, OSError | RuntimeError) or from_gdal):
        return error
    directory = path.parent
    soft_limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    sizes = [p.stat().st_size for p in written if p.exists()]
    if shutil.disk_usage(directory).free < _NEARLY_FULL:
        code = errno.ENOSPC
    elif soft_limit != resource.RLIM_INFINITY and max(sizes, default=0) + _NEAR_LIMIT > soft_limit:
        code = errno.EFBIG
    elif not os.access(directory, os.W_OK):
        code = errno.EACCES
    else:
        return None
    return storage_error(OSError(code, os.strerror(code), str(path)), path)


def _fsync_dir(path: Path) -> None:
    """Make the entries of a directory (files created or renamed in it) durable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # not a directory on this platform / file system: nothing to sync
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems (e.g. some FUSE mounts) refuse fsync on directories
    finally:
        os.close(fd)


def _fsync_dirs(dirs: Iterable[Path]) -> None:
    """fsync directories, deepest first (each once)."""
    for d in sorted(set(dirs), key=lambda p: len(p.parts), reverse=True):
        _fsync_dir(d)


def fsync_paths(paths: Iterable[Path]) -> None:
    """fsync regular files and then the directories holding them."""
    parents: set[Path] = set()
    for path in paths:
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
            parents.add(path.parent)
    _fsync_dirs(parents)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (and ``root`` itself)."""
    dirs = [root]
    for base, dirnames, filenames in os.walk(root):
        dirs.extend(Path(base) / d for d in dirnames)
        for name in filenames:
            with open(Path(base) / name, "rb") as fh:
                os.fsync(fh.fileno())
    # Every directory once: the files' parents are among them.
    _fsync_dirs(dirs)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file, or all of the new one."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename itself must survive a crash too, or the marker could vanish after a power cut.
    _fsync_dir(path.parent)


def write_marker(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON completion marker atomically (call only once the tile's data is durable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(dict(record), sort_keys=True, default=str).encode())


def write_json(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON document atomically, indented for people to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(dict(record), indent=1, sort_keys=True, default=str).encode())


@contextmanager
def durable_store(path: Path) -> Iterator[Path]:
    """Build a directory store under a temporary name; on success make it durable and rename it
    to ``path``.

    Yields the temporary path to write. When the block ends without an exception everything
    under it is fsynced and it is renamed over ``path`` (an older complete store there, left by
    a crash between data and marker, is replaced: its values were the same). When it raises the
    temporary store is deleted. An interrupted process leaves at worst an orphan temporary
    store, removed by the next write of the same ``path`` or by :func:`remove_store`, never a
    truncated store under the final name.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        fsync_tree(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_orphans(path: Path) -> None:
    """Temporary stores that interrupted writes of the store at ``path`` left behind."""
    for orphan in path.parent.glob(f".{path.name}.*.tmp"):
        shutil.rmtree(orphan, ignore_errors=True)


def remove_store(path: Path) -> None:
    """Delete a store written by :func:`durable_store`, and any orphans of interrupted writes."""
    shutil.rmtree(path, ignore_errors=True)
    _remove_orphans(path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when the file is absent, unreadable or not an object."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def read_markers(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The records of the markers that exist among ``paths``."""
    records = []
    for path in paths:
        if path.exists():
            records.append(json.loads(path.read_text()))
    return records


def remove_published(layout: Layout) -> None:
    """Remove the completion record first, then leftovers of an interrupted publication.

    Published products stay until :func:`publish_dir` replaces them; only ``COMPLETE.json``
    goes now, because from here on the set may be a mix of old and new.
    """
    layout.complete.unlink(missing_ok=True)
    _fsync_dir(layout.root)


def publish_dir(partial: Path, final: Path) -> None:
    """Move a finished directory (or file) into place, replacing the previous one.

    The new one is complete and fsynced before anything moves. The previous one is renamed
    aside, the new one renamed in, and only then is the old one deleted: a reader sees the old
    product or the new one under ``final`` (or, for the instant between the two renames, none),
    never a mixture or a half-written one. Leftover ``.old-*`` copies of an interrupted
    publication are removed too.
    """
    if partial.is_dir():
        fsync_tree(partial)
    else:
        fsync_paths([partial])
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        os.replace(final, old)
    os.replace(partial, final)
    _fsync_dir(final.parent)
    for leftover in final.parent.glob(f".{final.name}.old-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
