"""The output folder's guards: prove it can be written and say whether it has room before hours
of computing, and leave no empty folder behind when a run stops on bad input."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cloudcore.catalog import writes_haze
from pipeline.store.durable import OutputError, storage_error
from pipeline.store.layout import Layout

if TYPE_CHECKING:
    from pipeline.plan import RunPlan

__all__ = ["check_space", "check_writable", "expected_bytes", "remove_if_empty"]

log = logging.getLogger(__name__)

#: Bytes on disk per raw byte of what a run writes, measured with the default settings on the
#: full-size benchmark (10240² PMS frames, 7 dates × 5 bands, an 11506 × 11551 grid; docs/RUN.md,
#: "Disk"): the staged input (float32 observations, uint8 codes: 10.1 GB of 23.3), the cube
#: (float32 layers, uint8 provenance and mask, Blosc LZ4: 28.6 GB of 61.4) and the COGs
#: (DEFLATE: 3.7 GB of 10.2). Reflectance's low mantissa bits are noise, so these vary little
#: between scenes; pixels outside every footprint compress to almost nothing.
STORED_FRACTION = {"input": 0.44, "cube": 0.47, "cogs": 0.36}


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


def expected_bytes(plan: RunPlan) -> int:
    """The bytes a run is expected to leave under ``output.path`` once finished: each store's raw
    size (dates × bands × the grid's pixels, by data type) times its :data:`STORED_FRACTION`.

    Parameters
    ----------
    plan
        The run's :class:`~pipeline.plan.RunPlan`.

    Returns
    -------
    int
        Bytes; strips, previews and quicklooks (a few hundred MB at full size) are not in it.
    """
    config = plan.config
    pixels = plan.grid.height * plan.grid.width
    dates, bands = len(plan.acquisitions), len(plan.bands)
    values = dates * bands * pixels  # one (time, band, y, x) layer
    method, refines = config.solver.method, config.solver.refines
    # A method without haze writes its haze layer as zeros, which compress to nothing.
    solved = len(config.solver.layers) - (0 if writes_haze(method, refines) else 1)
    cog = np.dtype(config.output.cog_dtype).itemsize
    raw = {
        "input": values * (4 + 1),  # observations float32, where observed uint8
        "cube": values * (4 * solved + 1) + dates * pixels,  # layers, provenance; the mask
        "cogs": values * cog + dates * pixels,  # a COG per date and band; the masks' COGs
    }
    return int(sum(raw[k] * STORED_FRACTION[k] for k in raw))


def _bytes_under(root: Path) -> int:
    """The bytes of the files under ``root`` (what an earlier run of the same output left)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # removed while counted
    return total


def check_space(plan: RunPlan) -> int:
    """Warn, before any work starts, when ``output.path`` has less free space than the run is
    expected to write (:func:`expected_bytes`, less what an earlier run left there to resume
    from). A run that finds the disk full stops cleanly (:mod:`pipeline.store.durable`), but
    only when it gets there, hours in. A warning, not an error: compression varies with the
    scene (footprints that cover part of the grid, a flat ocean), so the estimate may be high.
    Everything under ``output.path`` counts as already written: a rerun with other settings
    keeps the published cube until it publishes its own, which this does not foresee.

    Parameters
    ----------
    plan
        The run's :class:`~pipeline.plan.RunPlan`.

    Returns
    -------
    int
        The bytes the run is expected to still write.
    """
    root = plan.layout.root
    needed = max(expected_bytes(plan) - _bytes_under(root), 0)
    free = shutil.disk_usage(root).free
    if free < needed:
        log.warning(
            "output.path: %s has %.1f GB free and this run is expected to write %.1f GB more; "
            "free space or choose another `output.path`, or the run may stop with the disk full",
            root,
            free / 1e9,
            needed / 1e9,
        )
    return needed
