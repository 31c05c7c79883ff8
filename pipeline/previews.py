"""Quicklook samples kept by the stage and mask tasks, so that no quicklook decodes a store.

A date's quicklook shows every ``step``-th pixel (``step`` = longest side / quicklook size,
rounded up) of the observed image, of the mask and of the clear image. Read from the stores,
those samples cost a decode of every chunk of three bands of the input and of the cube (their
chunks hold whole tiles): the slowest product task at full size. The tasks that hold those
layers anyway keep the pixels of their core whose row and column are multiples of ``step`` and
save them in ``work/previews/``, one ``.npy`` per layer (:data:`SAMPLE_LAYERS`), dates first:
the stage task of each tile its observations (:func:`save_observed`), the mask task of each
core its clear values and mask codes (:class:`Samples`). :func:`assemble` puts the cores'
samples together. The result is the strided read, value for value. Each date's quicklook is a
task of its own and maps the files, so it reads its own date's samples only.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.store.durable import atomic_write
from pipeline.tiling import Tile, Window

__all__ = [
    "SAMPLE_LAYERS",
    "PreviewSpec",
    "Samples",
    "assemble",
    "preview_step",
    "save_observed",
    "save_samples",
]

#: The layers of a core's samples, a file each: (time, rows, cols, bands) float32 ``observed``
#: and ``clear``, (time, rows, cols) uint8 ``mask``.
SAMPLE_LAYERS = ("observed", "clear", "mask")


def preview_step(height: int, width: int, size: int) -> int:
    """The stride that brings the longer side of a ``height`` × ``width`` grid to ≤ ``size``."""
    return max(1, -(-max(height, width) // size))


@dataclass(frozen=True)
class PreviewSpec:
    """What the mask task of one core keeps for the quicklooks."""

    bands: tuple[int, ...]  # band indices: red, green, blue (or one grey band)
    step: int
    folder: str  # work/previews of the run

    def path(self, tile: Tile, layer: str) -> Path:
        """The samples file of ``layer`` (one of :data:`SAMPLE_LAYERS`) of ``tile``'s core."""
        return Path(self.folder) / f"r{tile.row:03d}c{tile.col:03d}-{layer}.npy"

    def offsets(self, core: Window, window: Window) -> tuple[slice, slice]:
        """The sampled pixels of ``core`` (row and column multiples of :attr:`step`), as
        slices of an array over ``window`` (which contains the core)."""
        first_row = -(-core.row_off // self.step) * self.step
        first_col = -(-core.col_off // self.step) * self.step
        return (
            slice(first_row - window.row_off, core.row_end - window.row_off, self.step),
            slice(first_col - window.col_off, core.col_end - window.col_off, self.step),
        )


class Samples:
    """The clear samples of one core, filled band by band by the mask task, saved with its
    mask codes (the observations' samples are the stage task's, :func:`save_observed`).

    Parameters
    ----------
    spec
        What to keep.
    tile
        The tile whose core is sampled.
    """

    def __init__(self, spec: PreviewSpec, tile: Tile) -> None:
        self.spec, self.tile = spec, tile
        self.clear: dict[int, np.ndarray] = {}

    def take(self, band: int, values: np.ndarray, window: Window) -> None:
        """Keep the clear ``values`` (time, rows, cols over ``window``) of ``band`` if it is a
        preview band."""
        if band in self.spec.bands:
            rows, cols = self.spec.offsets(self.tile.core, window)
            self.clear[band] = np.array(values[:, rows, cols], dtype=np.float32)

    def save(self, codes: np.ndarray) -> None:
        """Write the clear samples with the core's mask ``codes`` (time, rows, cols over the
        core)."""
        rows, cols = self.spec.offsets(self.tile.core, self.tile.core)
        layers = {
            "clear": np.stack([self.clear[b] for b in self.spec.bands], axis=-1),
            "mask": np.ascontiguousarray(codes[:, rows, cols]),
        }
        save_samples(self.spec, self.tile, layers)


def save_observed(spec: PreviewSpec, tile: Tile, observed: np.ndarray) -> None:
    """Write the samples of ``tile``'s core observations, ``observed`` (time, band, rows, cols
    over the core), as the stage task holds them."""
    rows, cols = spec.offsets(tile.core, tile.core)
    samples = np.stack([observed[:, b, rows, cols] for b in spec.bands], axis=-1)
    save_samples(spec, tile, {"observed": samples.astype(np.float32, copy=False)})


def save_samples(spec: PreviewSpec, tile: Tile, layers: dict[str, np.ndarray]) -> None:
    """Write some of one core's samples, each layer (of :data:`SAMPLE_LAYERS`) atomically as an
    ``.npy``."""
    Path(spec.folder).mkdir(parents=True, exist_ok=True)
    for layer, values in layers.items():
        if layer not in SAMPLE_LAYERS:
            raise ValueError(f"{layer!r} is not one of the sample layers {SAMPLE_LAYERS}")
        buffer = io.BytesIO()
        np.save(buffer, values)
        atomic_write(spec.path(tile, layer), buffer.getvalue())


def assemble(
    spec: PreviewSpec, tiles: Sequence[Tile], dates: Sequence[int], height: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole scene's samples from every core's file, of the ``dates`` (indices in the
    cube's time order), in the order given.

    Returns
    -------
    observed, clear : numpy.ndarray
        (time, rows, cols, bands) float32.
    mask : numpy.ndarray
        (time, rows, cols) uint8.
    """
    step, k = spec.step, len(spec.bands)
    picked = list(dates)
    shape = (len(picked), -(-height // step), -(-width // step))
    observed = np.full((*shape, k), np.nan, np.float32)
    clear = np.full((*shape, k), np.nan, np.float32)
    mask = np.full(shape, 255, np.uint8)
    outputs: tuple[np.ndarray, ...] = (observed, clear, mask)
    for tile in tiles:
        core = tile.core
        rows = slice(-(-core.row_off // step), -(-core.row_end // step))
        cols = slice(-(-core.col_off // step), -(-core.col_end // step))
        for layer, out in zip(SAMPLE_LAYERS, outputs, strict=True):
            # Mapped, not loaded: the dates come first, so only the picked ones are read.
            out[:, rows, cols] = np.load(spec.path(tile, layer), mmap_mode="r")[picked]
    return observed, clear, mask
