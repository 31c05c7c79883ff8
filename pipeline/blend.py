"""Stage 3: blend the overlapping per-tile solutions into the final cube, one task per core.

For the core of one tile, every neighbour whose halo covers part of it contributes its part
there, weighted by :func:`pipeline.tiling.feather_weights`: x = Σ w·x_k / Σ w over the tiles
with a finite value. The task then writes the core region, which is exactly one chunk per
variable of the cube, so no two tasks share a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.errors import TileError
from pipeline.outputs import COMPONENTS, Layout, storage_error
from pipeline.tiling import Tile, TileGrid, feather_weights

__all__ = ["BlendJob", "blend_tile"]


@dataclass(frozen=True)
class BlendJob:
    """Blending of one band of one tile core.

    ``sources`` pairs each neighbour tile (itself included) with its solve id, for the parts to
    read; a neighbour whose part is missing (its solve failed) is left out of the blend.
    """

    tile: Tile
    tile_id: str
    band_index: int
    grid: TileGrid
    sources: tuple[tuple[Tile, str], ...]
    layout: Layout
    cube: str


def blend_core(job: BlendJob) -> np.ndarray:
    """The blended (component, time, h, w) stack over the core of ``job.tile``."""
    import zarr

    core = job.tile.core
    num: np.ndarray | None = None
    den: np.ndarray | None = None
    for other, other_id in job.sources:
        path = job.layout.part(other_id)
        if not path.exists():
            continue
        overlap = other.halo.intersection(core)
        if overlap is None:
            continue
        src = overlap.relative_to(other.halo).slices
        dst = overlap.relative_to(core).slices
        values = np.asarray(zarr.open_array(store=str(path), mode="r")[:, :, src[0], src[1]])
        weights = feather_weights(other, job.grid)[src]
        if num is None or den is None:
            shape = (*values.shape[:2], core.height, core.width)
            num, den = np.zeros(shape, np.float64), np.zeros(shape, np.float64)
        valid = np.isfinite(values)
        num[:, :, dst[0], dst[1]] += np.where(valid, values * weights, 0.0)
        den[:, :, dst[0], dst[1]] += np.where(valid, weights, 0.0)
    if num is None or den is None:
        raise TileError(job.tile_id, "no solved part covers this tile; rerun to retry its solve")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan).astype(np.float32)


def blend_tile(job: BlendJob) -> str:
    """Blend one core and write it into the cube's ``clear``, ``cloud`` and ``haze``.

    Runs on a worker.

    Returns
    -------
    str
        The tile id.
    """
    import zarr

    stack = blend_core(job)
    rows, cols = job.tile.core.slices
    try:
        for k, name in enumerate(COMPONENTS):
            target = zarr.open_array(store=job.cube, path=name, mode="r+")
            target[:, job.band_index, rows, cols] = stack[k]
    except Exception as exc:
        raise storage_error(exc, job.cube) or TileError(
            job.tile_id, f"writing the cube: {type(exc).__name__}: {exc}"
        ) from exc
    return job.tile_id
