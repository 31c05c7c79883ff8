"""The output folder's guards: prove it can be written before hours of computing, and leave no
empty folder behind when a run stops on bad input."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.store.durable import OutputError, storage_error
from pipeline.store.layout import Layout

__all__ = ["check_writable", "remove_if_empty"]


def check_writable(layout: Layout) -> list[Path]:
    """Create ``work/`` and prove a file can be written there, before hours of computing.

    Parameters
    ----------
    layout
        The run's output folder.

    Returns
    -------
    list of Path
        The directories it created, deepest first (see :func:`remove_if_empty`).

    Raises
    ------
    OutputError
        The folder cannot be created or written (full, read-only): one line naming
        ``output.path``.
    """
    probe = layout.work / ".write-probe"
    created = [p for p in (layout.work, *layout.work.parents) if not p.exists()]
    try:
        layout.work.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        remove_if_empty(created)  # what ``mkdir`` made before it failed
        raise storage_error(exc, layout.root) or OutputError(
            f"output.path: cannot write {layout.root} ({exc.strerror or exc}); choose a "
            "writable `output.path`"
        ) from None
    return created


def remove_if_empty(directories: Sequence[Path]) -> None:
    """Remove those of ``directories`` (deepest first) that are still empty.

    A run that stops on bad input before writing anything leaves no empty output directory
    behind; a directory holding anything stays.

    Parameters
    ----------
    directories
        Candidate directories, deepest first (as :func:`check_writable` returns them).
    """
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or gone): its parents are not empty either
