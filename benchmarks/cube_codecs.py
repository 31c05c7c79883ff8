"""Zarr codecs for the run's stores, compared on a solved scene's own chunks.

Reads one band of a finished run (``input.zarr``'s observations and the cube's solved layers,
in the cube's chunks of ``cube_chunk_rows`` × ``tile_size`` × all dates) and encodes and
decodes every chunk with each candidate Blosc setting, on one thread. Prints per codec the
compression ratio (overall and per layer) and the encode and decode throughput, side by side
from one run. This is the measurement behind :func:`pipeline.store.cube.compressors`.

Usage::

    python benchmarks/cube_codecs.py RUN_DIR [--band 1] [--row-off 1024] [--rows 1024] [--cols 2048]

``RUN_DIR`` is a run's ``output.path`` (e.g. one ``benchmarks/pipeline_run.py`` wrote).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: (cname, clevel, shuffle): 1 byte shuffle, 2 bit shuffle.
CANDIDATES = [
    ("lz4", 5, 2),
    ("lz4", 5, 1),
    ("lz4", 1, 1),
    ("lz4", 9, 1),
    ("zstd", 1, 1),
]
LAYERS = ("clear", "cloud", "haze", "shadow")
#: The layers a smaller encoding could hold (the clear ground is the product: float32).
DIAGNOSTIC_LAYERS = ("cloud", "haze", "shadow")


def _chunks(
    run: Path, band: int, rows: slice, cols: int, chunk_rows: int, chunk_cols: int
) -> Iterator[tuple[str, np.ndarray]]:
    """(layer, chunk) of every chunk of ``band`` over ``rows`` and the first ``cols`` columns."""
    import zarr

    cube = zarr.open_group(store=str(run / "cube.zarr"), mode="r")
    source = zarr.open_array(store=str(run / "work" / "input.zarr"), path="observed", mode="r")
    arrays: dict[str, Any] = {name: cube[name] for name in LAYERS if name in cube}
    arrays["observed"] = source
    for name, array in arrays.items():
        block = np.asarray(array[:, band, rows, :cols])
        for r in range(0, block.shape[1], chunk_rows):
            for c in range(0, block.shape[2], chunk_cols):
                yield name, np.ascontiguousarray(block[:, r : r + chunk_rows, c : c + chunk_cols])


def main() -> None:
    from numcodecs import Blosc, blosc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--band", type=int, default=1)
    parser.add_argument("--row-off", type=int, default=1024, help="first row (inside the scene)")
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=2048)
    parser.add_argument("--chunk-rows", type=int, default=128)
    parser.add_argument("--chunk-cols", type=int, default=1024)
    parser.add_argument("--float16", action="store_true", help="also cloud/haze/shadow in float16")
    args = parser.parse_args()
    blosc.set_nthreads(1)
    chunks = list(
        _chunks(
            args.run,
            args.band,
            slice(args.row_off, args.row_off + args.rows),
            args.cols,
            args.chunk_rows,
            args.chunk_cols,
        )
    )
    size = sum(c.nbytes for _, c in chunks) / 2**20
    print(f"{len(chunks)} chunks of band {args.band}, {size:.0f} MiB")
    for cname, clevel, shuffle in CANDIDATES:
        m = _measure(Blosc(cname=cname, clevel=clevel, shuffle=shuffle), chunks)
        total = sum(m.raw.values())
        per = ", ".join(f"{k} {m.raw[k] / m.stored[k]:.2f}" for k in m.raw)
        kind = {1: "byte", 2: "bit"}[shuffle]
        print(
            f"{cname} {clevel} {kind:>4} shuffle: ratio {total / sum(m.stored.values()):.2f} "
            f"({per}); encode {total / m.encode / 1e6:.0f} MB/s, decode "
            f"{total / m.decode / 1e6:.0f} MB/s (one thread)"
        )
    if args.float16:
        _compare_float16(args.run, [(n, c) for n, c in chunks if n in DIAGNOSTIC_LAYERS])


@dataclass
class Measured:
    """One codec on a set of chunks: bytes per layer, CPU seconds, the largest change."""

    raw: dict[str, int] = field(default_factory=dict)  # layer → float32 bytes
    stored: dict[str, int] = field(default_factory=dict)  # layer → encoded bytes
    encode: float = 0.0  # CPU seconds, the cast to the stored dtype included
    decode: float = 0.0  # CPU seconds, the cast back to float32 included
    error: float = 0.0  # largest |decoded − original| of a finite value


def _measure(codec: Any, chunks: list[tuple[str, np.ndarray]], dtype: Any = np.float32) -> Measured:
    """Encode and decode every chunk with ``codec`` on this thread, stored as ``dtype``."""
    m = Measured()
    cast = np.dtype(dtype) != np.float32  # a reader casts back; float32 round-trips exactly
    for name, chunk in chunks:
        started = time.process_time()
        encoded = codec.encode(chunk.astype(dtype, copy=False))
        m.encode += time.process_time() - started
        started = time.process_time()
        decoded = codec.decode(encoded)
        if cast:
            decoded = np.frombuffer(decoded, dtype=dtype).astype(np.float32)
        m.decode += time.process_time() - started
        m.raw[name] = m.raw.get(name, 0) + chunk.nbytes
        m.stored[name] = m.stored.get(name, 0) + len(encoded)
        if cast:
            diff = np.abs(decoded.reshape(chunk.shape) - chunk)[np.isfinite(chunk)]
            m.error = max(m.error, float(diff.max(initial=0.0)))
        # Freed before the next decode, as a reader's chunk would be: held one chunk longer,
        # every decode got fresh memory and took a fifth longer here.
        del decoded
    return m


def _compare_float16(run: Path, chunks: list[tuple[str, np.ndarray]]) -> None:
    """CPU seconds and bytes of the run's own codec (its cube's ``cloud`` layer's) on
    ``chunks`` as float32 and as float16."""
    import zarr
    from numcodecs import Blosc

    codec: Any = zarr.open_array(store=str(run / "cube.zarr"), path="cloud", mode="r").compressors[
        0
    ]
    shuffle = {"noshuffle": Blosc.NOSHUFFLE, "shuffle": Blosc.SHUFFLE}.get(
        codec.shuffle.value, Blosc.BITSHUFFLE
    )
    blosc = Blosc(cname=codec.cname.value, clevel=codec.clevel, shuffle=shuffle)
    for dtype in (np.float32, np.float16):
        m = _measure(blosc, chunks, dtype)
        print(
            f"{' '.join(DIAGNOSTIC_LAYERS)} as {np.dtype(dtype).name}: "
            f"{sum(m.stored.values()) / 2**20:.1f} MiB stored of "
            f"{sum(m.raw.values()) / 2**20:.0f} MiB float32; encode {m.encode:.3f} s, decode "
            f"{m.decode:.3f} s CPU (casts included); largest change {m.error:.2e}"
        )


if __name__ == "__main__":
    main()
