"""Whole simulations: a cloud-free image, observed on ``n`` dates through cloud fields.

The scattering model is ``I_t = C_t + (1 − C_t)∘I`` (CONVENTIONS §4) with the cloud-free grey
image ``I`` in [0, 1] as the truth and the cloud (opacity) field ``C_t`` of date ``t``
(:mod:`cloudcore.simulate.clouds`). :func:`paper_case` is the paper's whole set-up, from an RGB(A)
image in digital numbers to a :class:`SimulatedSeries`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from skimage.transform import resize

from cloudcore._checks import check_count, check_positive, check_unit_interval
from cloudcore.frames import stack_frames
from cloudcore.simulate.clouds import CloudStyle, cloud_series

__all__ = [
    "RGB2GRAY_WEIGHTS",
    "SimulatedSeries",
    "apply_clouds",
    "paper_case",
    "simulate_series",
    "to_grey",
    "unit_scale",
]

#: MATLAB ``rgb2gray`` weights (R, G, B), used by the reference experiments.
RGB2GRAY_WEIGHTS = (0.2989, 0.5870, 0.1140)


# --------------------------------------------------------------------------------------------
# scattering model and image preparation
# --------------------------------------------------------------------------------------------


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
    check_unit_interval(ground, "truth", where)
    check_unit_interval(c, "clouds", where)
    return c + (1.0 - c) * ground[None]


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
        divisor = check_positive(max_dn, "max_dn", where)
        if high > divisor:
            raise ValueError(
                f"{where}: image maximum {high:g} exceeds max_dn={divisor:g}; raise max_dn to the "
                "sensor's true maximum DN"
            )
    return img / divisor


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
        Cloud style, see :func:`~cloudcore.simulate.cloud_series`.
    rng
        Source of all randomness.
    **cloud_kwargs
        Passed to :func:`~cloudcore.simulate.cloud_series` (``coverage``, ``thickness``, ``wind``,
        ``growth``, ``cells``, …).

    Returns
    -------
    SimulatedSeries
    """
    ground = np.asarray(truth, dtype=np.float64)
    if ground.ndim != 2:
        raise ValueError(
            f"simulate_series: truth must be one (height, width) frame, got shape {ground.shape}"
        )
    check_unit_interval(ground, "truth", "simulate_series")
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
        Cloud style, see :func:`~cloudcore.simulate.cloud_series`.
    rng
        Source of all randomness.
    max_dn
        Sensor maximum DN for :func:`unit_scale`; None uses the reference rule (256 for 8-bit).
    **cloud_kwargs
        Passed to :func:`~cloudcore.simulate.cloud_series`.

    Returns
    -------
    SimulatedSeries
    """
    grey = unit_scale(to_grey(image), max_dn=max_dn)
    if size is not None:
        side = check_count(size, "size (or None)", "paper_case")
        grey = resize(grey, (side, side), order=3, mode="symmetric", anti_aliasing=True)
    truth = np.clip(grey, 0.0, 1.0)
    return simulate_series(truth, n, style=style, rng=rng, **cloud_kwargs)
