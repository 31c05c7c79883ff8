"""The cube's mask and provenance layers, and the observations kept where the sky was clear.

After every band is solved (and blended), one task per tile core, all bands (read one band at
a time: a task holds one band's layers, not all of them):

* ``mask`` (time, y, x) uint8 per acquisition: 0 clear, 1 haze, 2 cloud, 3 shadow (shadow
  model only), 255 no data, by :func:`cloudcore.classify` from the bands' cloud, haze (and
  shadow) layers, with each band's anomaly scale σ the median of its tiles' (the solve records
  it per tile: one σ per band and scene, so the mask has no seams at tile borders);
* ``provenance`` (time, band, y, x) uint8: 1 where the output is the observation, 0 where it is
  modelled (filled from the low-rank ground), 255 where the output is NaN (no data);
* with ``output.keep_clear`` the ``clear`` layer takes the observation wherever the mask says
  clear and the band observed the pixel (provenance 1); elsewhere it stays the modelled ground.

A task reads its core plus ``radius`` pixels around it (the mask's opening looks that far) and
writes only its core: cube chunks are never shared between tasks. The pass keeps no markers: it
is idempotent (the mask depends only on the solved layers and the input, and the observations
it copies are the input's), so a rerun simply does it again; the cube token includes the mask
settings and ``keep_clear`` (:attr:`pipeline.plan.RunPlan.cube_token`), so changing them
re-solves rather than mixing two settings in one cube.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cloudcore.masks import CLEAR, NODATA, MaskRule
from pipeline.errors import TileError
from pipeline.previews import PreviewSpec, Samples
from pipeline.store.durable import fsync_paths, storage_error
from pipeline.store.layout import MASK, PROVENANCE
from pipeline.tiling import Tile, Window

__all__ = ["FILLED", "OBSERVED", "MaskJob", "band_scales", "mask_tile"]

#: Provenance codes: the output is the observation / is modelled (no data is 255).
OBSERVED, FILLED = 1, 0


@dataclass(frozen=True)
class MaskJob:
    """The mask, provenance and kept observations of one tile core, all bands."""

    tile: Tile
    tile_id: str
    height: int
    width: int
    input_store: str
    cube: str
    layers: tuple[str, ...]  # the solved layers: clear, cloud, haze[, shadow]
    scales: tuple[float, ...]  # σ per band
    rule: MaskRule
    keep_clear: bool
    preview: PreviewSpec | None = None  # the quicklooks' samples to keep (pipeline.previews)


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


def mask_tile(job: MaskJob) -> dict[str, Any]:
    """Classify one core, write its mask and provenance (and kept observations), durably.

    Runs on a worker. Returns the seconds spent and the share of each class.

    Raises
    ------
    TileError
        Reading or writing the stores failed.
    """
    import zarr

    started = time.perf_counter()
    core = job.tile.core
    pad = job.rule.radius
    r0, r1 = max(core.row_off - pad, 0), min(core.row_end + pad, job.height)
    c0, c1 = max(core.col_off - pad, 0), min(core.col_end + pad, job.width)
    inner = (
        slice(core.row_off - r0, core.row_end - r0),
        slice(core.col_off - c0, core.col_end - c0),
    )
    cube = Path(job.cube)
    try:
        group: Any = zarr.open_group(store=str(cube), mode="r+")
        source = zarr.open_array(store=job.input_store, path="observed", mode="r")
        samples = Samples(job.preview, job.tile) if job.preview else None
        window = Window(r0, c0, r1 - r0, c1 - c0)
        codes = _codes(group, source, job, window, samples)[(slice(None), *inner)]
        rows, cols = core.slices
        group[MASK][:, rows, cols] = codes
        for b in range(len(job.scales)):
            provenance = _provenance(group, source, job, b, codes, samples)
            group[PROVENANCE][:, b, rows, cols] = provenance
        fsync_paths(_chunk_files(cube, job))
        if samples is not None:
            samples.save(codes)
    except OSError as exc:
        raise storage_error(exc, cube) or TileError(
            job.tile_id, f"writing the mask: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise TileError(job.tile_id, f"the mask: {type(exc).__name__}: {exc}") from exc
    counts = np.bincount(codes.ravel(), minlength=256)
    return {
        "tile_id": job.tile_id,
        "seconds": round(time.perf_counter() - started, 4),
        "classes": {int(k): int(counts[k]) for k in np.flatnonzero(counts)},
    }


def _codes(
    group: Any, source: Any, job: MaskJob, window: Window, samples: Samples | None
) -> np.ndarray:
    """:func:`cloudcore.classify` over ``window`` (time, rows, cols), one band at a time: each
    band's C + N and S, NaN where the band did not observe the pixel (the solver's C, N, S are 0
    there, not evidence), are added to the bands' means (:class:`cloudcore.masks.BandMean`), so
    the task holds one band's layers at once. ``samples`` keeps the quicklooks' observations."""
    from cloudcore.masks import BandMean, classify_scores

    rows, cols = window.slices
    shape = (source.shape[0], window.height, window.width)
    bright = BandMean(shape)
    dark = BandMean(shape) if "shadow" in job.layers else None
    observed = np.zeros(shape, dtype=bool)  # in some band
    for b, sigma in enumerate(job.scales):
        observation = np.asarray(source[:, b, rows, cols])
        if samples is not None:
            samples.take("observed", b, observation, window)
        unseen = ~np.isfinite(observation)
        observed |= ~unseen
        anomaly = np.asarray(group["cloud"][:, b, rows, cols])
        anomaly += np.asarray(group["haze"][:, b, rows, cols])
        anomaly[unseen] = np.nan
        bright.add(anomaly, sigma)
        if dark is not None:
            shadow = np.asarray(group["shadow"][:, b, rows, cols])
            shadow[unseen] = np.nan
            dark.add(shadow, sigma)
    return classify_scores(bright.mean(), dark.mean() if dark else None, observed, job.rule)


def _provenance(
    group: Any,
    source: Any,
    job: MaskJob,
    band: int,
    codes: np.ndarray,
    samples: Samples | None,
) -> np.ndarray:
    """One band's provenance over the core (time, rows, cols); with ``keep_clear`` it also
    writes the observations kept into the band's ``clear``. ``samples`` keeps the quicklooks'
    clear values (as written)."""
    from cloudcore.masks import keep_clear

    rows, cols = job.tile.core.slices
    clear = np.asarray(group["clear"][:, band, rows, cols])
    provenance = np.full(clear.shape, FILLED, dtype=np.uint8)
    if job.keep_clear:
        # Read again rather than kept from _codes: keeping every band's observations would
        # undo the one-band-at-a-time memory bound (and keep_clear is off by default).
        observation = np.asarray(source[:, band, rows, cols])
        clear, kept = keep_clear(clear, observation, codes == CLEAR)
        group["clear"][:, band, rows, cols] = clear
        provenance[kept] = OBSERVED
    if samples is not None:
        samples.take("clear", band, clear, job.tile.core)
    provenance[~np.isfinite(clear)] = NODATA
    return provenance


def _chunk_files(cube: Path, job: MaskJob) -> list[Path]:
    """The chunk files of this core in ``mask``, ``provenance`` and (kept observations)
    ``clear``: keys ``<name>/c/0/[<band>/]<chunk row>/<chunk col>``; cores are whole chunks."""
    import json

    names = [MASK, PROVENANCE] + (["clear"] if job.keep_clear else [])
    core = job.tile.core
    files: list[Path] = []
    for name in names:
        meta = json.loads((cube / name / "zarr.json").read_text())
        chunk = meta["chunk_grid"]["configuration"]["chunk_shape"]
        rows, cols = int(chunk[-2]), int(chunk[-1])
        bands = "*/" if len(chunk) == 4 else ""
        for r in range(core.row_off // rows, -(-core.row_end // rows)):
            for c in range(core.col_off // cols, -(-core.col_end // cols)):
                files += cube.glob(f"{name}/c/0/{bands}{r}/{c}")
    return files
