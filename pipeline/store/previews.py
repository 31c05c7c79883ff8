"""Quicklook samples kept by the tasks that hold the layers, so that no quicklook decodes a store.

A date's quicklook shows every ``step``-th pixel (``step`` = longest side / quicklook size,
rounded up) of the observed image, of the mask and of the clear image. Read from the stores,
those samples cost a decode of every chunk of three bands of the input and of the cube (their
chunks hold whole tiles): the slowest product task at full size. The tasks that hold those
layers anyway keep the pixels of each core whose row and column are multiples of ``step`` and
save them in ``work/previews/`` as ``.npy`` files, dates first: the stage task of each tile its
observations, the COG task of each band its clear values (:func:`keep_band`, a file per core
and preview band), the mask task of each tile row its codes (:func:`keep_mask`, a file per
core). :func:`assemble` puts the cores' samples together. The result is the strided read,
value for value. Each date's quicklook is a task of its own and maps the files, so it reads its
own date's samples only.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.grid.tiling import Tile, Window
from pipeline.store.durable import atomic_write

__all__ = [
    "BAND_LAYERS",
    "PreviewSpec",
    "assemble",
    "keep_band",
    "keep_mask",
    "preview_step",
    "samples_spec",
]

#: Longest side of a quicklook panel, in pixels.
QUICKLOOK_SIZE = 1024

#: The layers sampled band by band, a (time, rows, cols) float32 file per core and preview
#: band; the mask's codes are a (time, rows, cols) uint8 file per core.
BAND_LAYERS = ("observed", "clear")


def preview_step(height: int, width: int, size: int) -> int:
    """The stride that brings the longer side of a ``height`` × ``width`` grid to ≤ ``size``."""
    return max(1, -(-max(height, width) // size))


def _quicklook_bands(bands: Sequence[str]) -> list[int]:
    """Red, green, blue band indices of GF-4 PMS (B4, B3, B2) when present, else the first."""
    rgb = ["B4", "B3", "B2"]
    return [list(bands).index(b) for b in rgb] if all(b in bands for b in rgb) else [0]


def samples_spec(height: int, width: int, bands: Sequence[str], folder: Path) -> PreviewSpec:
    """What the tasks keep for the quicklooks of a ``height`` × ``width`` grid.

    Staging keeps the observations' samples whether or not a run writes quicklooks: a later
    run may ask for quicklooks, and it stages nothing.

    Parameters
    ----------
    height, width
        The target grid's size in pixels.
    bands
        The run's band names (the quicklooks show B4, B3, B2 when present).
    folder
        Where the samples go (``work/previews``).
    """
    step = preview_step(height, width, QUICKLOOK_SIZE)
    return PreviewSpec(tuple(_quicklook_bands(bands)), step, str(folder))


@dataclass(frozen=True)
class PreviewSpec:
    """What the tasks keep for the quicklooks."""

    bands: tuple[int, ...]  # band indices: red, green, blue (or one grey band)
    step: int
    folder: str  # work/previews of the run

    def path(self, tile: Tile, layer: str, band: int | None = None) -> Path:
        """The samples file of ``tile``'s core: of ``layer`` (of :data:`BAND_LAYERS`) in
        ``band``, or of the mask codes (``layer="mask"``, no band)."""
        name = layer if band is None else f"{layer}-b{band}"
        return Path(self.folder) / f"r{tile.row:03d}c{tile.col:03d}-{name}.npy"

    def offsets(self, core: Window, window: Window) -> tuple[slice, slice]:
        """The sampled pixels of ``core`` (row and column multiples of :attr:`step`), as
        slices of an array over ``window`` (which contains the core)."""
        first_row = -(-core.row_off // self.step) * self.step
        first_col = -(-core.col_off // self.step) * self.step
        return (
            slice(first_row - window.row_off, core.row_end - window.row_off, self.step),
            slice(first_col - window.col_off, core.col_end - window.col_off, self.step),
        )


def keep_band(
    spec: PreviewSpec, tile: Tile, layer: str, band: int, values: np.ndarray, window: Window
) -> None:
    """Save the samples of ``tile``'s core from ``values`` (time, rows, cols over ``window``,
    which contains the core), ``layer`` (of :data:`BAND_LAYERS`) of ``band``, if it is a
    preview band."""
    if layer not in BAND_LAYERS:
        raise ValueError(f"{layer!r} is not one of the sampled layers {BAND_LAYERS}")
    if band in spec.bands:
        rows, cols = spec.offsets(tile.core, window)
        _save(spec, spec.path(tile, layer, band), np.array(values[:, rows, cols], np.float32))


def keep_mask(spec: PreviewSpec, tile: Tile, codes: np.ndarray) -> None:
    """Save the samples of ``tile``'s mask ``codes`` (time, rows, cols over the core)."""
    rows, cols = spec.offsets(tile.core, tile.core)
    _save(spec, spec.path(tile, "mask"), np.ascontiguousarray(codes[:, rows, cols]))


def _save(spec: PreviewSpec, path: Path, values: np.ndarray) -> None:
    """Write ``values`` as an ``.npy``, atomically (the task's marker or result vouches for it)."""
    Path(spec.folder).mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, values)
    atomic_write(path, buffer.getvalue())


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
    for tile in tiles:
        core = tile.core
        rows = slice(-(-core.row_off // step), -(-core.row_end // step))
        cols = slice(-(-core.col_off // step), -(-core.col_end // step))
        # Mapped, not loaded: the dates come first, so only the picked ones are read.
        for i, band in enumerate(spec.bands):
            for layer, out in zip(BAND_LAYERS, (observed, clear), strict=True):
                samples = np.load(spec.path(tile, layer, band), mmap_mode="r")
                out[:, rows, cols, i] = samples[picked]
        mask[:, rows, cols] = np.load(spec.path(tile, "mask"), mmap_mode="r")[picked]
    return observed, clear, mask
