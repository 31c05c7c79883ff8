"""Where the outputs keep the observation: the mask's clear entries (and haze, with
``keep_haze``), and the observation written there (the pipeline's ``mask.keep_clear``)."""

from __future__ import annotations

import numpy as np

from cloudcore.masks import CLEAR, HAZE

__all__ = ["keep_clear", "kept_codes"]


def kept_codes(codes: np.ndarray, keep_haze: bool = False) -> np.ndarray:
    """Where the output keeps the observation: the mask says clear, or haze with
    ``keep_haze`` (the pipeline's ``mask.keep_haze``; thin cloud still shows the ground).

    Parameters
    ----------
    codes
        Mask codes of :func:`cloudcore.masks.classify` (any shape).
    keep_haze
        Keep the observation under haze too.

    Returns
    -------
    numpy.ndarray
        Booleans of the same shape, for :func:`keep_clear`'s ``clear``.
    """
    kept = codes == CLEAR
    if keep_haze:
        kept |= codes == HAZE
    return kept


def keep_clear(
    estimate: np.ndarray, observation: np.ndarray, clear: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The observation where the mask says clear and it exists, the estimate elsewhere (the
    pipeline's ``mask.keep_clear``).

    Parameters
    ----------
    estimate
        The modelled values.
    observation
        The observed values, NaN where not observed; same shape.
    clear
        Booleans (broadcast to that shape): the mask says clear (code :data:`CLEAR`).

    Returns
    -------
    tuple of numpy.ndarray
        The values, and where the observation was kept.
    """
    kept = clear & np.isfinite(observation)
    return np.where(kept, observation, estimate), kept
