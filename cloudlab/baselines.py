"""Baselines of the held-out benchmark that need no solver, on all bands at once.

``temporal-median`` and ``temporal-min`` take each band on its own; ``geometric-median`` takes
the bands together (the per-pixel spatial median of the band vectors over the dates, by
Weiszfeld's iteration); ``nearest-clear`` and ``clear-median`` are the oracles of
:mod:`cloudlab.realpaste` (they read the reference mask, which a real run does not have).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from cloudlab.realpaste import clear_median, nearest_clear, temporal_median

__all__ = ["MULTIBAND_BASELINES", "ORACLES", "geometric_median"]


def _each_band(
    rule: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    def run(D: np.ndarray, reference: np.ndarray, days: np.ndarray) -> np.ndarray:
        return np.stack([rule(band, reference, days) for band in D])

    return run


def _reduce(how: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def run(D: np.ndarray, reference: np.ndarray, days: np.ndarray) -> np.ndarray:
        del reference, days
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels stay NaN
            value = how(D, axis=2)
        return np.repeat(value[:, :, None], D.shape[2], axis=2)

    return run


def geometric_median(
    D: np.ndarray, reference: np.ndarray, days: np.ndarray, iterations: int = 100
) -> np.ndarray:
    """Per pixel, the geometric median over the observed dates of the band vectors, every date.

    Parameters
    ----------
    D
        ``(bands, pixels, dates)``, NaN where not observed.
    reference, days
        Unused (the signature of every baseline).
    iterations
        Weiszfeld steps, from the per-band median.

    Returns
    -------
    numpy.ndarray
        ``(bands, pixels, dates)``.
    """
    del reference, days
    seen = np.isfinite(D).all(axis=0)  # (pixels, dates)
    x = np.where(seen[None], D, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = np.nanmedian(np.where(seen[None], D, np.nan), axis=2)  # (bands, pixels)
    for _ in range(iterations):
        dist = np.sqrt(((x - m[:, :, None]) ** 2).sum(axis=0))  # (pixels, dates)
        w = np.where(seen, 1.0 / np.maximum(dist, 1e-9), 0.0)
        total = w.sum(axis=1)
        m = np.where(total > 0, (x * w[None]).sum(axis=2) / np.maximum(total, 1e-300), np.nan)
    return np.repeat(m[:, :, None], D.shape[2], axis=2)


#: Baseline name -> function(D (bands, pixels, dates), reference (pixels, dates), days).
MULTIBAND_BASELINES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "temporal-median": _each_band(temporal_median),
    "temporal-min": _reduce(np.nanmin),
    "geometric-median": geometric_median,
    "nearest-clear": _each_band(nearest_clear),
    "clear-median": _each_band(clear_median),
}
#: The baselines that read the reference mask.
ORACLES: tuple[str, ...] = ("nearest-clear", "clear-median")
