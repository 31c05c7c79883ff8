"""Stage 2: one decomposition per (band, tile), solved on the tile's halo.

Each task reads the halo of all dates from ``input.zarr``, solves D = L + C + N with
:func:`cloudcore.decompose` and writes the halo-shaped clear/cloud/haze stack to its *own* Zarr
array under ``work/parts/`` (halos overlap, so they must never share a chunk of one store). The
part is written under a temporary name, fsynced and renamed into place
(:func:`pipeline.outputs.write_part`); only then is the completion marker, holding the solver
diagnostics, written.

A tile with no valid data on any date (outside every footprint, e.g. ``grid.bounds`` wider
than the inputs) is not an error: its part is all NaN and its marker says ``"empty": true``;
the cube holds NaN there and the COGs nodata.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.config import SolverConfig
from pipeline.errors import TileError
from pipeline.outputs import Layout, storage_error, write_marker, write_part
from pipeline.tiling import Tile

__all__ = ["SolveJob", "resolve_lambda", "solve_tile"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveJob:
    """The decomposition of one band of one tile."""

    tile: Tile
    band_index: int
    band: str
    tile_id: str
    layout: Layout
    solver: SolverConfig
    threads: int
    inner_chunk: int | None = None  # chunk edge of the sharded part (TileGrid.inner_chunk)


def resolve_lambda(rule: str | float, d: int, n: int) -> float:
    """λ for a d × n tile matrix: ``"auto"`` = 1/√d, ``"star"`` = λ̂*(d, n), or the number given.

    d is the number of pixels of the halo (no-data pixels included), not of the scene
    (SPEC-NOTES §3).
    """
    import cloudcore

    if rule == "auto":
        return float(cloudcore.lambda_default(d))
    if rule == "star":
        return float(cloudcore.lambda_star(d, n))
    return float(rule)


def solve_tile(job: SolveJob) -> dict[str, Any]:
    """Solve one (band, tile) and write its part and completion marker.

    Runs on a worker.

    Returns
    -------
    dict
        The diagnostics written to the marker.

    Raises
    ------
    TileError
        The solver rejected the tile (e.g. fewer than 2 observed dates) or I/O failed.
    OutputError
        The part cannot be written (full disk, read-only).
    """
    import zarr

    import cloudcore

    halo = job.tile.halo
    rows, cols = halo.slices
    try:
        source = zarr.open_array(store=str(job.layout.input_store), path="observed", mode="r")
        stack = np.asarray(source[:, job.band_index, rows, cols])  # (n, h, w)
    except Exception as exc:
        raise TileError(job.tile_id, f"reading input.zarr: {type(exc).__name__}: {exc}") from exc
    n = stack.shape[0]
    d = halo.height * halo.width
    # Row = pixel (C order over the halo), column = date.
    # A transposed view of the C-ordered (n, d) stack: decompose works dates × pixels internally,
    # so this avoids two transposing copies.
    D = stack.reshape(n, d).astype(job.solver.dtype, copy=False).T
    mask = np.isfinite(D)
    lam = resolve_lambda(job.solver.lam, d, n)
    record: dict[str, Any] = {
        "tile_id": job.tile_id,
        "band": job.band,
        "row": job.tile.row,
        "col": job.tile.col,
        "d": d,
        "n": n,
        "method": job.solver.method,
        "lam": lam,
    }
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # Non-convergence is recorded per tile in the diagnostics instead.
            warnings.simplefilter("ignore", cloudcore.ConvergenceWarning)
            result = cloudcore.decompose(
                D,
                job.solver.method,
                lam=lam,
                beta=job.solver.beta,
                tol=job.solver.tol,
                max_iter=job.solver.max_iter,
                mask=mask,  # an all-True mask is solved as unmasked by cloudcore itself
                threads=job.threads,
            )
    except ValueError as exc:
        raise TileError(job.tile_id, f"solver rejected the tile: {exc}") from exc
    # ``ground`` is L clipped to [0, 1], always safe for the user (SPEC-NOTES §2). The (d, n)
    # results are transposed views of cloudcore's dates × pixels arrays, so .T.reshape is free
    # and the layers go to the part without a copy. A tile outside every footprint is all NaN.
    frames = (n, halo.height, halo.width)
    layers = [
        x.T.reshape(frames).astype(np.float32, copy=False)
        for x in (result.ground, result.C, result.N)  # in COMPONENTS order: clear, cloud, haze
    ]
    record.update(
        iterations=int(result.iterations),
        converged=bool(result.converged),
        residual=float(result.residual),
    )
    if not mask.any():
        record["empty"] = True  # reported once for all such tiles by the run
    elif not result.converged:
        log.warning("tile %s: no convergence after %d iterations", job.tile_id, result.iterations)
    record["seconds"] = round(time.perf_counter() - started, 4)
    path = job.layout.part(job.tile_id)
    try:
        write_part(path, layers, job.inner_chunk)
    except Exception as exc:
        raise storage_error(exc, path) or TileError(
            job.tile_id, f"writing its part: {type(exc).__name__}: {exc}"
        ) from exc
    write_marker(job.layout.marker(job.tile_id), record)
    return record
