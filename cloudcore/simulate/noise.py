"""Gradient (Perlin) noise: the texture of every simulated cloud field except the reference one.

The gradient lattice is infinite and never stored: the gradient at integer lattice point ``(i, j)``
is a hash of ``(i, j, seed)``. A field evaluated at shifted coordinates therefore sees exactly the
same lattice, which is what makes advected (moving) clouds consistent, and there is no period to
show up as repeating clouds however far a field is shifted or however fine an octave is.

The noise is evaluated on a tensor grid of pixel coordinates, and Perlin noise is bilinear in the
corner gradients, so one octave is ``Ry @ Gy @ Qy.T + Rx @ Gx @ Qx.T`` with sparse interpolation
matrices (two non-zeros per row) and the small gradient-component grids ``Gy``, ``Gx``. That turns
the per-pixel gathers of a textbook implementation into a few matrix products.

:func:`perlin_noise` is the public entry point; :class:`NoiseSettings`, :func:`noise_settings`,
:func:`draw_lattices` and :func:`eval_perlin` let :mod:`cloudcore.simulate.clouds` draw a field
once and evaluate it at many offsets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from cloudcore._checks import check_count, check_pair, check_positive, check_rng, check_shape

# Besides perlin_noise, the pieces cloud fields are made of (used by clouds.py).
__all__ = [
    "NoiseSettings",
    "axis_weights",
    "draw_lattices",
    "eval_perlin",
    "lattice_gradients",
    "noise_settings",
    "perlin_noise",
]

# splitmix64 constants (Steele, Lea & Flood 2014): a cheap, well-mixing 64-bit finaliser.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


# --------------------------------------------------------------------------------------------
# the lattice and the interpolation matrices
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# fractal noise: settings, random draws, evaluation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseSettings:
    """Validated Perlin parameters (see :func:`perlin_noise`)."""

    freq: tuple[float, float]  # base-octave lattice cells per pixel, (y, x)
    octaves: int
    persistence: float
    lacunarity: float


def noise_settings(
    shape: tuple[int, int],
    cells: float | tuple[float, float],
    octaves: int,
    persistence: float,
    lacunarity: float,
    where: str,
) -> NoiseSettings:
    """Validate the Perlin parameters once."""
    h, w = shape
    if isinstance(cells, tuple | list):
        cy, cx = (check_positive(c, "cells", where) for c in check_pair(cells, "cells", where))
        freq = (cy / h, cx / w)
    else:
        c = check_positive(cells, "cells", where)
        freq = (c / max(h, w), c / max(h, w))
    return NoiseSettings(
        freq=freq,
        octaves=check_count(octaves, "octaves", where),
        persistence=check_positive(persistence, "persistence", where),
        lacunarity=check_positive(lacunarity, "lacunarity", where),
    )


def draw_lattices(octaves: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """All the randomness of one Perlin field: a lattice seed and a lattice shift per octave."""
    # Drawn up front so that the stream consumed depends on neither shape nor offset.
    seeds = rng.integers(0, 2**63, size=octaves, dtype=np.int64).astype(np.uint64)
    # A sub-cell shift per octave keeps the lattice points of all octaves from coinciding at the
    # origin, where Perlin noise of every octave would be exactly 0.
    shifts = rng.random((octaves, 2))
    return seeds, shifts


def eval_perlin(
    shape: tuple[int, int],
    plan: tuple[np.ndarray, np.ndarray],
    settings: NoiseSettings,
    offset: tuple[float, float],
) -> np.ndarray:
    """Evaluate the field of ``plan`` on the pixel grid of ``shape`` shifted by ``offset``."""
    seeds, shifts = plan
    ys = np.arange(shape[0], dtype=np.float64) + offset[0]
    xs = np.arange(shape[1], dtype=np.float64) + offset[1]
    left: list[np.ndarray] = []
    right: list[sp.csr_array] = []
    fy, fx = settings.freq
    amplitude, total = 1.0, 0.0
    for k in range(seeds.size):
        scale = settings.lacunarity**k
        ky0, plain_y, ramp_y = axis_weights(ys * (fy * scale) + shifts[k, 0])
        kx0, plain_x, ramp_x = axis_weights(xs * (fx * scale) + shifts[k, 1])
        gy, gx = lattice_gradients(ky0, plain_y.shape[1], kx0, plain_x.shape[1], seeds[k])
        # √2 maps the extreme of 2-D Perlin noise with unit gradients (±√2/2) to ±1.
        weight = amplitude * math.sqrt(2.0)
        left += [weight * (ramp_y @ gy), weight * (plain_y @ gx)]
        right += [plain_x, ramp_x]
        total += amplitude
        amplitude *= settings.persistence
    # One product for all octaves: (h × K) @ (K × w) with K = 2 · Σ lattice columns.
    q = sp.hstack(right, format="csr")
    noise = (q @ np.hstack(left).T).T / total
    return np.ascontiguousarray(noise, dtype=np.float64)


def perlin_noise(
    shape: tuple[int, int],
    *,
    cells: float | tuple[float, float] = 4,
    octaves: int = 5,
    persistence: float = 0.5,
    lacunarity: float = 2.0,
    offset: tuple[float, float] = (0.0, 0.0),
    rng: np.random.Generator,
) -> np.ndarray:
    """Fractal gradient (Perlin) noise on a ``(height, width)`` pixel grid.

    Octave ``k = 0 … octaves−1`` is classic 2-D Perlin noise (random unit gradients on an integer
    lattice, quintic fade) at ``lacunarity**k`` times the base frequency, weighted by
    ``persistence**k``. The octaves are summed and divided by the sum of the weights.

    Parameters
    ----------
    shape
        ``(height, width)`` in pixels; any positive sizes (not only multiples of a cell).
    cells
        Number of base-lattice cells across the image, i.e. the size of the largest features. A
        single number counts cells across the *longer* side and keeps the cells square; a pair
        ``(cells_y, cells_x)`` sets each axis (non-square cells stretch the clouds).
    octaves
        Number of octaves (≥ 1); more octaves add finer detail.
    persistence
        Amplitude ratio between successive octaves (> 0); lower is smoother.
    lacunarity
        Frequency ratio between successive octaves (> 0).
    offset
        ``(dy, dx)`` in pixels: the pixel ``(y, x)`` of the result samples the field at
        ``(y + dy, x + dx)``. The gradient lattice is a hash of the lattice coordinates (seeded once
        from ``rng``) and thus infinite and aperiodic, so two calls with the same seed and different
        offsets sample one and the same field: ``perlin_noise(s, offset=(0, k), rng=g1)[:, :-k]``
        equals ``perlin_noise(s, rng=g2)[:, k:]`` up to rounding when ``g1`` and ``g2`` are in the
        same state.
    rng
        Source of all randomness (one lattice seed and one sub-cell lattice shift per octave).

    Returns
    -------
    numpy.ndarray
        float64 array of ``shape``; values lie in [−1, 1] (each octave is scaled so that its
        theoretical extreme is ±1), mean ≈ 0, standard deviation about 0.17 with the defaults.

    Notes
    -----
    Fully vectorised: Perlin noise on a tensor grid is bilinear in the corner gradients, so each
    octave reduces to products of sparse interpolation matrices with the small gradient grid (see
    the module docstring). A 1024 × 1024 field with 5 octaves takes about 10-20 ms.
    """
    where = "perlin_noise"
    rng = check_rng(rng, where)
    h, w = check_shape(shape, where)
    settings = noise_settings((h, w), cells, octaves, persistence, lacunarity, where)
    off = check_pair(offset, "offset", where)
    plan = draw_lattices(settings.octaves, rng)
    return eval_perlin((h, w), plan, settings, off)
