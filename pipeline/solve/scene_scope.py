"""Scene scope (``solver.scope: scene``): one exact solve (aATM, RPCA, NNRPCA) per band over the
whole scene.

The band is never gathered. Its tiles' *cores* (no halo: nothing is blended) are shared out
among the workers, one :class:`SceneShard` Dask actor per worker, which reads its tiles from
``work/input.zarr`` and keeps their solver state (D, L, C, N, Y and the mask) in its own memory.
The client runs :func:`cloudcore.scene.solve_blocks`: each iteration calls every shard once
(the fused element-wise pass over its tiles, which returns the n × n float64 Gram matrix and the
residual of its tiles), sums those, and sends the n × n SVT weights of the next iteration back.
So the client exchanges n² + 1 numbers per shard and iteration, whatever the scene size. When
the iterations stop, each shard writes its tiles' cores straight into the cube (each core owns
its chunks), makes them durable and drops its state; then the client writes the band's marker.

Actors are used rather than tasks because the state must stay where it is between iterations:
an actor's methods run on its worker, in a thread of their own, and the client calls them
directly. Actors are not resilient: if a worker is lost, its shard's state is lost with it, the
band fails (after :data:`pipeline.cluster.RETRIES` retries of the whole band) and a rerun redoes
it. Resume is at band level: a band whose marker exists is skipped, any other band is solved
from the start, so a killed run loses at most the band in flight.

Memory per worker: its share of the band's pixels × dates ×
:func:`cloudcore.scene.bytes_per_entry` (25 bytes in float32; 23 where staging copied the DN
unresampled (inputs already on the grid's lattice, docs/FOOTPRINTS.md) and D is held as the
16-bit DN it came from), plus one tile of reading and writing buffers. A full GF-4 PMS band
(10240² px × 7 dates, warped from its RPCs, so float32) holds 18.4 GB of state, spread over the
workers (docs/SCOPES.md).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cloudcore.anomaly import anomaly_scale
from cloudcore.scene import Block, BlockGroup, SceneOutcome
from cloudcore.solvers import SparseRule
from pipeline.cluster import RETRIES
from pipeline.cluster.faults import inject_faults
from pipeline.cluster.heap import return_free_memory
from pipeline.config import SolverConfig
from pipeline.errors import ConfigError, InputError, TileError
from pipeline.grid.tiling import Tile, TileGrid
from pipeline.solve.tile import bound_ground, solver_lambda
from pipeline.store.cube import arrays_for_writing, chunk_files, chunk_range
from pipeline.store.durable import OutputError, fsync_paths, storage_error, write_marker
from pipeline.store.layout import Layout, stored_layers

__all__ = [
    "BandJob",
    "DaskShards",
    "SceneShard",
    "ShardSpec",
    "dn_scale",
    "partition",
    "solve_band",
    "solve_shards",
    "start_shards",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardSpec:
    """The tiles of one band that one shard (worker) holds."""

    input_store: str
    band_index: int
    tiles: tuple[Tile, ...]
    tile_ids: tuple[str, ...]
    dtype: str
    threads: int
    shadow: bool = False  # the shadow model: a fourth layer
    # How each block's written ground is bounded (pipeline.solve.tile.bound_ground); None:
    # not at all.
    solver: SolverConfig | None = None
    # The values' DN scale where they are DN / max_dn: D is then held as 16-bit DN
    # (cloudcore.scene.Block); None: as floats.
    max_dn: float | None = None
    # Whether the ground is written into ``clear`` (Config.rows_write_ground): not where the
    # mask pass writes every entry of it from the other layers without reading it.
    ground: bool = True


class SceneShard(BlockGroup):
    """A worker's share of one band: its tiles' solver state, as a Dask actor.

    Created on the worker (``client.submit(SceneShard, spec, actor=True, workers=[…])``): it
    reads its tiles' cores of all dates from ``input.zarr``. The solver's calls are those of
    :class:`cloudcore.scene.BlockGroup`; :meth:`write` puts the result into the cube.
    """

    def __init__(self, spec: ShardSpec) -> None:
        import zarr

        self.spec = spec
        blocks = []
        source = None
        for tile, tile_id in zip(spec.tiles, spec.tile_ids, strict=True):
            inject_faults("solve", tile_id)
            rows, cols = tile.core.slices
            try:
                if source is None:  # opened once, at the first tile (its error names that tile)
                    source = zarr.open_array(store=spec.input_store, path="observed", mode="r")
                stack = np.asarray(source[:, spec.band_index, rows, cols])  # (n, h, w)
            except Exception as exc:
                message = f"reading input.zarr: {type(exc).__name__}: {exc}"
                raise TileError(tile_id, message) from exc
            try:
                blocks.append(
                    Block(
                        stack,
                        spec.dtype,
                        origin=(tile.core.row_off, tile.core.col_off),
                        max_dn=spec.max_dn,
                    )
                )
            except ValueError as exc:
                raise TileError(tile_id, f"solver rejected the tile: {exc}") from exc
        super().__init__(blocks, threads=spec.threads)
        self.peak_bytes = self.nbytes()
        return_free_memory()  # each tile's read buffer, under the mmap threshold: heap holes

    def start(self, lam: float, dual: float, mu: float, sparse: SparseRule) -> np.ndarray:
        gram = super().start(lam, dual, mu, sparse)
        self.peak_bytes = max(self.peak_bytes, self.nbytes())  # all state allocated now
        return gram

    def shard_timing(self) -> dict[str, Any]:
        """Compute seconds by phase so far, and the peak bytes of state held."""
        return {"seconds": self.timing(), "peak_bytes": self.peak_bytes}

    def write(self, cube: str, chunk_rows: int) -> list[dict[str, Any]]:
        """Write every tile's clear (unless :attr:`ShardSpec.ground` is False), cloud and haze
        into its core of the cube, durably; then drop the state. Returns one record per tile
        (index, pixels, whether it was empty)."""
        spec = self.spec
        path = Path(cube)
        records = []
        try:
            # The ground is computed all the same: the cap reads it and moves its excess into
            # the cloud (_cap_block).
            written, names = stored_layers(4 if spec.shadow else 3, spec.ground)
            targets = arrays_for_writing(path, names)
            for tile, tile_id, block in zip(spec.tiles, spec.tile_ids, self.blocks, strict=True):
                rows, cols = tile.core.slices
                # σ before the cap, as a tile's (pipeline.solve.tile.solve_tile).
                scale = 0.0 if block.empty else anomaly_scale(block.values() - block.L, block.obs)
                layers = block.layers(spec.shadow)
                if not block.empty:
                    _cap_block(layers, block.obs, spec)
                for target, i in zip(targets, written, strict=True):
                    target[:, spec.band_index, rows, cols] = layers[i].astype(
                        np.float32, copy=False
                    )
                block.release()
                fsync_paths(
                    chunk_files(
                        path,
                        names,
                        chunk_range(tile.core.row_off, tile.core.row_end, chunk_rows),
                        [tile.col],  # cube chunks are tile_size wide
                        spec.band_index,
                    )
                )
                record: dict[str, Any] = {
                    "tile_id": tile_id,
                    "row": tile.row,
                    "col": tile.col,
                    "pixels": tile.core.height * tile.core.width,
                    "anomaly_scale": scale,
                }
                if block.empty:
                    record["empty"] = True
                records.append(record)
        except OSError as exc:
            raise storage_error(exc, path) or TileError(
                spec.tile_ids[0], f"writing the cube: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            # The state's arrays (28 MiB each for a 1024² × 7 tile) lived on the heap, which
            # glibc would keep: the mask pass and the products would then stack on the band's
            # whole state (a 2560² worker stayed at 1.80 GiB through them).
            return_free_memory()
        return records


def _cap_block(layers: Sequence[np.ndarray], obs: np.ndarray | None, spec: ShardSpec) -> None:
    """:func:`pipeline.solve.tile.bound_ground` of a block's written layers (ground, cloud,
    haze, …, each ``(dates, rows, cols)``) as ``spec.solver`` says, in place, on the shard's
    threads; ``obs`` the block's (dates, pixels) observed, or None. The median (and the floor's
    quantile) is over every date of the band, a date the block never observed included (its
    extrapolated ground), where a tile's is over the dates it keeps
    (:func:`pipeline.solve.tile.dates_kept`)."""
    if spec.solver is None:
        return
    n = layers[0].shape[0]
    views = [x.reshape(n, -1).T for x in layers]  # (pixels, dates) views
    bound_ground(views, None if obs is None else obs.T, spec.solver, spec.threads)


class DaskShards:
    """:class:`cloudcore.scene.Shards` over Dask actors: a call goes to every actor at once and
    the answers come back in actor order."""

    def __init__(self, actors: Sequence[Any]) -> None:
        self.actors = list(actors)

    def map(self, method: str, *args: Any) -> list[Any]:
        futures = [getattr(a, method)(*args) for a in self.actors]
        return [f.result() for f in futures]


def partition(tiles: Sequence[Tile], parts: int) -> list[list[Tile]]:
    """Split ``tiles`` (in their order) into at most ``parts`` contiguous runs of about equal
    pixel counts; none is empty."""
    sizes = np.array([t.core.height * t.core.width for t in tiles], dtype=np.float64)
    parts = max(1, min(parts, len(tiles)))
    # The shard whose share of the pixels each tile's middle falls in.
    middles = (np.cumsum(sizes) - sizes / 2) / sizes.sum() * parts
    out: list[list[Tile]] = [[] for _ in range(parts)]
    for tile, k in zip(tiles, np.minimum(middles.astype(int), parts - 1), strict=True):
        out[int(k)].append(tile)
    return [p for p in out if p]


@dataclass(frozen=True)
class BandJob:
    """Solving one band in scene scope."""

    grid: TileGrid
    band_index: int
    band: str
    band_id: str  # the band's marker id (RunPlan.blended_id)
    tile_ids: dict[tuple[int, int], str]
    n_dates: int
    layout: Layout
    cube: str
    solver: SolverConfig
    max_dn: float | None = None  # the values' DN scale, if they are DN / max_dn (ShardSpec)
    ground: bool = True  # whether the ground is written (Config.rows_write_ground, ShardSpec)


def dn_scale(acquisitions: Sequence[Any]) -> float | None:
    """The series' one DN scale when every date's values are DN / max_dn (no calibration, one
    ``max_dn``): scene scope then holds D as 16-bit DN (:class:`ShardSpec`); else None.

    Parameters
    ----------
    acquisitions
        The run's :class:`pipeline.inputs.Acquisition` records.
    """
    scales = {float(a.max_dn) for a in acquisitions}
    if len(scales) != 1 or any(a.scale is not None for a in acquisitions):
        return None
    return scales.pop()


def start_shards(
    client: Any,
    input_store: str,
    band_index: int,
    tiles: Sequence[Tile],
    tile_ids: Mapping[tuple[int, int], str],
    dtype: str,
    name: str,
    shadow: bool = False,
    solver: SolverConfig | None = None,
    max_dn: float | None = None,
    ground: bool = True,
) -> list[Any]:
    """One :class:`SceneShard` actor per worker, each loading its :func:`partition` of
    ``tiles`` (ids by (row, col)) of band ``band_index``; returns their futures
    (``.result()`` is the actor; releasing them drops the actors and their state).

    Workers are taken sorted by address: that is the shard order, and so the summation order.
    Each shard runs its kernels with its worker's threads, and bounds its blocks' ground as
    ``solver`` says (:func:`pipeline.solve.tile.bound_ground`; None: not at all); with
    ``max_dn`` it holds D as 16-bit DN where the values are DN / max_dn, and writes the ground
    only with ``ground`` (:class:`ShardSpec`).
    """
    client.wait_for_workers(1)
    workers = sorted(client.nthreads().items())
    token = uuid.uuid4().hex[:8]
    return [
        client.submit(
            SceneShard,
            ShardSpec(
                input_store=input_store,
                band_index=band_index,
                tiles=tuple(part),
                tile_ids=tuple(tile_ids[t.row, t.col] for t in part),
                dtype=dtype,
                threads=threads,
                shadow=shadow,
                solver=solver,
                max_dn=max_dn,
                ground=ground,
            ),
            actor=True,
            workers=[address],
            allow_other_workers=False,
            pure=False,
            key=f"scene-{name}-shard{i}-{token}",
        )
        for i, (part, (address, threads)) in enumerate(
            zip(partition(tiles, len(workers)), workers, strict=False)
        )
    ]


def solve_band(client: Any, job: BandJob) -> dict[str, Any]:
    """Solve one band as one matrix on the cluster, write it into the cube, then its marker.

    Retries the whole band :data:`pipeline.cluster.RETRIES` times on failures that are not the
    user's to fix (a lost worker, a transient I/O error).

    Returns
    -------
    dict
        The marker's record: band, iterations, convergence, λ, seconds, one record per tile.
    """
    for attempt in range(RETRIES + 1):
        try:
            return _solve_band(client, job)
        except (InputError, ConfigError, OutputError):
            raise
        except Exception as exc:
            if attempt == RETRIES:
                raise
            log.warning("band %s: attempt %d failed (%s); retrying", job.band, attempt + 1, exc)
    raise AssertionError("unreachable")


def solve_shards(shards: Any, d: int, n: int, solver: SolverConfig) -> SceneOutcome:
    """One band's matrix (d pixels × n dates, held by ``shards``) solved as ``solver`` asks, by
    :func:`cloudcore.scene.solve_blocks`, without convergence warnings (``warn=False``: the
    diagnostics record convergence)."""
    from cloudcore.scene import solve_blocks

    return solve_blocks(
        shards,
        d=d,
        n=n,
        dtype=solver.dtype,
        method=solver.method,
        lam=solver_lambda(solver, d, n),
        beta=solver.beta,
        tol=solver.tol,
        max_iter=solver.max_iter,
        shadow_weight=solver.shadow_weight,
        warn=False,
        rho=solver.rho,
    )


def _solve_band(client: Any, job: BandJob) -> dict[str, Any]:
    import cloudcore

    started = time.perf_counter()
    grid, solver = job.grid, job.solver
    tiles = list(grid)
    futures = start_shards(
        client,
        str(job.layout.input_store),
        job.band_index,
        tiles,
        job.tile_ids,
        solver.dtype,
        job.band,
        shadow=solver.method in cloudcore.SHADOW_METHODS,
        solver=solver,
        max_dn=job.max_dn,
        ground=job.ground,
    )
    try:
        shards = DaskShards([f.result() for f in futures])
        d = grid.height * grid.width
        loaded = time.perf_counter()
        outcome = solve_shards(shards, d, job.n_dates, solver)
        solved = time.perf_counter()
        timings = shards.map("shard_timing")
        written = shards.map("write", job.cube, grid.cube_chunk_rows)
    finally:
        for f in futures:
            f.release()  # the actors go, and their state with them
    seconds = time.perf_counter() - started
    if not outcome.converged:
        log.warning("band %s: no convergence after %d iterations", job.band, outcome.iterations)
    tiles_records = []
    for record in (r for part in written for r in part):
        share = record.pop("pixels") / d
        tiles_records.append(
            {
                **record,
                "band": job.band,
                "d": d,
                "n": job.n_dates,
                "method": solver.method,
                "lam": outcome.lam,
                "iterations": outcome.iterations,
                "converged": outcome.converged,
                "residual": outcome.residual,
                "seconds": round(seconds * share, 4),  # the tile's share of the band's time
            }
        )
    record = {
        "band": job.band,
        "scope": "scene",
        "shards": len(futures),
        "iterations": outcome.iterations,
        "converged": outcome.converged,
        "residual": outcome.residual,
        "lam": outcome.lam,
        "seconds": round(seconds, 4),
        "load_seconds": round(loaded - started, 4),
        "solve_seconds": round(solved - loaded, 4),
        "seconds_per_iteration": round(outcome.seconds_per_iteration, 6),
        "refit_seconds": round(outcome.refit_seconds, 4),
        "refit_rounds": outcome.refit_rounds,
        # Per shard: seconds inside its calls by phase (setup, step, refit), peak state bytes.
        "compute_seconds": [{k: round(v, 4) for k, v in t["seconds"].items()} for t in timings],
        "state_bytes": [int(t["peak_bytes"]) for t in timings],
        "tiles": tiles_records,
    }
    write_marker(job.layout.marker(job.band_id), record)
    log.info(
        "band %s (scene scope, %d shards): %d iterations, %.3f s each, %s",
        job.band,
        len(futures),
        outcome.iterations,
        outcome.seconds_per_iteration,
        "converged" if outcome.converged else "NOT converged",
    )
    return record
