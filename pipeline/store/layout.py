"""The output folder's layout: where every product, marker and scratch store of a run lives.

Layout of ``output.path``::

    cube.zarr/            clear, cloud, haze [, shadow] (time, band, y, x) float32, provenance
                          (time, band, y, x) uint8, mask (time, y, x) uint8 + CRS; group
                          diagnostics/
    diagnostics.csv       one row per (band, tile): iterations, converged, residual, λ, seconds
    cog/<time>_<band>.tif     Cloud-Optimised GeoTIFF of the clear ground per date and band
    cog/<time>_mask.tif       the cloud/haze/shadow mask per acquisition (uint8)
    quicklooks/YYYYMMDD.png   before | after per date
    COMPLETE.json         written last: the run that produced everything above, and when
    work/                 input.zarr (observed (time, band, y, x) float32 and seen uint8),
                          strips/ (solved rows shared by two tile rows, until blended),
                          previews/ (the quicklooks' samples, from the stage, COG and mask
                          tasks to the quicklooks), done/ (markers), run.json (the ids of the
                          current run, for ``status``); resumable. A finished run keeps it,
                          so that a rerun with the same settings only rewrites the products;
                          delete it once the products are what you want.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cloudcore.catalog import LAYERS, SHADOW_LAYER

__all__ = [
    "INPUT_OBSERVED",
    "INPUT_SEEN",
    "MASK",
    "PROVENANCE",
    "STAGED",
    "Layout",
    "solved_layers",
    "stored_layers",
]

#: Solver outputs in the order they are stacked in solved blocks and strips: clipped ground,
#: cloud, haze, and with the shadow model (``solver.method: aatm-shadow``) or the refinement
#: (``solver.refine``) shadow. Which a run writes: :func:`cloudcore.catalog.layers`.
_ALL_SOLVED = (*LAYERS, SHADOW_LAYER)
#: The per-acquisition mask (time, y, x) uint8 and the per-band provenance (time, band, y, x)
#: uint8 of the cube (pipeline.outputs.mask_layer).
MASK, PROVENANCE = "mask", "provenance"
#: The staged input (``work/input.zarr``): the observations, (time, band, y, x) float32, NaN
#: where a date did not observe a pixel; and where it did, (time, band, y, x) uint8 1 or 0. The
#: mask pass needs only the second: a byte a value, compressed to almost nothing, where the
#: observations are four bytes of noise, 30 % of all the bytes the mask pass read at full size.
#: With a provider's quality band (``inputs.quality``), ``seen`` is :data:`PROVIDER_CLOUD` or
#: :data:`PROVIDER_SHADOW` where the provider flags an observed pixel; the observation there
#: is NaN, so that the solve leaves it out.
INPUT_OBSERVED, INPUT_SEEN = "observed", "seen"
PROVIDER_CLOUD, PROVIDER_SHADOW = 2, 3
#: What staging writes (part of the stage tasks' ids: a store staged without ``seen`` is
#: staged again), besides the observations' quicklook samples (pipeline.store.previews).
STAGED = (INPUT_OBSERVED, INPUT_SEEN)


def solved_layers(count: int) -> tuple[str, ...]:
    """The names of the first ``count`` solved layers (a block or strip of ``count`` layers)."""
    return _ALL_SOLVED[:count]


def stored_layers(count: int, ground: bool) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Which of a block's ``count`` solved layers the solve writes into the cube: their indices
    in the block and their names; all of them, or without ``ground`` all but the ground
    (``clear``), which the mask pass then writes
    (:attr:`pipeline.config.Config.rows_write_ground`)."""
    names = solved_layers(count)
    kept = tuple(k for k, name in enumerate(names) if ground or name != "clear")
    return kept, tuple(names[k] for k in kept)


@dataclass(frozen=True)
class Layout:
    """Paths of everything under one output directory."""

    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def input_store(self) -> Path:
        return self.work / "input.zarr"

    @property
    def strips(self) -> Path:
        return self.work / "strips"

    @property
    def done(self) -> Path:
        return self.work / "done"

    @property
    def previews(self) -> Path:
        return self.work / "previews"

    @property
    def products(self) -> Path:
        return self.work / "products"

    @property
    def extract(self) -> Path:
        return self.work / "extract"

    @property
    def cube(self) -> Path:
        return self.root / "cube.zarr"

    @property
    def cube_partial(self) -> Path:
        return self.partial(self.cube)

    @property
    def cog_dir(self) -> Path:
        return self.root / "cog"

    @property
    def quicklook_dir(self) -> Path:
        return self.root / "quicklooks"

    @property
    def diagnostics_csv(self) -> Path:
        return self.root / "diagnostics.csv"

    @property
    def complete(self) -> Path:
        """Written last, after every product is published; removed before any is replaced."""
        return self.root / "COMPLETE.json"

    @property
    def run_record(self) -> Path:
        """The tile ids of the current run (read by ``python -m pipeline status``)."""
        return self.work / "run.json"

    def partial(self, final: Path) -> Path:
        """The temporary name a final product is built under before it is published."""
        return final.with_name(f"{final.name}.partial")

    def strip(self, strip_id: str) -> Path:
        """Rows of one solved tile row that the next or previous tile row also covers."""
        return self.strips / f"{strip_id}.zarr"

    def marker(self, work_id: str) -> Path:
        """Completion marker of one task's work (a staged tile, a row, a seam, a blended band),
        written only after its data."""
        return self.done / f"{work_id}.json"

    def markers(self, prefix: str = "") -> list[Path]:
        """The completion markers whose id starts with ``prefix`` (none before a run made any)."""
        return list(self.done.glob(f"{prefix}*.json"))

    def marker_ids(self) -> set[str]:
        """Ids of every completion marker."""
        return {p.stem for p in self.markers()}
