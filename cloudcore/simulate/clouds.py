"""Cloud opacity fields in [0, 1] and cloud time series.

* :func:`reference_clouds`: the reference experiments' recipe (value noise on a 64 × 64 grid,
  gamma 4, CLAHE), kept as a preset so that the paper's numbers can be reproduced;
* :func:`cloud_field`: true gradient (Perlin) noise with coverage, thickness and softness controls,
  for any image shape;
* :func:`cloud_series`: ``n`` dates of either, or (``style="moving"``) one Perlin field advected by
  a wind and slowly re-shaped, for clouds that move and evolve from one date to the next.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy.interpolate import make_interp_spline
from skimage.exposure import equalize_adapthist
from skimage.transform import resize

from cloudcore._checks import check_count, check_pair, check_range, check_rng, check_shape
from cloudcore.simulate.noise import draw_lattices, eval_perlin, noise_settings, perlin_noise

__all__ = ["CloudStyle", "cloud_field", "cloud_series", "reference_clouds"]

CloudStyle = Literal["reference", "perlin", "moving"]

# Reference recipe constants (the authors' perlin_noise.m / simcloud.m, CONVENTIONS §4).
_REF_GRID = 64
_REF_OCTAVES = 5
_REF_GAMMA = 4.0
_REF_TILES = 8
_REF_CLIP_LIMIT = 0.01
_REF_NBINS = 256

# Keyword arguments that cloud_series forwards to cloud_field for the Perlin styles.
_FIELD_KEYS = frozenset({"cells", "octaves", "persistence", "lacunarity", "softness"})


# --------------------------------------------------------------------------------------------
# Perlin cloud fields
# --------------------------------------------------------------------------------------------


def _check_look(
    coverage: float, thickness: float, softness: float, where: str
) -> tuple[float, float, float]:
    """Validate the settings that turn noise into opacity (shared by every Perlin style)."""
    coverage = check_range(coverage, "coverage", 0.0, 1.0, where)
    thickness = check_range(thickness, "thickness", 0.0, 1.0, where)
    softness = check_range(softness, "softness", 0.0, 1.0, where)
    if softness == 0.0:
        raise ValueError(f"{where}: softness must be > 0 (a hard edge); use e.g. softness=0.01")
    return coverage, thickness, softness


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
    coverage, thickness, softness = _check_look(coverage, thickness, softness, "cloud_field")
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
    """One cloud field made with the reference experiments' recipe (CONVENTIONS §4).

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
    rng = check_rng(rng, where)
    h, w = check_shape(shape, where)
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
    wind: tuple[float, float],
    growth: float,
    rng: np.random.Generator,
    softness: float = 0.1,
    cells: float | tuple[float, float] = 4,
    octaves: int = 5,
    persistence: float = 0.5,
    lacunarity: float = 2.0,
) -> np.ndarray:
    """Advected and slowly re-shaped Perlin clouds; see :func:`cloud_series`."""
    where = "cloud_series"
    coverage, thickness, softness = _check_look(coverage, thickness, softness, where)
    growth = check_range(growth, "growth", 0.0, 1.0, where)
    wind = check_pair(wind, "wind", where)
    settings = noise_settings(shape, cells, octaves, persistence, lacunarity, where)
    # Date t blends noise fields k and k+1 with k + φ = growth·t; each further field is a new
    # independent draw, so a long series keeps evolving instead of cycling back.
    phase = growth * np.arange(n, dtype=np.float64)
    n_fields = int(np.floor(phase[-1])) + 2 if growth > 0.0 else 1
    # Each field's lattice is drawn once and re-evaluated at every date, so that all dates sample
    # one and the same field, carried by the wind.
    plans = [draw_lattices(settings.octaves, rng) for _ in range(n_fields)]
    out = np.empty((n, *shape))
    for t in range(n):
        # Sampling at −t·wind moves the content by +wind per date.
        off = (-t * wind[0], -t * wind[1])
        k = int(np.floor(phase[t]))
        frac = float(phase[t] - k)
        noise = eval_perlin(shape, plans[k], settings, off)
        if frac > 0.0:
            # cos/sin weights keep the variance of the blend of two independent fields constant,
            # so coverage and texture do not drift between pure and blended dates.
            angle = 0.5 * np.pi * frac
            noise = np.cos(angle) * noise + np.sin(angle) * eval_perlin(
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
    rng = check_rng(rng, where)
    h, w = check_shape(shape, where)
    n = check_count(n, "n (number of dates)", where)
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
        return _moving_series(
            (h, w),
            n,
            coverage=coverage,
            thickness=thickness,
            wind=wind,
            growth=growth,
            rng=rng,
            **field_kwargs,
        )
    raise ValueError(f"{where}: style must be 'reference', 'perlin' or 'moving', got {style!r}")
