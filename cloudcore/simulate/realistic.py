"""A simulation closer to real series: a ground that changes, thin and thick clouds, shadows.

The paper's simulation (:func:`~cloudcore.simulate.paper_case`) observes one static grey ground
through clouds that only brighten it. On it a per-pixel temporal *minimum* is nearly an oracle
(any darkest-pixel rule is), which real series, with shadows and a ground that changes between
dates, do not allow (docs/REAL-CLOUDS.md). This one adds, per date ``t`` and band ``b``:

* a **changing ground** T_bt = clip(g_t·(1 + e_bt)·I_b + o_t + p_t, 0, 1): a gain g_t ~ U(0.8,
  1.2) shared by the bands (sun angle, season), a small per-band tilt e_bt ~ N(0, 0.03), an
  offset o_t ~ N(0, 0.02) and a smooth Perlin field p_t of ±``change`` (phenology in patches);
* **clouds from thin to thick**: a Perlin field per date (:func:`cloud_field`) with cover
  U(0, ``max_cover``) and peak opacity U(0.2, 1), the same opacity C_t in every band (grey).
  Covers reach 100 % by default, as in real series (8 of the 32 dates of the Romania site are
  at least 90 % cloud); with covers of at most 50 % RPCA ranked first, unlike on real sites;
* **shadows**: the pixels where C_t > 0.3, shifted by ``shadow_shift`` (the sun's direction),
  darken the ground by the factor 1 − ``shadow_depth``;

observed through the scattering model: D_bt = C_t + (1 − C_t)·T_bt·(1 − depth·S_t). The truth of
each date is its own T_bt: a method is scored on recovering the ground of that date.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from skimage.transform import resize

from cloudcore._checks import check_count
from cloudcore.simulate.clouds import cloud_field
from cloudcore.simulate.noise import perlin_noise
from cloudcore.simulate.series import unit_scale

__all__ = ["ChangingSeries", "realistic_case"]


@dataclass(frozen=True)
class ChangingSeries:
    """A simulated multi-band series whose ground changes from date to date.

    Attributes
    ----------
    truth
        ``(bands, n, height, width)``: each date's own ground T_bt in [0, 1].
    clouds, shadows
        ``(n, height, width)``: the cloud opacity C_t and the shadow indicator S_t (0 or 1).
    observed
        ``(bands, n, height, width)``: D_bt.
    """

    truth: np.ndarray
    clouds: np.ndarray
    shadows: np.ndarray
    observed: np.ndarray


def realistic_case(
    image: ArrayLike,
    n: int,
    *,
    size: int = 128,
    rng: np.random.Generator,
    change: float = 0.05,
    max_cover: float = 1.0,
    shadow_shift: tuple[int, int] | None = None,
    shadow_depth: float = 0.6,
) -> ChangingSeries:
    """Simulate ``n`` dates of a changing ground under thin and thick clouds and their shadows.

    Parameters
    ----------
    image
        Channel-last colour image in DN (each channel is a band) or a grey one.
    n
        Number of dates.
    size
        Side of the square frames (the image is resized, cubic, anti-aliased).
    rng
        Source of all randomness.
    change
        Amplitude of the smooth per-date change of the ground (reflectance units).
    max_cover
        Largest cloud cover of a date.
    shadow_shift
        (rows, cols) from a cloud to its shadow; default (size/12, size/16).
    shadow_depth
        Fraction of the ground's light a shadow takes.

    Returns
    -------
    ChangingSeries
    """
    n = check_count(n, "n (number of dates)", "realistic_case")
    pixels = np.asarray(image, dtype=np.float64)
    bands = pixels[..., :3] if pixels.ndim == 3 else pixels[..., None]
    ground = np.stack(
        [
            np.clip(resize(unit_scale(b), (size, size), order=3, anti_aliasing=True), 0, 1)
            for b in np.moveaxis(bands, -1, 0)
        ]
    )
    nb = ground.shape[0]
    gain = rng.uniform(0.8, 1.2, n)
    tilt = rng.normal(0.0, 0.03, (nb, n))
    offset = rng.normal(0.0, 0.02, n)
    patches = np.stack(
        [change * perlin_noise((size, size), cells=3, octaves=3, rng=rng) for _ in range(n)]
    )
    truth = np.clip(
        (gain * (1 + tilt))[:, :, None, None] * ground[:, None]
        + offset[None, :, None, None]
        + patches[None],
        0.0,
        1.0,
    )
    clouds = np.stack(
        [
            cloud_field(
                (size, size),
                coverage=float(rng.uniform(0.0, max_cover)),
                thickness=float(rng.uniform(0.2, 1.0)),
                rng=rng,
            )
            for _ in range(n)
        ]
    )
    dy, dx = shadow_shift if shadow_shift is not None else (size // 12, size // 16)
    shadows = np.zeros_like(clouds)
    thick = clouds > 0.3
    shadows[:, dy:, dx:] = thick[:, : size - dy, : size - dx]
    shadows[thick] = 0.0  # a pixel under its own cloud shows the cloud
    lit = truth * (1.0 - shadow_depth * shadows[None])
    observed = clouds[None] + (1.0 - clouds[None]) * lit
    return ChangingSeries(truth=truth, clouds=clouds, shadows=shadows, observed=observed)
