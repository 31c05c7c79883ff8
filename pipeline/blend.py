"""Stage 3: blend the overlapping per-tile solutions into the final cube, one task per core.

For the core of one tile, every neighbour whose halo covers part of it contributes its part
there, weighted by :func:`pipeline.tiling.feather_weights`: x = Σ w·x_k / Σ w over the tiles
with a finite value. The task then writes the core region, which is exactly one chunk per
variable of the cube, so no two tasks share a chunk.

Only the strips where a neighbour's halo reaches into the core are mixed. Everywhere else the
tile's own weight is 1 and no other tile contributes, so the blend there *is* the tile's own
solution and is copied. The arithmetic is float32, like the parts and the cube: the weights
sum to 1, so float32 adds no more than rounding of the last bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import TileError
from pipeline.outputs import COMPONENTS, Layout, fsync_tile_chunks, storage_error
from pipeline.tiling import Tile, TileGrid, Window, feather_weights

__all__ = ["BlendJob", "blend_core", "blend_tile"]


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


@dataclass(frozen=True)
class _Source:
    """What one tile's part holds over the core being blended."""

    covered: Window  # the part's halo ∩ the core, in scene pixels
    values: np.ndarray  # (component, time) + covered's shape
    weights: np.ndarray  # feather weights over ``covered``


def _read_sources(job: BlendJob) -> dict[Tile, _Source]:
    """Each available part over the piece of the core its halo covers (one read per part)."""
    import zarr

    core = job.tile.core
    found: dict[Tile, _Source] = {}
    for other, other_id in job.sources:
        path = job.layout.part(other_id)
        covered = other.halo.intersection(core)
        if covered is None or not path.exists():
            continue
        rows, cols = covered.relative_to(other.halo).slices
        values = np.asarray(zarr.open_array(store=str(path), mode="r")[:, :, rows, cols])
        weights = feather_weights(other, job.grid, covered)
        found[other] = _Source(covered, values, weights)
    return found


def _mix(region: Window, sources: dict[Tile, _Source]) -> np.ndarray:
    """Σ w·x / Σ w over the sources with finite values, on one region of the core."""
    num: np.ndarray | None = None
    den: np.ndarray | None = None
    for source in sources.values():
        piece = source.covered.intersection(region)
        if piece is None:
            continue
        src = piece.relative_to(source.covered).slices
        dst = piece.relative_to(region).slices
        values = source.values[:, :, src[0], src[1]]
        weights = np.where(np.isfinite(values), source.weights[src], np.float32(0))
        if num is None or den is None:
            shape = (*values.shape[:2], region.height, region.width)
            num, den = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        num[:, :, dst[0], dst[1]] += np.nan_to_num(values) * weights
        den[:, :, dst[0], dst[1]] += weights
    assert num is not None and den is not None  # the region is some source's coverage
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.float32(np.nan))


def blend_core(job: BlendJob) -> np.ndarray:
    """The blended (component, time, h, w) float32 stack over the core of ``job.tile``."""
    core = job.tile.core
    sources = _read_sources(job)
    if not sources:
        raise TileError(job.tile_id, "no solved part covers this tile; rerun to retry its solve")
    own = sources.get(job.tile)
    # The strips neighbours reach into, mixed from every tile covering them. Strips share their
    # corners, so all are mixed from the unmodified parts before any is written.
    strips = [
        (source.covered.relative_to(core).slices, _mix(source.covered, sources))
        for other, source in sources.items()
        if other != job.tile
    ]
    if own is not None:
        # The own halo contains the core, so this is the whole core, in the right shape.
        out = own.values
    else:  # own solve failed: only the strips its neighbours cover get values
        first = next(iter(sources.values())).values
        out = np.full((*first.shape[:2], core.height, core.width), np.nan, np.float32)
    for (rows, cols), mixed in strips:
        out[:, :, rows, cols] = mixed
    return out


def blend_tile(job: BlendJob) -> str:
    """Blend one core and write it, durably, into the cube's ``clear``, ``cloud`` and ``haze``.

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
        cube = zarr.open_group(store=job.cube, mode="r+")
        for k, name in enumerate(COMPONENTS):
            target = cube[name]
            assert isinstance(target, zarr.Array)  # the cube's data variables
            target[:, job.band_index, rows, cols] = stack[k]
        # Durable before the run marks the band blended and deletes the parts it came from.
        fsync_tile_chunks(Path(job.cube), COMPONENTS, job.tile.row, job.tile.col, job.band_index)
    except Exception as exc:
        raise storage_error(exc, job.cube) or TileError(
            job.tile_id, f"writing the cube: {type(exc).__name__}: {exc}"
        ) from exc
    return job.tile_id
