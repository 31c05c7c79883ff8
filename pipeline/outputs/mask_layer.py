"""The cube's mask and provenance layers, and the observations kept where the sky was clear.

After every band is solved (and blended), one task per tile row, all bands (read one band at
a time: a task holds one band's layers, not all of them). In tile scope these tasks are in the
solve batch, behind every row and seam of every band, so that they start while the last bands'
COGs are written; each reads the tiles' records from the row markers when it starts:

* ``mask`` (time, y, x) uint8 per acquisition: 0 clear, 1 haze, 2 cloud, 3 shadow, 255 no
  data, by :func:`cloudcore.classify` from the bands' cloud and haze layers (brightening) and
  their shadow layer, or without one the residual below the ground (darkening), with each
  band's anomaly scale σ the median of its tiles' (the solve records it per tile: one σ per
  band and scene, so the mask has no seams at tile borders);
* ``provenance`` (time, band, y, x) uint8: 1 where the output is the observation, 0 where it is
  modelled (filled from the low-rank ground), 255 where the output is NaN (no data)
  (:func:`provenance_codes`). Only with ``mask.keep_clear`` does the mask pass write it: the
  ``clear`` layer then takes the observation wherever the mask says clear (or haze, with
  ``mask.keep_haze``) and the band observed the pixel (provenance 1), is no data where the
  band did not observe the pixel, and stays the modelled ground elsewhere (with the offset
  below, the pass writes every entry from the input and the other solved layers: the rows,
  or scene scope's shards, then leave ``clear`` unwritten and the pass reads none of it,
  :func:`pipeline.config.mask.needs_rows_ground`). Otherwise
  ``clear`` is final when the band is blended, and each band's COG task, which reads it
  anyway, writes the band's provenance (:func:`pipeline.outputs.products.write_cogs`): the mask pass
  then reads no ``clear`` (a third of the bytes it read at full size, from a cube that has
  left the page cache by then).

With ``mask.offset`` (and ``keep_clear``) an observed entry that is filled gets the date's
departure from the ground (:mod:`cloudcore.offset`; with ``mask.interpolate`` first the pixel's
own, :mod:`cloudcore.departure`): the band's residual D − L where the mask keeps the
observation, spread by normalised convolution. It is read from the solved layers
(C + N − S), which the pass never writes, not from ``clear``, which it does: a neighbour's task
may already have kept its observations there, and a rerun would add the offset twice. A core's
offset depends on the codes and residuals up to :func:`cloudcore.offset.offset_margin` pixels
beyond it (its *context*), so the core is classified over its context (and the opening's margin
beyond) and its filled values equal those of the whole scene at once (tested).

The mask's opening (an erosion, then a dilation, each ``radius`` pixels wide), its shadow
edges (``edge_reach`` pixels) and its growth (``grow`` pixels) make a core's codes depend on the
scores up to ``MaskRule.context`` pixels beyond it; a task classifies each core
over that margin, so the mask equals the classification of the whole scene at once, with no
seam at core borders (tested; the earlier pass read only ``radius`` pixels around a core, and
the opening at its window's edge could differ from the whole scene's there). A task sweeps its
tile row left to right: it computes each core's per-pixel scores (the bands' mean anomalies,
over the core's columns and the margin above and below) once, and classifies a core once the
scores of the columns to its right are in, so every cube chunk of the row is decoded once for
the scores (a task per core decoded its neighbours' whole 1024-column chunks for a few columns
of them); with ``mask.offset`` each band's residual over a core's context is its core's
columns read again and, beyond them, the edges the scores kept of the same sums.
A task writes only its own cores: cube chunks are never shared between tasks. The pass keeps
no markers: it
is idempotent (the mask depends only on the solved layers and the input, and the observations
it copies are the input's), so a rerun simply does it again; the cube token includes the mask
settings and ``keep_clear`` (:attr:`pipeline.plan.RunPlan.cube_token`), so changing them
re-solves rather than mixing two settings in one cube.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cloudcore.kept import kept_codes
from cloudcore.masks import (
    CLEAR,
    CLOUD,
    NODATA,
    SHADOW,
    MaskRule,
    classify_scores,
    neighbour_scores,
)
from pipeline.config.mask import needs_rows_ground
from pipeline.errors import TileError
from pipeline.grid.tiling import Tile, Window
from pipeline.outputs.kept import (
    context_residual,
    filled_shift,
    keep_observed,
    layer_residual,
)
from pipeline.outputs.mask_scores import (
    Scores,
    columns,
    from_column,
    reads_shade,
    scored_layers,
    scores_over,
)
from pipeline.store.cube import (
    absent_chunks,
    arrays_for_writing,
    chunk_files,
    chunk_range,
    prefetch_files,
    read_ahead,
)
from pipeline.store.durable import fsync_paths, read_markers, storage_error
from pipeline.store.layout import (
    INPUT_OBSERVED,
    INPUT_SEEN,
    MASK,
    PROVENANCE,
    PROVIDER_CLOUD,
    PROVIDER_SHADOW,
)
from pipeline.store.previews import PreviewSpec, keep_mask

__all__ = ["MaskJob", "band_scales", "mask_row", "tile_records"]


@dataclass(frozen=True)
class MaskJob:
    """The mask, provenance and kept observations of one tile row's cores, all bands."""

    tiles: tuple[Tile, ...]  # one tile row, left to right
    task_id: str
    height: int
    width: int
    input_store: str
    cube: str
    layers: tuple[str, ...]  # the solved layers: clear, cloud, haze[, shadow]
    bands: tuple[str, ...]
    records: tuple[str, ...]  # the markers holding the tiles' records, each band's σ from them
    rule: MaskRule
    keep_clear: bool
    preview: PreviewSpec | None = None  # the quicklooks' mask samples (pipeline.store.previews)
    # Whether the haze layer can be non-zero where observed (cloudcore.catalog.writes_haze);
    # if not, the scores read no haze: cloud + 0 gives the same float32 sums, and a fifth of
    # the mask's reads are saved.
    haze: bool = True
    # With keep_clear: keep the observation under haze too (``mask.keep_haze``).
    keep_haze: bool = False
    # With a provider's quality band (``inputs.quality.combine``): "provider", its mask is the
    # mask; "union", ours and theirs both fill; None, no quality band.
    provider: str | None = None
    # None, or the scale in pixels over which each date's departure from the ground is spread
    # from the observations kept into the entries filled with the ground (``mask.offset``,
    # :mod:`cloudcore.offset`); set only with keep_clear (Config.applied_offset).
    offset: float | None = None
    # The band the whiteness test (rule.white > 0) reads as the shortest (RunPlan.short_band).
    short_band: int = 0
    # Each date's nearest dates of other days, before and after (-1: none), which ground that
    # stays reads (rule.persist > 0; RunPlan.date_neighbours); None: no date has one.
    neighbours: tuple[tuple[int, int], ...] | None = None
    # Each date's time (s, UTC) with mask.interpolate (RunPlan.date_times); None: off.
    times: tuple[float, ...] | None = None
    # Whether the scores read the shadow layer, where there is one. Not with
    # solver.shadow_free_fill: its shadow is the fill's ground less the mask's solve's, which
    # the fill's residual D − L takes out and the scores leave alone (the first solve's mask).
    shadow_scored: bool = True

    @property
    def shifts(self) -> bool:
        """Whether a filled entry is shifted off the ground (``mask.offset`` or
        ``mask.interpolate``: :func:`_offset` gives :func:`keep_observed` its shift)."""
        return self.offset is not None or self.times is not None

    @property
    def reads_clear(self) -> bool:
        """Whether the pass reads the band's ``clear`` as the rows wrote it: with ``keep_clear``
        where :func:`~pipeline.config.mask.needs_rows_ground` says it is needed (no shift, or a
        provider's flags)."""
        return self.keep_clear and needs_rows_ground(True, self.shifts, self.provider is not None)

    @property
    def reach(self) -> int:
        """Pixels around a core whose codes and residuals its filled values depend on, and a
        block more for aligning the context with the offset's blocks (:func:`_context`); 0
        without an offset."""
        from cloudcore.offset import OFFSET_BLOCK, offset_margin

        if self.offset is None:
            return 0
        return offset_margin(scale=self.offset) + OFFSET_BLOCK


def tile_records(markers: Iterable[Path]) -> list[dict[str, Any]]:
    """The tiles' records (diagnostics) in those of the ``markers`` that exist."""
    return [tile for marker in read_markers(markers) for tile in marker["tiles"]]


def band_scales(records: Sequence[dict[str, Any]], bands: Sequence[str]) -> tuple[float, ...]:
    """Each band's anomaly scale σ: the median of its non-empty tiles' (0 if none has one)."""
    scales = []
    for band in bands:
        values = [
            float(r["anomaly_scale"])
            for r in records
            if r.get("band") == band and float(r.get("anomaly_scale", 0.0)) > 0
        ]
        scales.append(float(np.median(values)) if values else 0.0)
    return tuple(scales)


def mask_row(job: MaskJob) -> dict[str, Any]:
    """Classify the cores of one tile row, write their mask (and with ``keep_clear`` the kept
    observations and the provenance), durably.

    Runs on a worker. Returns the seconds spent and the count of each class.

    Raises
    ------
    TileError
        Reading or writing the stores failed (the message names the core).
    """
    import zarr

    started = time.perf_counter()
    cube = Path(job.cube)
    counts = np.zeros(256, np.int64)
    tile = job.tiles[0]
    try:
        # Opened once for the task: every core and band reads and writes the same arrays.
        names = (*job.layers, MASK, PROVENANCE) if job.keep_clear else (*scored_layers(job), MASK)
        arrays = dict(zip(names, arrays_for_writing(cube, names), strict=True))
        seen = zarr.open_array(store=job.input_store, path=INPUT_SEEN, mode="r")
        # The observations themselves only where kept or where a shadow dark in every band is
        # looked for: otherwise the scores need only where they are finite.
        observed = None
        if job.keep_clear or reads_shade(job):
            observed = zarr.open_array(store=job.input_store, path=INPUT_OBSERVED, mode="r")
        for tile, context, around, flagged, held in _core_codes(arrays, seen, observed, job):
            codes = _write_core(arrays, seen, observed, job, tile, context, around, flagged, held)
            _fsync_core(arrays, cube, job, tile)
            if job.preview is not None:
                keep_mask(job.preview, tile, codes)
            counts += np.bincount(codes.ravel(), minlength=256)
    except TileError:
        raise  # names its core and what to do (a lost chunk: _prefetch)
    except OSError as exc:
        raise storage_error(exc, cube) or TileError(
            _core_id(tile), f"writing the mask: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise TileError(_core_id(tile), f"the mask: {type(exc).__name__}: {exc}") from exc
    return {
        "task_id": job.task_id,
        "seconds": round(time.perf_counter() - started, 4),
        "classes": {int(k): int(counts[k]) for k in np.flatnonzero(counts)},
    }


def _write_core(
    arrays: Mapping[str, Any],
    seen: Any,
    observed: Any,
    job: MaskJob,
    tile: Tile,
    context: Window,
    around: np.ndarray,
    flagged: np.ndarray | None,
    held: Sequence[Scores] | None,
) -> np.ndarray:
    """Write one core's codes (``around``: over its ``context``) and, with ``keep_clear``, its
    kept observations and provenance, band by band; returns the core's codes. A function of
    its own so that its per-band arrays are freed before the task computes the next core's
    scores."""
    rows, cols = tile.core.slices
    codes = _crop(around, tile.core, context)
    arrays[MASK][:, rows, cols] = codes
    if job.keep_clear:
        assert observed is not None  # opened with keep_clear
        kept = kept_codes(around, job.keep_haze)  # one for every band
        core_kept = _crop(kept, tile.core, context)
        for b in range(len(job.bands)):
            offset = _offset(arrays, seen, job, b, kept, context, tile.core, held)
            provenance = keep_observed(arrays, observed, tile.core, b, core_kept, flagged, offset)
            arrays[PROVENANCE][:, b, rows, cols] = provenance
    return codes


def _core_codes(
    arrays: Mapping[str, Any], seen: Any, observations: Any, job: MaskJob
) -> Iterator[tuple[Tile, Window, np.ndarray, np.ndarray | None, list[Scores] | None]]:
    """Each core of the row, left to right, with its context (the core and :attr:`MaskJob.reach`
    pixels around it, within the scene), the codes over the context, with a provider's
    quality band (``inputs.quality``) where the provider flagged cloud or shadow over the core
    (None without one), and the scores held around the core (:func:`_row_codes`; None when
    none were computed).

    Ours (:func:`_row_codes`) with the provider's cloud and shadow on top (``combine: union``;
    the flags are the same in every band), or with ``combine: provider`` the provider's alone:
    ours are then not computed, since once their clouds are out of the solve the residuals of
    what is left are near 0 and σ collapses (docs/REAL-CLOUDS.md).
    """
    if job.provider == "provider":
        for tile in job.tiles:
            context = _context(tile, job)
            flags = np.asarray(seen[(slice(None), 0, *context.slices)])
            codes = np.where(flags == 0, NODATA, CLEAR).astype(np.uint8)
            yield (
                tile,
                context,
                _with_flags(codes, flags),
                _crop(flags, tile.core, context) > 1,
                None,
            )
        return
    # Read when the task runs, not when it is planned: in tile scope the mask tasks are in the
    # solve batch, behind every row, and those rows write the records.
    scales = band_scales(tile_records(Path(p) for p in job.records), job.bands)
    for tile, context, codes, held in _row_codes(arrays, seen, observations, job, scales):
        if job.provider is None:
            yield tile, context, codes, None, held
            continue
        flags = np.asarray(seen[(slice(None), 0, *context.slices)])
        core_flags = _crop(flags, tile.core, context) > 1
        yield tile, context, _with_flags(codes, flags), core_flags, held


def _context(tile: Tile, job: MaskJob) -> Window:
    """The core and :attr:`MaskJob.reach` pixels around it, within the scene, starting on a
    multiple of the offset's block (its blocks are anchored at the scene's origin: a tile size
    need not be a multiple of the block); the core itself without an offset."""
    from cloudcore.offset import OFFSET_BLOCK

    core, reach = tile.core, job.reach
    if not reach:
        return core
    r0 = max((core.row_off - reach + OFFSET_BLOCK - 1) // OFFSET_BLOCK * OFFSET_BLOCK, 0)
    c0 = max((core.col_off - reach + OFFSET_BLOCK - 1) // OFFSET_BLOCK * OFFSET_BLOCK, 0)
    r1, c1 = min(core.row_end + reach, job.height), min(core.col_end + reach, job.width)
    return Window(r0, c0, r1 - r0, c1 - c0)


def _crop(x: np.ndarray, inner: Window, outer: Window) -> np.ndarray:
    """The (…, rows, cols) ``x`` over ``outer`` cut to ``inner`` (a view; ``x`` itself when they
    are the same)."""
    if inner == outer:
        return x
    rows, cols = inner.relative_to(outer).slices
    return x[..., rows, cols]


def _with_flags(codes: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """``codes`` with the provider's cloud and shadow (``seen`` codes) written over them."""
    codes[flags == PROVIDER_CLOUD] = CLOUD
    codes[flags == PROVIDER_SHADOW] = SHADOW
    return codes


def _core_id(tile: Tile) -> str:
    return f"mask-r{tile.row:02d}c{tile.col:02d}"


def _row_codes(
    arrays: Mapping[str, Any],
    seen: Any,
    observations: Any,
    job: MaskJob,
    scales: Sequence[float],
) -> Iterator[tuple[Tile, Window, np.ndarray, list[Scores]]]:
    """Each core of the row, left to right, with its context (:func:`_context`), the codes
    over it (time, rows, cols) and the scores held (every column of the context is in one).

    A context is classified over its columns and ``rule.context`` more on each side (as far as
    the scene goes: what its opening, shadow edges and growth depend on), from the scores of the
    cores around it, each computed once; only the columns the next core still needs are kept.
    """
    pad = job.rule.context + job.reach
    core = job.tiles[0].core
    r0, r1 = max(core.row_off - pad, 0), min(core.row_end + pad, job.height)
    held: list[Scores] = []  # consecutive columns, left to right
    # By the time the mask runs the cube has mostly left the page cache (at full size the stores
    # outgrow the machine's memory), and a core's reads, one chunk at a time, left the task
    # waiting on the disk: the next core's files are asked for while this one is computed.
    following = read_ahead(job.tiles, lambda t: _prefetch(arrays, seen, job, t, r0, r1))
    for tile in job.tiles:
        c0, c1 = max(tile.core.col_off - pad, 0), min(tile.core.col_end + pad, job.width)
        # Only the columns from this core's left margin on are held while the next core's
        # scores are computed (the core before holds `pad` of its 1024: a mask task's largest
        # moment, about 0.1 GiB less at full size).
        held = [from_column(s, c0) for s in held if s.col_end > c0]
        while not held or held[-1].col_end < c1:
            nxt = next(following)
            window = Window(r0, nxt.core.col_off, r1 - r0, nxt.core.width)
            held.append(scores_over(arrays, seen, observations, job, scales, window))
        codes = _classified(held, c0, c1, job)
        context = _context(tile, job)
        inner = _crop(codes, context, Window(r0, c0, r1 - r0, c1 - c0))
        yield tile, context, np.ascontiguousarray(inner), held


def _classified(held: Sequence[Scores], c0: int, c1: int, job: MaskJob) -> np.ndarray:
    """The codes over scene columns ``[c0, c1)`` of the row's scores ``held``: the scores
    joined over them (a copy where two cores' meet) live only in this call, not while the task
    goes on to the next core's scores."""
    bright, dark, observed, white, flat, shade = columns(held, c0, c1)
    around = None  # no neighbours (a series of one day): ground that stays changes nothing
    if job.rule.persist > 0 and job.neighbours is not None:
        around = neighbour_scores(bright, observed, np.asarray(job.neighbours))
    return classify_scores(bright, dark, observed, job.rule, white, flat, around, shade)


def _prefetch(
    arrays: Mapping[str, Any], seen: Any, job: MaskJob, tile: Tile, r0: int, r1: int
) -> None:
    """Start reading the chunk files ``tile``'s core will read: every band's scored layers
    (:func:`~pipeline.outputs.mask_scores.scored_layers`) and ``seen`` over rows ``[r0, r1)``,
    and with ``keep_clear`` the core's clear values (:attr:`MaskJob.reads_clear`) and
    observations.

    Raises
    ------
    TileError
        A chunk file of the scored layers (or of the clear values it reads) is absent
        (:func:`~pipeline.store.cube.absent_chunks`: the cube lost it after its rows
        finished), which would be read as no data.
    """
    core, cube, source = tile.core, Path(job.cube), Path(job.input_store)
    chunk_rows, chunk_cols = (arrays["cloud"].shards or arrays["cloud"].chunks)[-2:]  # a file each
    cols = chunk_range(core.col_off, core.col_end, chunk_cols)
    scored, rows = scored_layers(job), chunk_range(r0, r1, chunk_rows)
    core_chunk_rows = chunk_range(core.row_off, core.row_end, chunk_rows)
    bands = range(len(job.bands))
    lost = absent_chunks(cube, scored, rows, cols, bands)
    if job.reads_clear:
        lost += absent_chunks(cube, ["clear"], core_chunk_rows, cols, bands)
    if lost:
        raise TileError(
            _core_id(tile),
            f"the cube has lost {len(lost)} chunk file(s) of the solved layers this core's "
            f"mask reads (first: {lost[0].relative_to(cube)}); read as they are, the mask and "
            "the cloud-free values there would be no data. Rerun with --overwrite to solve "
            "the scene again",
        )
    files = chunk_files(cube, scored, rows, cols)
    # The input's chunks (`seen`, read whole: codes are not sharded, create_store) and shards
    # (the observations) are tile-sized: a file per core.
    tile_size = seen.chunks[-1]
    tile_cols = chunk_range(core.col_off, core.col_end, tile_size)
    files += chunk_files(source, [INPUT_SEEN], chunk_range(r0, r1, tile_size), tile_cols)
    if job.reads_clear:  # the core's clear values, no rows beyond it
        files += chunk_files(cube, ["clear"], core_chunk_rows, cols)
    if reads_shade(job):  # the observations over the scores' rows
        files += chunk_files(source, [INPUT_OBSERVED], chunk_range(r0, r1, tile_size), tile_cols)
    elif job.keep_clear:
        core_rows = chunk_range(core.row_off, core.row_end, tile_size)
        files += chunk_files(source, [INPUT_OBSERVED], core_rows, tile_cols)
    prefetch_files(files)


def _offset(
    arrays: Mapping[str, Any],
    seen: Any,
    job: MaskJob,
    band: int,
    kept: np.ndarray,
    context: Window,
    core: Window,
    held: Sequence[Scores] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`~pipeline.outputs.kept.filled_shift` over ``core`` (``kept`` over ``context``),
    or None without ``mask.offset`` and ``mask.interpolate``. With the scores ``held``
    around the core, the context's columns beyond the core come from their edges."""
    if not job.shifts:
        return None
    shadow = "shadow" in job.layers
    if held is None:
        residual = layer_residual(arrays, band, context, haze=job.haze, shadow=shadow)
    else:
        edges = [s.edges for s in held if s.edges is not None]
        residual = context_residual(
            arrays, band, context, core, edges, haze=job.haze, shadow=shadow
        )
    evidence = kept & (np.asarray(seen[(slice(None), band, *context.slices)]) == 1)
    residual, shift = filled_shift(residual, evidence, scale=job.offset, times=job.times)
    return np.ascontiguousarray(_crop(residual, core, context)), _crop(shift, core, context)


def _fsync_core(arrays: Mapping[str, Any], cube: Path, job: MaskJob, tile: Tile) -> None:
    """fsync the chunks of this core in ``mask`` and (kept observations) ``provenance`` and
    ``clear``; cores are whole chunks, and the three share their spatial chunking."""
    chunks = arrays[MASK].chunks
    rows = chunk_range(tile.core.row_off, tile.core.row_end, chunks[-2])
    cols = chunk_range(tile.core.col_off, tile.core.col_end, chunks[-1])
    fsync_paths(chunk_files(cube, [MASK], rows, cols, per_band=False))
    if job.keep_clear:
        fsync_paths(chunk_files(cube, [PROVENANCE, "clear"], rows, cols))
