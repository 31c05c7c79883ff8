"""Semi-realistic simulation of cloudy image series (paper, "Simulation and performance indicator").

A cloud-free grey image ``I`` in [0, 1] is the truth; each date ``t`` gets a cloud (opacity) field
``C_t`` in [0, 1] and is observed through the scattering model ``I_t = C_t + (1 − C_t)∘I``
(SPEC-NOTES §4). Cloud fields come from

* :func:`reference_clouds`: the reference experiments' recipe (value noise on a 64 × 64 grid,
  gamma 4, CLAHE), kept as a preset so that the paper's numbers can be reproduced;
* :func:`cloud_field`: true gradient (Perlin) noise with coverage, thickness and softness controls,
  for any image shape;
* :func:`cloud_series` with ``style="moving"``: one Perlin field advected by a wind and slowly
  re-shaped, for clouds that move and evolve from one date to the next.

Every random draw goes through the ``numpy.random.Generator`` passed as ``rng``, so a simulation is
reproducible from its seed and independent of any global state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.interpolate import make_interp_spline
from skimage.exposure import equalize_adapthist
from skimage.transform import resize

from cloudcore._noise import axis_weights, lattice_gradients

__all__ = [
    "RGB2GRAY_WEIGHTS",
    "SimulatedSeries",
    "apply_clouds",
    "cloud_field",
    "cloud_series",
    "paper_case",
    "perlin_noise",
    "reference_clouds",
    "simulate_series",
    "stack_frames",
    "to_grey",
    "unit_scale",
    "unstack_frames",
]

CloudStyle = Literal["reference", "perlin", "moving"]

#: MATLAB ``rgb2gray`` weights (R, G, B), used by the reference experiments.
RGB2GRAY_WEIGHTS = (0.2989, 0.5870, 0.1140)

# Reference recipe constants (the authors' perlin_noise.m / simcloud.m, SPEC-NOTES §4).
_REF_GRID = 64
_REF_OCTAVES = 5
_REF_GAMMA = 4.0
_REF_TILES = 8
_REF_CLIP_LIMIT = 0.01
_REF_NBINS = 256

# Keyword arguments that cloud_series forwards to cloud_field for the Perlin styles.
_FIELD_KEYS = frozenset({"cells", "octaves", "persistence", "lacunarity", "softness"})


# --------------------------------------------------------------------------------------------
# argument checks (one-line messages that name the argument and the fix)
# --------------------------------------------------------------------------------------------


def _check_rng(rng: object, where: str) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"{where}: rng must be a numpy.random.Generator, got {type(rng).__name__}; "
            "pass e.g. rng=np.random.default_rng(seed)"
        )
    return rng


def _check_shape(shape: Sequence[int], where: str) -> tuple[int, int]:
    try:
        h, w = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: shape must be a pair (height, width) of positive integers, got {shape!r}"
        ) from None
    if h < 1 or w < 1 or (h, w) != tuple(shape):
        raise ValueError(
            f"{where}: shape must be a pair (height, width) of positive integers, got {shape!r}"
        )
    return h, w


def _check_range(value: float, name: str, lo: float, hi: float, where: str) -> float:
    value = float(value)
    if not lo <= value <= hi:
        raise ValueError(f"{where}: {name} must lie in [{lo:g}, {hi:g}], got {value:g}")
    return value


def _check_positive(value: float, name: str, where: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{where}: {name} must be a finite number > 0, got {value:g}")
    return value


def _check_pair(value: object, name: str, where: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: {name} must be a pair of numbers (y, x), got {value!r}"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"{where}: {name} must be finite, got {value!r}")
    return a, b


def _check_unit_interval(a: np.ndarray, name: str, where: str) -> None:
    if a.size and not (np.all(np.isfinite(a)) and a.min() >= 0.0 and a.max() <= 1.0):
        raise ValueError(
            f"{where}: {name} must hold finite values in [0, 1] (got range "
            f"[{np.nanmin(a):g}, {np.nanmax(a):g}]); clip or rescale it (unit_scale for DN)"
        )


# --------------------------------------------------------------------------------------------
# Perlin noise and Perlin cloud fields
# --------------------------------------------------------------------------------------------


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
    ``cloudcore._noise``). A 1024 × 1024 field with 5 octaves takes about 10-20 ms.
    """
    where = "perlin_noise"
    rng = _check_rng(rng, where)
    h, w = _check_shape(shape, where)
    settings = _noise_settings((h, w), cells, octaves, persistence, lacunarity, where)
    off = _check_pair(offset, "offset", where)
    plan = _draw_lattices(settings.octaves, rng)
    return _eval_perlin((h, w), plan, settings, off)


@dataclass(frozen=True)
class _NoiseSettings:
    freq: tuple[float, float]  # base-octave lattice cells per pixel, (y, x)
    octaves: int
    persistence: float
    lacunarity: float


def _noise_settings(
    shape: tuple[int, int],
    cells: float | tuple[float, float],
    octaves: int,
    persistence: float,
    lacunarity: float,
    where: str,
) -> _NoiseSettings:
    """Validate the Perlin parameters once."""
    h, w = shape
    if isinstance(cells, tuple | list):
        cy, cx = (_check_positive(c, "cells", where) for c in _check_pair(cells, "cells", where))
        freq = (cy / h, cx / w)
    else:
        c = _check_positive(cells, "cells", where)
        freq = (c / max(h, w), c / max(h, w))
    if isinstance(octaves, bool) or not isinstance(octaves, int | np.integer) or octaves < 1:
        raise ValueError(f"{where}: octaves must be an integer ≥ 1, got {octaves!r}")
    return _NoiseSettings(
        freq=freq,
        octaves=int(octaves),
        persistence=_check_positive(persistence, "persistence", where),
        lacunarity=_check_positive(lacunarity, "lacunarity", where),
    )


def _draw_lattices(octaves: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """All the randomness of one Perlin field: a lattice seed and a lattice shift per octave."""
    # Drawn up front so that the stream consumed depends on neither shape nor offset.
    seeds = rng.integers(0, 2**63, size=octaves, dtype=np.int64).astype(np.uint64)
    # A sub-cell shift per octave keeps the lattice points of all octaves from coinciding at the
    # origin, where Perlin noise of every octave would be exactly 0.
    shifts = rng.random((octaves, 2))
    return seeds, shifts


def _eval_perlin(
    shape: tuple[int, int],
    plan: tuple[np.ndarray, np.ndarray],
    settings: _NoiseSettings,
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


def _threshold_noise(
    noise: np.ndarray, coverage: float, thickness: float, softness: float
) -> np.ndarray:
    """Noise to opacity: 0 below the (1 − coverage) quantile, then a smooth ramp to thickness."""
    if coverage <= 0.0 or thickness <= 0.0:
        return np.zeros_like(noise)
    level = float(np.quantile(noise, 1.0 - coverage))
    top = float(noise.max())
    if top <= level:  # a constant field: nothing stands out, so cover all or nothing
        return np.full_like(noise, thickness if coverage >= 1.0 else 0.0)
    # The ramp is measured in units of the noise range above the threshold, so that the densest
    # pixel always reaches ``thickness`` whatever the coverage, and the opacity rises
    # monotonically with coverage pixel by pixel.
    t = np.clip((noise - level) / (softness * (top - level)), 0.0, 1.0)
    return thickness * (t * t * (3.0 - 2.0 * t))


def cloud_field(
    shape: tuple[int, int],
    *,
    coverage: float = 0.3,
    thickness: float = 0.8,
    cells: float | tuple[float, float] = 4,
    octaves: int = 5,
    persistence: float = 0.5,
    softness: float = 0.1,
    rng: np.random.Generator,
    offset: tuple[float, float] = (0.0, 0.0),
    lacunarity: float = 2.0,
) -> np.ndarray:
    """A cloud opacity field in [0, 1] from thresholded Perlin noise.

    The noise of :func:`perlin_noise` is cut at its ``1 − coverage`` quantile: pixels below are
    clear (opacity exactly 0), pixels above rise along a smoothstep ramp to ``thickness``.

    Parameters
    ----------
    shape
        ``(height, width)`` in pixels.
    coverage
        Fraction of pixels under cloud, in [0, 1]: exactly the fraction with opacity > 0, and close
        to the fraction above any small threshold (with ``softness=0.1``, about 0.01 less above
        1 % of ``thickness``).
    thickness
        Peak opacity in [0, 1], reached by the densest pixel; 1 = opaque.
    cells, octaves, persistence, lacunarity, offset
        Passed to :func:`perlin_noise`: feature size, detail and field shift. The threshold is
        taken on each call's own window, so a shifted field matches the unshifted one only up to
        the small change of that quantile; :func:`cloud_series` with ``style="moving"`` is the
        tool for advected clouds.
    softness
        Width of the ramp in (0, 1], as a fraction of the noise range above the threshold. Small
        values give crisp, flat-topped clouds with soft edges; 1 gives opacity that grows gradually
        towards the cloud cores, like haze.
    rng
        Source of all randomness.

    Returns
    -------
    numpy.ndarray
        float64 opacity field of ``shape`` in ``[0, thickness]``.

    Examples
    --------
    Settings that give visibly different skies: thin haze over everything (median opacity about
    0.25), broken cumulus-like cloud with crisp edges, and heavy cover with a few gaps.

    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> haze = cloud_field((512, 512), coverage=1.0, thickness=0.5, softness=1.0, cells=2, rng=g)
    >>> broken = cloud_field((512, 512), coverage=0.3, thickness=0.8, softness=0.1, cells=6, rng=g)
    >>> heavy = cloud_field((512, 512), coverage=0.85, thickness=1.0, softness=0.3, rng=g)
    >>> round(float((broken > 0).mean()), 2)
    0.3
    """
    where = "cloud_field"
    coverage = _check_range(coverage, "coverage", 0.0, 1.0, where)
    thickness = _check_range(thickness, "thickness", 0.0, 1.0, where)
    softness = _check_range(softness, "softness", 0.0, 1.0, where)
    if softness == 0.0:
        raise ValueError(f"{where}: softness must be > 0 (a hard edge); use e.g. softness=0.01")
    noise = perlin_noise(
        shape,
        cells=cells,
        octaves=octaves,
        persistence=persistence,
        lacunarity=lacunarity,
        offset=offset,
        rng=rng,
    )
    return _threshold_noise(noise, coverage, thickness, softness)


# --------------------------------------------------------------------------------------------
# reference recipe
# --------------------------------------------------------------------------------------------


def _spline_zoom(z: np.ndarray, factor: int) -> np.ndarray:
    """MATLAB ``interp2(z, log2(factor), 'spline')`` cropped to the top-left ``z.shape``.

    Both use the not-a-knot cubic spline through the samples, applied per axis (a tensor-product
    spline); the crop keeps sample positions ``0, 1/factor, …`` of the first ``1/factor`` of ``z``.
    """
    if factor == 1:
        return z
    out = z
    for axis, n in enumerate(z.shape):
        spline = make_interp_spline(np.arange(n, dtype=np.float64), out, k=3, axis=axis)
        out = spline(np.arange(n, dtype=np.float64) / factor)
    return np.asarray(out)


def reference_clouds(shape: tuple[int, int], *, rng: np.random.Generator) -> np.ndarray:
    """One cloud field made with the reference experiments' recipe (SPEC-NOTES §4).

    Steps, as in the authors' ``simcloud.m``/``perlin_noise.m``:

    1. on a 64 × 64 grid, sum over octaves ``i = 1 … 5`` of ``i ×`` (Gaussian white noise upsampled
       by a not-a-knot cubic spline by a factor ``2**(i-1)``, top-left 64 × 64 kept);
    2. min-max scale to [0, 1];
    3. resize to ``shape`` (cubic spline, :func:`skimage.transform.resize` with ``order=3``);
    4. clip to [0, 1] and raise to the power 4 (MATLAB's ``imadjust(C, [], [], 4)`` clips its input
       to [0, 1] too, which removes the resize overshoot);
    5. CLAHE: :func:`skimage.exposure.equalize_adapthist` with 8 × 8 tiles, ``clip_limit=0.01``,
       256 bins;
    6. clip to [0, 1].

    Parameters
    ----------
    shape
        ``(height, width)`` of the field.
    rng
        Source of the white noise (five 64 × 64 draws).

    Returns
    -------
    numpy.ndarray
        float64 opacity field of ``shape`` in [0, 1]. Its mean (the mean cloud cover) is about
        0.19 on average over seeds (standard deviation about 0.03 between seeds), at 256 × 256 as
        at 1024 × 1024.

    Notes
    -----
    The resize and CLAHE differ in detail from MATLAB's (``imresize`` uses Keys' cubic kernel,
    ``adapthisteq`` does not stretch the data to its full range and normalises its clip limit
    differently), so fields follow the reference recipe statistically, not pixel for pixel.
    """
    where = "reference_clouds"
    rng = _check_rng(rng, where)
    h, w = _check_shape(shape, where)
    acc = np.zeros((_REF_GRID, _REF_GRID))
    for i in range(1, _REF_OCTAVES + 1):
        # Octave i zooms into the top-left 1/2^(i-1) of a fresh noise grid: coarser features get
        # the larger weight i.
        white = rng.standard_normal((_REF_GRID, _REF_GRID))
        acc += i * _spline_zoom(white, 2 ** (i - 1))
    acc = (acc - acc.min()) / (acc.max() - acc.min())
    field = resize(
        acc, (h, w), order=3, mode="symmetric", anti_aliasing=(h < _REF_GRID or w < _REF_GRID)
    )
    field = np.clip(field, 0.0, 1.0) ** _REF_GAMMA
    kernel = (max(h // _REF_TILES, 1), max(w // _REF_TILES, 1))
    field = equalize_adapthist(
        field, kernel_size=kernel, clip_limit=_REF_CLIP_LIMIT, nbins=_REF_NBINS
    )
    return np.clip(np.asarray(field, dtype=np.float64), 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# cloud time series
# --------------------------------------------------------------------------------------------


def _moving_series(
    shape: tuple[int, int],
    n: int,
    *,
    coverage: float,
    thickness: float,
    softness: float,
    wind: tuple[float, float],
    growth: float,
    settings: _NoiseSettings,
    rng: np.random.Generator,
) -> np.ndarray:
    """Advected and slowly re-shaped Perlin clouds; see :func:`cloud_series`."""
    # Date t blends noise fields k and k+1 with k + φ = growth·t; each further field is a new
    # independent draw, so a long series keeps evolving instead of cycling back.
    phase = growth * np.arange(n, dtype=np.float64)
    n_fields = int(np.floor(phase[-1])) + 2 if growth > 0.0 else 1
    # Each field's lattice is drawn once and re-evaluated at every date, so that all dates sample
    # one and the same field, carried by the wind.
    plans = [_draw_lattices(settings.octaves, rng) for _ in range(n_fields)]
    out = np.empty((n, *shape))
    for t in range(n):
        # Sampling at −t·wind moves the content by +wind per date.
        off = (-t * wind[0], -t * wind[1])
        k = int(np.floor(phase[t]))
        frac = float(phase[t] - k)
        noise = _eval_perlin(shape, plans[k], settings, off)
        if frac > 0.0:
            # cos/sin weights keep the variance of the blend of two independent fields constant,
            # so coverage and texture do not drift between pure and blended dates.
            angle = 0.5 * np.pi * frac
            noise = np.cos(angle) * noise + np.sin(angle) * _eval_perlin(
                shape, plans[k + 1], settings, off
            )
        out[t] = _threshold_noise(noise, coverage, thickness, softness)
    return out


def cloud_series(
    shape: tuple[int, int],
    n: int,
    *,
    style: CloudStyle = "reference",
    rng: np.random.Generator,
    coverage: float = 0.3,
    thickness: float = 0.8,
    wind: tuple[float, float] = (3.0, 5.0),
    growth: float = 0.1,
    **field_kwargs: Any,
) -> np.ndarray:
    """Cloud fields for ``n`` dates, shape ``(n, height, width)``, values in [0, 1].

    Parameters
    ----------
    shape
        ``(height, width)`` of each field.
    n
        Number of dates (≥ 1).
    style
        ``"reference"``: ``n`` independent :func:`reference_clouds` fields (the paper's set-up;
        ``coverage``, ``thickness``, ``wind``, ``growth`` are ignored and ``field_kwargs`` must be
        empty). ``"perlin"``: ``n`` independent :func:`cloud_field` fields. ``"moving"``: one
        Perlin cloud deck carried by ``wind`` and slowly re-shaped at rate ``growth``, for clouds
        that move and evolve from one date to the next.
    rng
        Source of all randomness.
    coverage, thickness
        Per-date cloud cover and peak opacity, as in :func:`cloud_field` (Perlin styles).
    wind
        ``(dy, dx)`` in pixels per date (``"moving"``): the clouds of date ``t + 1`` are those of
        date ``t`` shifted by ``wind`` (down and right for positive values), apart from growth.
    growth
        Rate of change of the cloud shapes per date, in [0, 1] (``"moving"``): the noise of date
        ``t`` blends field ``k`` with a new independent field ``k + 1``, ``k + φ = growth · t``,
        weights ``cos(πφ/2)`` and ``sin(πφ/2)``; both fields drift with the wind. 0 gives pure
        advection; 1 replaces the shapes completely every date.
    **field_kwargs
        ``cells``, ``octaves``, ``persistence``, ``lacunarity``, ``softness`` for the Perlin styles.

    Returns
    -------
    numpy.ndarray
        float64 array ``(n, height, width)``.
    """
    where = "cloud_series"
    rng = _check_rng(rng, where)
    h, w = _check_shape(shape, where)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"{where}: n (number of dates) must be an integer ≥ 1, got {n!r}")
    n = int(n)
    unknown = set(field_kwargs) - _FIELD_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown keyword(s) {sorted(unknown)}; valid cloud settings are "
            f"{sorted(_FIELD_KEYS)}"
        )
    if style == "reference":
        if field_kwargs:
            raise ValueError(
                f"{where}: {sorted(field_kwargs)} only apply to style='perlin' or 'moving'; "
                "drop them or change style"
            )
        return np.stack([reference_clouds((h, w), rng=rng) for _ in range(n)])
    if style == "perlin":
        return np.stack(
            [
                cloud_field((h, w), coverage=coverage, thickness=thickness, rng=rng, **field_kwargs)
                for _ in range(n)
            ]
        )
    if style == "moving":
        coverage = _check_range(coverage, "coverage", 0.0, 1.0, where)
        thickness = _check_range(thickness, "thickness", 0.0, 1.0, where)
        growth = _check_range(growth, "growth", 0.0, 1.0, where)
        wind = _check_pair(wind, "wind", where)
        kwargs = dict(field_kwargs)
        softness = _check_range(kwargs.pop("softness", 0.1), "softness", 0.0, 1.0, where)
        if softness == 0.0:
            raise ValueError(f"{where}: softness must be > 0 (a hard edge); use e.g. softness=0.01")
        settings = _noise_settings(
            (h, w),
            kwargs.get("cells", 4),
            kwargs.get("octaves", 5),
            kwargs.get("persistence", 0.5),
            kwargs.get("lacunarity", 2.0),
            where,
        )
        return _moving_series(
            (h, w),
            n,
            coverage=coverage,
            thickness=thickness,
            softness=softness,
            wind=wind,
            growth=growth,
            settings=settings,
            rng=rng,
        )
    raise ValueError(f"{where}: style must be 'reference', 'perlin' or 'moving', got {style!r}")


def apply_clouds(truth: ArrayLike, clouds: ArrayLike) -> np.ndarray:
    """Observe a ground image through cloud fields: ``I_t = C_t + (1 − C_t)∘I``.

    Parameters
    ----------
    truth
        Cloud-free ground ``I``, ``(height, width)``, values in [0, 1].
    clouds
        Opacity ``C_t``, ``(n, height, width)`` (or one ``(height, width)`` field), in [0, 1].

    Returns
    -------
    numpy.ndarray
        float64 ``(n, height, width)``; every value lies in ``[truth, 1]``.
    """
    where = "apply_clouds"
    ground = np.asarray(truth, dtype=np.float64)
    c = np.asarray(clouds, dtype=np.float64)
    if ground.ndim != 2:
        raise ValueError(
            f"{where}: truth must be one (height, width) frame, got shape {ground.shape}"
        )
    if c.ndim == 2:
        c = c[None]
    if c.ndim != 3 or c.shape[1:] != ground.shape:
        raise ValueError(
            f"{where}: clouds of shape {c.shape} do not match truth {ground.shape}; pass "
            f"(n, {ground.shape[0]}, {ground.shape[1]}) fields"
        )
    _check_unit_interval(ground, "truth", where)
    _check_unit_interval(c, "clouds", where)
    return c + (1.0 - c) * ground[None]


# --------------------------------------------------------------------------------------------
# image preparation and the d × n layout
# --------------------------------------------------------------------------------------------


def to_grey(rgb: ArrayLike) -> np.ndarray:
    """Grey level by MATLAB ``rgb2gray`` weights: ``0.2989 R + 0.5870 G + 0.1140 B``.

    Parameters
    ----------
    rgb
        Channel-last image ``(height, width, 3)`` or ``(height, width, 4)`` (the alpha channel is
        ignored), any numeric dtype. A 2-D ``(height, width)`` image is taken as already grey.
        Rasterio reads bands first: pass ``np.moveaxis(src.read(), 0, -1)``.

    Returns
    -------
    numpy.ndarray
        float64 ``(height, width)`` in the input's units (DN). Unlike MATLAB, which rounds the
        result back to the integer input type, no rounding is done (a difference ≤ 0.5 DN).
    """
    img = np.asarray(rgb)
    if img.ndim == 2:
        return img.astype(np.float64)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise ValueError(
            f"to_grey: rgb must be channel-last (height, width, 3 or 4), got shape {img.shape}; "
            "for band-first arrays pass np.moveaxis(rgb, 0, -1)"
        )
    weights = np.asarray(RGB2GRAY_WEIGHTS)
    return np.asarray(img[..., :3].astype(np.float64) @ weights)


def unit_scale(image: ArrayLike, *, max_dn: float | None = None) -> np.ndarray:
    """Scale digital numbers to [0, 1].

    Parameters
    ----------
    image
        Non-negative image in DN, any shape.
    max_dn
        The sensor's maximum DN (the paper's rule, e.g. 4095 for 12-bit GF-4 PMS). When None, the
        reference experiments' rule is used: divide by ``2**ceil(log2(observed max))``, i.e. 256 for
        8-bit data whose maximum exceeds 128.

    Returns
    -------
    numpy.ndarray
        float64 array of the same shape in [0, 1].
    """
    where = "unit_scale"
    img = np.asarray(image, dtype=np.float64)
    if img.size == 0:
        raise ValueError(f"{where}: image is empty")
    if not np.all(np.isfinite(img)):
        raise ValueError(f"{where}: image holds NaN or infinite values; fill or mask them first")
    low, high = float(img.min()), float(img.max())
    if low < 0.0:
        raise ValueError(f"{where}: image has negative values (min {low:g}); DN must be ≥ 0")
    if max_dn is None:
        if high <= 0.0:
            raise ValueError(f"{where}: image is all zero, so its scale is unknown; pass max_dn")
        divisor = 2.0 ** math.ceil(math.log2(high))
    else:
        divisor = _check_positive(max_dn, "max_dn", where)
        if high > divisor:
            raise ValueError(
                f"{where}: image maximum {high:g} exceeds max_dn={divisor:g}; raise max_dn to the "
                "sensor's true maximum DN"
            )
    return img / divisor


def stack_frames(frames: ArrayLike) -> np.ndarray:
    """Frames ``(n, height, width)`` to the solvers' matrix ``D`` of shape ``(height·width, n)``.

    Column ``t`` is frame ``t`` flattened in C order (row after row), so row ``y·width + x`` is
    pixel ``(y, x)``. The result is a C-contiguous copy.
    """
    f = np.asarray(frames)
    if f.ndim != 3:
        raise ValueError(f"stack_frames: frames must be (n, height, width), got shape {f.shape}")
    return np.ascontiguousarray(f.reshape(f.shape[0], -1).T)


def unstack_frames(D: ArrayLike, shape: tuple[int, int]) -> np.ndarray:
    """Inverse of :func:`stack_frames`: ``(height·width, n)`` to frames ``(n, height, width)``."""
    h, w = _check_shape(shape, "unstack_frames")
    m = np.asarray(D)
    if m.ndim != 2 or m.shape[0] != h * w:
        raise ValueError(
            f"unstack_frames: D of shape {m.shape} does not hold frames of shape {(h, w)}; "
            f"it needs {h * w} rows, one per pixel"
        )
    return np.ascontiguousarray(m.T.reshape(m.shape[1], h, w))


# --------------------------------------------------------------------------------------------
# whole simulations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimulatedSeries:
    """A simulated cloudy time series with its ground truth.

    Attributes
    ----------
    truth
        Cloud-free ground ``I``, ``(height, width)`` in [0, 1].
    clouds
        Cloud opacity ``C_t``, ``(n, height, width)`` in [0, 1].
    observed
        ``I_t = C_t + (1 − C_t)∘I``, ``(n, height, width)``.
    """

    truth: np.ndarray
    clouds: np.ndarray
    observed: np.ndarray

    @property
    def n(self) -> int:
        """Number of dates."""
        return int(self.observed.shape[0])

    @property
    def D(self) -> np.ndarray:  # the paper's name for the data matrix
        """The observations as the solvers' ``(d, n)`` matrix (a new array on each access)."""
        return stack_frames(self.observed)


def simulate_series(
    truth: ArrayLike,
    n: int,
    *,
    style: CloudStyle = "reference",
    rng: np.random.Generator,
    **cloud_kwargs: Any,
) -> SimulatedSeries:
    """Simulate ``n`` cloudy observations of one ground image.

    Parameters
    ----------
    truth
        Cloud-free ground, ``(height, width)`` in [0, 1].
    n
        Number of dates.
    style
        Cloud style, see :func:`cloud_series`.
    rng
        Source of all randomness.
    **cloud_kwargs
        Passed to :func:`cloud_series` (``coverage``, ``thickness``, ``wind``, ``growth``,
        ``cells``, …).

    Returns
    -------
    SimulatedSeries
    """
    ground = np.asarray(truth, dtype=np.float64)
    if ground.ndim != 2:
        raise ValueError(
            f"simulate_series: truth must be one (height, width) frame, got shape {ground.shape}"
        )
    _check_unit_interval(ground, "truth", "simulate_series")
    clouds = cloud_series(ground.shape, n, style=style, rng=rng, **cloud_kwargs)
    return SimulatedSeries(truth=ground, clouds=clouds, observed=apply_clouds(ground, clouds))


def paper_case(
    image: ArrayLike,
    n: int,
    *,
    size: int | None = 1024,
    style: CloudStyle = "reference",
    rng: np.random.Generator,
    max_dn: float | None = None,
    **cloud_kwargs: Any,
) -> SimulatedSeries:
    """The paper's simulation set-up from a cloud-free image.

    RGB(A) or grey image → grey (:func:`to_grey`) → [0, 1] (:func:`unit_scale`) → resized to
    ``size × size`` (cubic, anti-aliased) → clipped to [0, 1] → ``n`` cloudy dates
    (:func:`simulate_series`). The paper uses the Inria tile tyrol-w1 at 1024 × 1024 with n = 7.

    Parameters
    ----------
    image
        Channel-last ``(height, width, 3 or 4)`` colour or ``(height, width)`` grey image in DN.
    n
        Number of dates.
    size
        Side of the square truth; None keeps the image's own shape.
    style
        Cloud style, see :func:`cloud_series`.
    rng
        Source of all randomness.
    max_dn
        Sensor maximum DN for :func:`unit_scale`; None uses the reference rule (256 for 8-bit).
    **cloud_kwargs
        Passed to :func:`cloud_series`.

    Returns
    -------
    SimulatedSeries
    """
    grey = unit_scale(to_grey(image), max_dn=max_dn)
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise ValueError(f"paper_case: size must be a positive integer or None, got {size!r}")
        grey = resize(grey, (int(size), int(size)), order=3, mode="symmetric", anti_aliasing=True)
    truth = np.clip(grey, 0.0, 1.0)
    return simulate_series(truth, n, style=style, rng=rng, **cloud_kwargs)
