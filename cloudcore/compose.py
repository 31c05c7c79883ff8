"""The cloud-free value of every entry from the observation, the ground and one shared mask.

A decomposition's ground L is a model: written everywhere, it changes clear pixels too (on real
series by r 0.1–0.2 of the observation, docs/REAL-CLOUDS.md). What a user expects of a
cloud-free image is the observation wherever it saw the ground, and a model only where it did
not. So the value written for an entry follows the mask's code for its pixel and date, one code
shared by every band of the acquisition (clouds and shadows sit on the same pixels in every
band; :func:`cloudcore.classify` decides them from all bands together):

* **clear** (0): the observation, as observed;
* **haze** (1): thin cloud over a ground that is still seen. ``haze="invert"`` inverts the
  scattering model of the paper, D = C + (1 − C)∘L, with one opacity α per pixel and date for
  all bands (a cloud is grey): L = (D − α)/(1 − α). α is each band's (D − L₀)/(1 − L₀) against
  the decomposition's ground L₀, the median over bands, averaged over a small window of haze
  entries of the same date (thin cloud varies slowly; the observation keeps the texture).
  ``haze="ground"`` writes the ground, ``haze="observed"`` the observation;
* **cloud** (2) and **shadow** (3): the ground (nothing of the ground was seen);
* **no data** (255): the ground (the date did not observe the pixel).

Where the observation is missing in a band the ground is written, whatever the code. With
``offset`` (a scale in pixels) an entry the date observed but the ground is written for (cloud,
shadow, haze written as the ground) gets the date's own departure from the ground too, spread
from the clear entries kept around it (:func:`cloudcore.offset.clear_offset`).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from cloudcore.kept import keep_clear, kept_codes
from cloudcore.masks import HAZE

__all__ = ["HAZE_FILLS", "HazeFill", "compose", "haze_opacity"]

#: How an entry the mask calls haze is written (see the module docstring).
HazeFill = Literal["invert", "ground", "observed"]
HAZE_FILLS: tuple[HazeFill, ...] = get_args(HazeFill)

#: Largest opacity inverted: (D − α)/(1 − α) divides by 1 − α, and above this the noise of D is
#: amplified more than 5×; such an entry is cloud, not haze.
MAX_OPACITY = 0.8


def haze_opacity(
    observation: np.ndarray, ground: np.ndarray, where: np.ndarray, window: int = 5
) -> np.ndarray:
    """One opacity α per entry, shared by the bands, over the entries ``where`` is True.

    Parameters
    ----------
    observation, ground
        ``(bands, dates, rows, cols)`` in [0, 1]; NaN where not observed (observation) or not
        modelled (ground).
    where
        ``(dates, rows, cols)`` booleans: the entries to estimate (the haze entries).
    window
        Side in pixels of the square over which α is averaged within a date (1: no averaging).

    Returns
    -------
    numpy.ndarray
        ``(dates, rows, cols)`` float64 α in [0, :data:`MAX_OPACITY`], 0 outside ``where``.
    """
    from scipy.ndimage import uniform_filter

    with np.errstate(invalid="ignore", divide="ignore"):
        per_band = (observation - ground) / np.maximum(1.0 - ground, 1e-6)
    finite = np.isfinite(per_band).any(axis=0)
    alpha = np.zeros(where.shape)
    chosen = where & finite
    if chosen.any():
        alpha[chosen] = np.nanmedian(per_band[:, chosen], axis=0)
    alpha = np.clip(alpha, 0.0, MAX_OPACITY)
    if window > 1:
        # The mean of α over the window's haze entries only (normalised convolution per date).
        size = (1, window, window)
        weight = uniform_filter(chosen.astype(np.float64), size=size, mode="nearest")
        total = uniform_filter(alpha * chosen, size=size, mode="nearest")
        alpha = np.where(chosen, total / np.maximum(weight, 1e-12), 0.0)
    return np.where(chosen, alpha, 0.0)


def compose(
    observation: np.ndarray,
    ground: np.ndarray,
    codes: np.ndarray,
    *,
    haze: HazeFill = "invert",
    window: int = 5,
    offset: float | None = None,
    times: np.ndarray | None = None,
) -> np.ndarray:
    """The cloud-free values of a series: the observation where the mask says clear, the haze
    inverted (or as ``haze`` says), the ground elsewhere.

    Parameters
    ----------
    observation
        ``(bands, dates, rows, cols)`` observed values in [0, 1], NaN where not observed.
    ground
        The decomposition's ground of the same shape (e.g. ``Decomposition.ground`` reshaped).
    codes
        ``(dates, rows, cols)`` mask codes of :func:`cloudcore.classify`, shared by the bands.
    haze
        ``"invert"``, ``"ground"`` or ``"observed"`` (module docstring).
    window
        The averaging window of :func:`haze_opacity`.
    offset
        None, or the scale in pixels (:func:`cloudcore.offset.clear_offset`) over which the
        date's departure from the ground is spread from its kept clear entries to those the
        ground is written for (module docstring).
    times
        None, or the dates' times: where the ground is written over an observation it is first
        raised by the pixel's own departure from it on its nearest kept dates before and after
        (:func:`cloudcore.departure.interpolated_departure`, the pipeline's
        ``mask.interpolate``), and the offset is spread from what is left.

    Returns
    -------
    numpy.ndarray
        ``(bands, dates, rows, cols)`` float64 in [0, 1] (NaN where the ground is NaN and the
        observation is not kept).
    """
    if haze not in HAZE_FILLS:
        raise ValueError(f"compose: haze must be one of {HAZE_FILLS}, got {haze!r}")
    obs = np.asarray(observation, dtype=np.float64)
    ground64 = np.asarray(ground, dtype=np.float64)
    out = ground64.copy()
    if obs.shape != out.shape or obs.shape[1:] != codes.shape:
        raise ValueError(
            f"compose: observation {obs.shape}, ground {out.shape} and codes {codes.shape} differ"
        )
    kept = kept_codes(codes, keep_haze=haze == "observed")
    inverted = np.zeros(obs.shape, dtype=bool)
    if haze == "invert":
        hazy = codes == HAZE
        alpha = haze_opacity(obs, out, hazy, window)
        with np.errstate(invalid="ignore"):
            inverted_values = np.clip((obs - alpha) / (1.0 - alpha), 0.0, 1.0)
        inverted = np.broadcast_to(hazy, obs.shape) & np.isfinite(obs)
        out[inverted] = inverted_values[inverted]
    if times is not None:  # as the pipeline's mask pass: where observed and not inverted
        from cloudcore.departure import raised_ground

        ground64 = raised_ground(obs, ground64, kept, np.asarray(times, dtype=np.float64))
        raised = np.isfinite(obs) & ~inverted
        out[raised] = np.clip(ground64[raised], 0.0, 1.0)
    # The observation where the mask says clear (and haze, kept as observed): as the pipeline's
    # mask pass writes it (cloudcore.kept.kept_codes, keep_clear). Its offset differs slightly:
    # the pipeline reads the residual from the solved layers (D − L with L unclipped, to the
    # solver's tolerance) where this takes the observation minus the clipped ground.
    out, _ = keep_clear(out, obs, kept)
    if offset is not None:
        kept_all = np.broadcast_to(kept, obs.shape)
        out = _with_offset(out, obs, ground64, kept_all, inverted, offset)
    return out


def _with_offset(
    out: np.ndarray,
    obs: np.ndarray,
    ground: np.ndarray,
    kept: np.ndarray,
    inverted: np.ndarray,
    scale: float,
) -> np.ndarray:
    """``out`` with :func:`cloudcore.offset.clear_offset` of the ``kept`` observed entries
    added where it is the ground over an observed entry (neither kept nor haze ``inverted``),
    clipped to [0, 1]; ``scale`` is :func:`~cloudcore.offset.clear_offset`'s."""
    from cloudcore.offset import clear_offset

    seen = np.isfinite(obs)
    evidence = kept & seen
    with np.errstate(invalid="ignore"):
        shift = clear_offset(obs - ground, evidence, scale=scale)
    written = seen & ~evidence & ~inverted
    return np.where(written, np.clip(ground + shift, 0.0, 1.0), out)
