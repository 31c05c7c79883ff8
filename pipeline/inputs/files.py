"""Input files: ``inputs.paths`` expanded (globs, ``~``), and rasters checked for truncation."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

import rasterio

from pipeline.errors import InputError

__all__ = ["check_complete", "expand_paths"]

_GLOB_CHARS = re.compile(r"[*?\[]")


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
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


def check_complete(src: rasterio.io.DatasetReader, path: Path) -> None:
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
