"""One decomposition per (band, tile), solved on the tile's halo.

:func:`solve_tile` reads the halo of all dates of one band from ``input.zarr``, solves
D = L + C + N with :func:`cloudcore.decompose` and returns the halo-shaped clear/cloud/haze
stack with the tile's diagnostics. It writes nothing: the row task of :mod:`pipeline.solve.rows`
blends each tile with its neighbours in memory and writes the result.

A tile with no valid data on any date (outside every footprint, e.g. ``grid.bounds`` wider
than the inputs) is not an error: its stack is all NaN and its record says ``"empty": true``;
the cube holds NaN there and the COGs nodata.

No invented pixels (issue #14): a date observed on fewer than :data:`MIN_DATE_FRACTION` of the
tile's pixels (those observed on some date) is left out of the tile's matrix, and its output
over the tile's halo is NaN; the record lists it (``dates_left_out``, indices into the series)
and the run reports it. Nothing in the matrix would pin such a date's column: the fill the
solver gives it is a guess, and the refit of :mod:`cloudcore.refit` needs observed pixels to
fit on. If fewer than 2 dates remain, every date of the tile is left out (NaN).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cloudcore import catalog
from pipeline.cluster.usage import CpuUsage
from pipeline.config import SolverConfig
from pipeline.config.solver import FILL_SOLVE
from pipeline.errors import TileError
from pipeline.grid.tiling import Tile
from pipeline.store.layout import Layout

if TYPE_CHECKING:
    from cloudcore import Decomposition

__all__ = [
    "MIN_DATE_FRACTION",
    "SolveJob",
    "bound_ground",
    "dates_kept",
    "resolve_lambda",
    "shadow_free_fill",
    "solve_matrix",
    "solve_tile",
    "solver_lambda",
    "tile_layers",
    "tile_matrix",
    "written_layers",
]

log = logging.getLogger(__name__)

#: The least share of a tile's pixels (those observed on at least one date) that a date must
#: be observed on to stay in the tile's matrix: 30 %. Measured by
#: ``benchmarks/footprints.py sweep`` (768² tiles of tyrol-w1, 7 dates, 3 seeds;
#: docs/FOOTPRINTS.md): the refitted fill of the unseen part of a date observed on a share f of
#: the tile was within 5 % of the truth's mean at f = 0.33 and 0.5, off by up to 7 % at
#: f = 0.2, 9 % at 0.1 and 13 % at 0.02 (the ALM alone gives 1.4·f of it: 46 % at f = 0.33).
MIN_DATE_FRACTION = 0.3


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


def resolve_lambda(rule: str | float, d: int, n: int) -> float:
    """λ for a d × n tile matrix: ``"auto"`` = 1/√d, ``"star"`` = λ̂*(d, n), or the number given.

    d is the number of pixels of the halo (no-data pixels included), not of the scene
    (docs/CONVENTIONS.md §3).
    """
    import cloudcore

    if rule == "auto":
        return float(cloudcore.lambda_default(d))
    if rule == "star":
        return float(cloudcore.lambda_star(d, n))
    return float(rule)


def solver_lambda(solver: SolverConfig, d: int, n: int) -> float:
    """λ of ``solver`` for a d × n matrix: ``solver.lam_scale`` × the ``solver.lam`` rule's
    (:func:`resolve_lambda`), or ``solver.lam`` when it is a number."""
    rule = resolve_lambda(solver.lam, d, n)
    return rule if not isinstance(solver.lam, str) else solver.lam_scale * rule


def dates_kept(mask: np.ndarray) -> np.ndarray:
    """Indices of the dates (columns of the (pixels, dates) ``mask``) that stay in a tile's
    matrix: those observed on at least :data:`MIN_DATE_FRACTION` of the pixels observed on some
    date; none if fewer than 2 would stay; all when no pixel is observed (an empty tile)."""
    seen = int(mask.any(axis=1).sum())
    if seen == 0:
        kept = np.arange(mask.shape[1])
    else:
        kept = np.flatnonzero(mask.sum(axis=0) / seen >= MIN_DATE_FRACTION)
    return kept if kept.size >= 2 else kept[:0]


def tile_matrix(stack: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The matrix of one (band, tile): D (pixels × dates kept, in ``dtype``), its mask of
    observed entries, and the indices of the dates kept (:func:`dates_kept`).

    ``stack`` is the (dates, rows, cols) halo, NaN where not observed. Row = pixel (C order over
    the halo), column = date: D is a transposed view of the C-ordered (dates, pixels) stack,
    since :func:`cloudcore.decompose` works dates × pixels internally (no transposing copies).
    """
    n = stack.shape[0]
    flat = stack.reshape(n, -1)
    mask = np.isfinite(flat).T
    kept = dates_kept(mask)
    if 0 < kept.size < n:
        flat, mask = flat[kept], mask[:, kept]
    return flat.astype(dtype, copy=False).T, mask, kept


def solve_matrix(
    D: np.ndarray,
    mask: np.ndarray,
    solver: SolverConfig,
    image_shape: tuple[int, int],
    lam: float,
    threads: int,
) -> Decomposition:
    """The tile's decomposition as ``solver`` asks: :func:`cloudcore.decompose`, then
    :func:`refine_matrix` when it refines (``solver.refines``); without convergence warnings
    (``warn=False``: the diagnostics record convergence per tile, and silencing the warnings
    with ``warnings.catch_warnings`` races the worker's other threads). Returns the
    :class:`cloudcore.Decomposition`; the solver's ``ValueError`` passes through."""
    import cloudcore

    result = cloudcore.decompose(
        D,
        solver.method,
        lam=lam,
        beta=solver.beta,
        tol=solver.tol,
        max_iter=solver.max_iter,
        mask=mask,  # an all-True mask is solved as unmasked by cloudcore itself
        threads=threads,
        shadow_weight=solver.shadow_weight,
        warn=False,
        rho=solver.rho,
    )
    if not solver.refines:
        return result
    first = _ground_only(result)
    del result  # the first solve's C and N go before the re-solve
    return refine_matrix(D, mask, first, solver, image_shape, threads)


def refine_matrix(
    D: np.ndarray,
    mask: np.ndarray,
    first: Decomposition,
    solver: SolverConfig,
    image_shape: tuple[int, int],
    threads: int,
) -> Decomposition:
    """:func:`cloudcore.refine` of the first decomposition ``first`` of ``D`` with ``solver``'s
    tolerance and iterations, without convergence warnings (as :func:`solve_matrix`)."""
    import cloudcore

    return cloudcore.refine(
        D,
        first,
        image_shape,
        mask=mask,
        tol=solver.tol,
        max_iter=solver.max_iter,
        threads=threads,
        warn=False,
        rho=solver.rho,
    )


def _ground_only(result: Decomposition) -> Decomposition:
    """``result`` without its C, N and S (empty), for :func:`cloudcore.refine`, which reads
    only the first solve's L and its record: the re-solve is a tile's memory peak, and the
    first solve's C and N held through it cost 88 MiB of a 1280² × 7 float32 tile's (a full-size
    row task peaked at 1.40 instead of 1.49 GiB RSS)."""
    import dataclasses

    empty = np.empty((0, 0), result.L.dtype)
    return dataclasses.replace(result, C=empty, N=empty, S=None)


def tile_layers(
    result: Decomposition, mask: np.ndarray, solver: SolverConfig, threads: int
) -> list[np.ndarray]:
    """The layers a tile writes from its decomposition, in ``catalog.LAYERS`` order: the ground
    (L clipped to [0, 1], docs/CONVENTIONS.md §2, in L's own memory), C, N and the shadow
    model's S, the ground bounded as ``solver`` says (:func:`bound_ground`, on ``threads``), in
    place.

    Read the anomaly scale (:func:`cloudcore.anomaly.result_scale`) before: the cap moves a
    ground above its median date into C.
    """
    layers = [result.ground_in_place(), result.C, result.N]
    if result.S is not None:
        layers.append(result.S)
    # (d, n) views of the dates × pixels arrays: bounded where they are.
    bound_ground(layers, mask, solver, threads)
    return layers


def written_layers(
    result: Decomposition, D: np.ndarray, mask: np.ndarray, solver: SolverConfig, threads: int
) -> tuple[list[np.ndarray], Decomposition | None]:
    """What a tile writes from its decomposition ``result`` of ``D``: :func:`tile_layers`, and
    with ``solver.shadow_free_fill`` the second solve's ground and shadow layer
    (:func:`shadow_free_fill`). Returns the layers and the second solve (its layers emptied;
    None without one). Used by :func:`solve_tile`, the workers' warm-up and the benchmarks'
    bare solves, so that all of them do what a tile does; read the anomaly scale before.
    """
    layers = tile_layers(result, mask, solver, threads)
    fill = shadow_free_fill(D, mask, layers, solver, threads) if solver.shadow_free_fill else None
    return layers, fill


def shadow_free_fill(
    D: np.ndarray, mask: np.ndarray, solved: list[np.ndarray], solver: SolverConfig, threads: int
) -> Decomposition:
    """``solver.shadow_free_fill`` on a tile's layers ``solved`` (clear, cloud, haze of the
    first solve, bounded, ``(pixels, dates)``), in place: the clear layer becomes the capped
    ground of the second solve (:data:`FILL_SOLVE`) and a shadow layer is appended, that ground
    less the one the first solve's layers imply (D − C − N where observed, its ground
    elsewhere), so that D = clear + cloud + haze − shadow where observed. The mask pass scores
    the first solve's cloud and haze as ever and fills from D − (C + N − S): the second solve's
    ground, the pixel's departure from it and the date's offset. Returns the second solve's
    result, its layers emptied (its iterations and convergence for the tile's record).
    """
    # The first ground becomes the ground its layers imply where observed, in its own memory
    # (no third ground held through the second solve); elsewhere it stays the first ground.
    implied, cloud, haze = solved[:3]
    np.subtract(D, cloud, out=implied, where=mask)
    np.subtract(implied, haze, out=implied, where=mask)
    fill_solver = solver.model_copy(update={**FILL_SOLVE, "shadow_free_fill": False})
    lam = solver_lambda(fill_solver, D.shape[0], max(D.shape[1], 2))
    # Not refined (checked by the configuration), so the halo's shape is not needed.
    fill = solve_matrix(D, mask, fill_solver, (0, 0), lam, threads)
    ground = tile_layers(fill, mask, fill_solver, threads)[0]
    np.subtract(ground, implied, out=implied)
    solved[0] = ground
    solved.append(implied)
    return _ground_only(fill)  # its cloud, haze and shadow go


def bound_ground(
    layers: list[np.ndarray], observed: np.ndarray | None, solver: SolverConfig, threads: int
) -> None:
    """With ``solver.caps_ground``, the ground (``layers[0]``) capped at each pixel's median
    date, the excess added to C (``layers[1]``), and with ``solver.ground_floor`` raised to
    that quantile of its dates, the deficit taken from N (``layers[2]``: aATM's haze, which the
    mask adds to C) or else from C, where ``observed`` (:func:`cloudcore.cap_ground`); in
    place. The layers are ``(pixels, dates)``: tile scope's decomposition and scene scope's
    written blocks are bounded by this one function."""
    if not solver.caps_ground:
        return
    from cloudcore.cap import cap_ground

    ground, cloud, haze = layers[:3]
    below = haze if catalog.writes_haze(solver.method) else cloud
    cap_ground(ground, cloud, observed, threads=threads, floor=solver.ground_floor, below=below)


def solve_tile(job: SolveJob) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Solve one (band, tile) on its halo.

    Returns
    -------
    layers : list of numpy.ndarray
        One writable (time, halo rows, halo cols) float32 array per solved layer, in
        :func:`pipeline.store.layout.components` order (views of the solver's results, no copies,
        unless a date was left out: then NaN for it).
    record : dict
        The tile's diagnostics (iterations, converged, residual, λ, seconds of reading and
        solving, the indices of the dates left out, and the tile's anomaly scale σ of
        :func:`cloudcore.anomaly.result_scale`, from which the run's mask takes the band's).

    Raises
    ------
    TileError
        The solver rejected the tile (e.g. fewer than 2 observed dates) or reading failed.
    """
    import zarr

    from cloudcore.anomaly import result_scale

    halo = job.tile.halo
    rows, cols = halo.slices
    read_started = time.perf_counter()
    try:
        source = zarr.open_array(store=str(job.layout.input_store), path="observed", mode="r")
        stack = np.asarray(source[:, job.band_index, rows, cols])  # (n, h, w)
    except Exception as exc:
        raise TileError(job.tile_id, f"reading input.zarr: {type(exc).__name__}: {exc}") from exc
    read_seconds = time.perf_counter() - read_started
    n = stack.shape[0]
    d = halo.height * halo.width
    D, mask, kept = tile_matrix(stack, job.solver.dtype)
    left_out = [int(t) for t in np.setdiff1d(np.arange(n), kept)]
    lam = solver_lambda(job.solver, d, max(kept.size, 2))
    record: dict[str, Any] = {
        "tile_id": job.tile_id,
        "band": job.band,
        "row": job.tile.row,
        "col": job.tile.col,
        "d": d,
        "n": n,
        "method": job.solver.method
        + ("+refine" if job.solver.refines else "")
        + ("+shadow-free-fill" if job.solver.shadow_free_fill else ""),
        "lam": lam,
        "dates_left_out": left_out,
    }
    started, usage = time.perf_counter(), CpuUsage.of_thread()
    frames = (n, halo.height, halo.width)
    count = len(job.solver.layers)
    if kept.size == 0:  # fewer than 2 dates pinned: nothing to solve, nothing to write
        layers = [np.full(frames, np.nan, np.float32) for _ in range(count)]
        record.update(iterations=0, converged=True, residual=0.0, anomaly_scale=0.0)
        record.update(read_seconds=round(read_seconds, 4), seconds=0.0, **CpuUsage().as_record())
        return layers, record
    try:
        result = solve_matrix(D, mask, job.solver, (halo.height, halo.width), lam, job.threads)
        # σ is the scatter of the clear entries about the low-rank fit: read before the cap,
        # which moves a ground above its median date into C (it would count as brightening).
        scale = result_scale(result, mask)
        # The (d, n) results are transposed views of cloudcore's dates × pixels arrays, so
        # .T.reshape is free and nothing is copied (blending works on them in place). A tile
        # outside every footprint is all NaN.
        solved, fill = written_layers(result, D, mask, job.solver, job.threads)
    except ValueError as exc:
        raise TileError(job.tile_id, f"solver rejected the tile: {exc}") from exc
    iterations, converged = int(result.iterations), bool(result.converged)
    if job.solver.refines:
        record["refine_lam"] = float(result.lam)
    if fill is not None:
        record.update(fill_iterations=int(fill.iterations), fill_converged=bool(fill.converged))
        converged = converged and bool(fill.converged)
    if kept.size == n:  # a copy only if not float32/writable
        layers = [np.require(x.T.reshape(frames), np.float32, ["W"]) for x in solved]
    else:  # dates left out are NaN
        layers = []
        for x in solved:
            full = np.full(frames, np.nan, np.float32)
            full[kept] = x.T.reshape((kept.size, halo.height, halo.width))
            layers.append(full)
    record.update(
        iterations=iterations,
        converged=converged,
        residual=float(result.residual),
        anomaly_scale=scale,
        read_seconds=round(read_seconds, 4),
        seconds=round(time.perf_counter() - started, 4),
        # The solving thread's CPU time (numba runs the kernels in it at threads=1): on a
        # shared machine it tells the solver's own cost from the time other processes took.
        # Its kernel part, page faults and preemptions tell why it differs from a bare solve's.
        **(CpuUsage.of_thread() - usage).as_record(),
    )
    if not mask.any():
        record["empty"] = True  # reported once for all such tiles by the run
    elif not converged:
        second = record.get("fill_iterations")
        also = "" if second is None else f" (the shadow-free fill's solve: {second})"
        log.warning("tile %s: no convergence after %d iterations%s", job.tile_id, iterations, also)
    return layers, record
