"""What a simulated sensor sees: the ground sampled through a frame's RPC at every pixel."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from affine import Affine
from scipy.ndimage import map_coordinates

from pipeline.inputs.synthetic.rpc import SyntheticRpc

__all__ = ["EXACT_GROUND_MAX", "ground_rows", "observe"]

#: Frames larger than this are simulated in row blocks, with the image → ground mapping solved
#: on a lattice every ``_GROUND_STEP`` pixels and interpolated in between (the mapping is smooth:
#: ~1e-4 px off). Solving it at every pixel of a 10240² frame needed ~20 arrays of 800 MB and
#: most of an hour; smaller frames keep the exact per-pixel solution.
EXACT_GROUND_MAX = 2048
_GROUND_STEP = 8


def ground_rows(rpc: SyntheticRpc, size: int, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """lon, lat of the pixel centres of image rows ``r0:r1`` (all columns).

    Exact (:meth:`SyntheticRpc.ground` at every pixel) up to :data:`EXACT_GROUND_MAX`; above,
    interpolated between the exact positions of a lattice every 8 pixels.

    Parameters
    ----------
    rpc
        The frame's RPC.
    size
        Frame size in pixels (square).
    r0, r1
        The image rows.

    Returns
    -------
    tuple of numpy.ndarray
        lon and lat in degrees, each of shape (r1 - r0, size).
    """
    rows, cols = np.mgrid[r0:r1, 0:size].astype(float)
    if size <= EXACT_GROUND_MAX:
        return rpc.ground(rows, cols)
    nodes = np.arange(0, size + _GROUND_STEP, _GROUND_STEP, dtype=float)
    first = r0 // _GROUND_STEP
    node_rows = nodes[first : (r1 - 1) // _GROUND_STEP + 2]
    lon_n, lat_n = rpc.ground(*np.meshgrid(node_rows, nodes, indexing="ij"))
    at = np.stack([rows / _GROUND_STEP - first, cols / _GROUND_STEP])
    return (
        map_coordinates(lon_n, at, order=1, mode="nearest"),
        map_coordinates(lat_n, at, order=1, mode="nearest"),
    )


def observe(
    truth: np.ndarray, transform: Affine, rpc: SyntheticRpc, size: int, band_idx: Sequence[int]
) -> np.ndarray:
    """Sample the ground through the RPC at every image pixel centre (bilinear).

    Parameters
    ----------
    truth
        The ground, (bands, height, width).
    transform
        Its EPSG:4326 transform.
    rpc
        The frame's RPC.
    size
        Frame size in pixels (square).
    band_idx
        The bands of ``truth`` to sample.

    Returns
    -------
    numpy.ndarray
        float64 of shape (len(band_idx), size, size); NaN where a pixel sees beyond the ground.
    """
    out = np.empty((len(band_idx), size, size))
    block = size if size <= EXACT_GROUND_MAX else 1024
    inv = ~transform
    h, w = truth.shape[1:]
    for r0 in range(0, size, block):
        r1 = min(r0 + block, size)
        lon, lat = ground_rows(rpc, size, r0, r1)
        gc, gr = inv @ (lon, lat)
        # Ground pixel centres sit at integer + 0.5 in transform space.
        coords = np.stack([gr - 0.5, gc - 0.5])
        # Image pixels that look beyond the simulated ground get the L1A fill value (NaN here,
        # DN 0 on disk) rather than replicated edge pixels: test data must not invent ground.
        outside = (
            (coords[0] < -0.5) | (coords[0] > h - 0.5) | (coords[1] < -0.5) | (coords[1] > w - 0.5)
        )
        for k, b in enumerate(band_idx):
            sampled = map_coordinates(truth[b], coords, order=1, mode="nearest")
            out[k, r0:r1] = np.where(outside, np.nan, sampled)
    return out
