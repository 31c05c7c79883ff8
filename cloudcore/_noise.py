"""Private building blocks of the gradient (Perlin) noise in :mod:`cloudcore.simulate`.

The gradient lattice is infinite and never stored: the gradient at integer lattice point ``(i, j)``
is a hash of ``(i, j, seed)``. A field evaluated at shifted coordinates therefore sees exactly the
same lattice, which is what makes advected (moving) clouds consistent, and there is no period to
show up as repeating clouds however far a field is shifted or however fine an octave is.

The noise is evaluated on a tensor grid of pixel coordinates, and Perlin noise is bilinear in the
corner gradients, so one octave is ``Ry @ Gy @ Qy.T + Rx @ Gx @ Qx.T`` with sparse interpolation
matrices (two non-zeros per row) and the small gradient-component grids ``Gy``, ``Gx``. That turns
the per-pixel gathers of a textbook implementation into a few matrix products.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# splitmix64 constants (Steele, Lea & Flood 2014): a cheap, well-mixing 64-bit finaliser.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """Mix a uint64 array (wrap-around arithmetic is intended)."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


def lattice_gradients(
    i0: int, ni: int, j0: int, nj: int, seed: np.uint64
) -> tuple[np.ndarray, np.ndarray]:
    """Unit gradients ``(gy, gx)`` at lattice rows ``i0 … i0+ni-1`` and cols ``j0 … j0+nj-1``."""
    # int64 -> uint64 by view keeps negative lattice indices distinct (two's complement).
    i = np.arange(i0, i0 + ni, dtype=np.int64).view(np.uint64)
    j = np.arange(j0, j0 + nj, dtype=np.int64).view(np.uint64)
    # Hash i first and feed the result into the hash of j, so that (i, j) and (j, i) differ.
    h = _splitmix64(_splitmix64(i ^ seed)[:, None] + j[None, :])
    angle = (h >> np.uint64(11)).astype(np.float64) * (2.0 * np.pi / 2.0**53)
    return np.sin(angle), np.cos(angle)


def _fade(t: np.ndarray) -> np.ndarray:
    """Perlin's quintic fade 6t⁵ − 15t⁴ + 10t³ (C² continuous across cell borders)."""
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


def axis_weights(coords: np.ndarray) -> tuple[int, sp.csr_array, sp.csr_array]:
    """Interpolation matrices of one axis.

    Returns the first lattice index ``k0`` and two sparse ``(len(coords), n_lattice)`` matrices:
    ``plain`` holds the fade weights of the two neighbouring lattice points and ``ramp`` the same
    weights times the signed distance to that lattice point.
    """
    cell = np.floor(coords)
    t = coords - cell
    s = _fade(t)
    k = cell.astype(np.int64)
    k0 = int(k.min())
    n_lattice = int(k.max()) - k0 + 2
    rows = np.repeat(np.arange(coords.size), 2)
    cols = np.stack([k - k0, k - k0 + 1], axis=1).ravel()
    plain_vals = np.stack([1.0 - s, s], axis=1).ravel()
    ramp_vals = np.stack([(1.0 - s) * t, s * (t - 1.0)], axis=1).ravel()
    shape = (coords.size, n_lattice)
    plain = sp.csr_array((plain_vals, (rows, cols)), shape=shape)
    ramp = sp.csr_array((ramp_vals, (rows, cols)), shape=shape)
    return k0, plain, ramp
