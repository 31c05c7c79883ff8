"""Real clouds on clear dates: pick (clear target, cloudy source) date pairs and paste.

A clear *target* date gets, at every pixel that the reference mask of a cloudy *source* date
calls cloud or shadow, the source date's observed value: the clouds keep their real shapes and
radiances, and the target's own clear values there are the truth an estimate is scored against.
The baselines that estimate a date's ground without a solver are here too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from cloudlab.realdata import CLEAR, CLOUD, NODATA, SHADOW

__all__ = [
    "BASELINES",
    "Pasted",
    "choose_pairs",
    "clear_median",
    "cloudy_fraction",
    "nearest_clear",
    "paste_clouds",
    "temporal_median",
    "without_source",
]


@dataclass(frozen=True)
class Pasted:
    """A series with one date's clouds pasted onto another date.

    Attributes
    ----------
    D
        ``(pixels, dates)`` with the pasted values; NaN where not observed.
    observed
        ``(pixels, dates)`` booleans after pasting (a pasted entry is observed).
    reference
        ``(pixels, dates)`` reference codes after pasting (the source's codes at pasted entries).
    target, source
        Date indices.
    pasted
        ``(pixels,)`` booleans: the target's pixels that were overwritten.
    scored
        ``(pixels,)`` booleans: pasted pixels where the target was clear (the truth exists).
    truth
        ``(pixels,)`` the target date's values before pasting.
    """

    D: np.ndarray
    observed: np.ndarray
    reference: np.ndarray
    target: int
    source: int
    pasted: np.ndarray
    scored: np.ndarray
    truth: np.ndarray


def paste_clouds(D: np.ndarray, reference: np.ndarray, target: int, source: int) -> Pasted:
    """Paste the cloud and shadow pixels of date ``source`` onto date ``target``.

    Parameters
    ----------
    D
        ``(pixels, dates)`` values, NaN where not observed.
    reference
        ``(pixels, dates)`` reference codes (see :mod:`cloudlab.realdata`).
    target, source
        Date (column) indices, different.

    Returns
    -------
    Pasted
        The new series; nothing outside the target's pasted pixels changes.
    """
    if target == source:
        raise ValueError(f"paste_clouds: target and source are the same date ({target})")
    pasted = np.isin(reference[:, source], (CLOUD, SHADOW))
    out = D.copy()
    ref = reference.copy()
    out[pasted, target] = D[pasted, source]
    ref[pasted, target] = reference[pasted, source]
    scored = pasted & (reference[:, target] == CLEAR)
    return Pasted(
        D=out,
        observed=ref != NODATA,
        reference=ref,
        target=target,
        source=source,
        pasted=pasted,
        scored=scored,
        truth=D[:, target].copy(),
    )


def without_source(pasted: Pasted) -> tuple[Pasted, np.ndarray]:
    """The pasted series with its source date left out (the ``drop-source`` protocol).

    Pasting copies the source's clouds onto the target, so with the source kept the same cloud
    sits on the same pixels on two dates: a repeated pattern that a low-rank model may take
    for ground, and that real clouds, which move, do not make.

    Parameters
    ----------
    pasted
        A series from :func:`paste_clouds`.

    Returns
    -------
    tuple
        The series without the source's column (``target`` renumbered, ``source`` -1), and the
        indices of the dates kept.
    """
    keep = np.flatnonzero(np.arange(pasted.D.shape[1]) != pasted.source)
    target = pasted.target - int(pasted.source < pasted.target)
    return (
        replace(
            pasted,
            D=pasted.D[:, keep],
            observed=pasted.observed[:, keep],
            reference=pasted.reference[:, keep],
            target=target,
            source=-1,
        ),
        keep,
    )


def cloudy_fraction(reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per date (column): the fraction of observed pixels that are cloud or shadow, and the
    fraction of pixels observed.

    Parameters
    ----------
    reference
        ``(pixels, dates)`` reference codes.

    Returns
    -------
    tuple of numpy.ndarray
        ``(cloudy, observed)``, each ``(dates,)``; cloudy is 1 for a date that observed nothing.
    """
    seen = (reference != NODATA).sum(axis=0)
    cloudy = np.isin(reference, (CLOUD, SHADOW)).sum(axis=0)
    return np.where(seen > 0, cloudy / np.maximum(seen, 1), 1.0), seen / reference.shape[0]


def choose_pairs(
    reference: np.ndarray,
    *,
    clear_max: float,
    min_observed: float,
    cloudy_min: float,
    cloudy_max: float,
    count: int,
    seed: int,
) -> list[tuple[int, int]]:
    """(target, source) date pairs: clear targets, each given a cloudy source, spread evenly.

    Targets are dates with at most ``clear_max`` of their observed pixels cloud or shadow and at
    least ``min_observed`` of the pixels observed; sources have a cloud-and-shadow fraction in
    [``cloudy_min``, ``cloudy_max``]. Both lists are shuffled by ``seed`` and paired along the
    diagonals of their table, so that ``count`` pairs use as many different dates as possible.

    Parameters
    ----------
    reference
        ``(pixels, dates)`` reference codes.
    clear_max, min_observed, cloudy_min, cloudy_max
        The thresholds above, as fractions.
    count
        Pairs wanted (fewer when fewer distinct pairs exist).
    seed
        Seed of the shuffle.

    Returns
    -------
    list of tuple of int
        ``(target, source)`` pairs, sorted by target then source.
    """
    cloudy, seen = cloudy_fraction(reference)
    targets = np.flatnonzero((cloudy <= clear_max) & (seen >= min_observed))
    sources = np.flatnonzero((cloudy >= cloudy_min) & (cloudy <= cloudy_max))
    if targets.size == 0 or sources.size == 0:
        return []
    rng = np.random.default_rng(seed)
    targets, sources = rng.permutation(targets), rng.permutation(sources)
    # Diagonals of the target × source table: diagonal k pairs target a with source a + k, so
    # the first pairs use every target once and as many different sources as there are.
    order = sorted(
        ((a, b) for a in range(targets.size) for b in range(sources.size)),
        key=lambda ab: ((ab[1] - ab[0]) % sources.size, ab[0]),
    )
    pairs = [(int(targets[a]), int(sources[b])) for a, b in order[:count]]
    return sorted(pairs)


def _nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN, on purpose
        return np.nanmedian(x, axis=axis)


def temporal_median(D: np.ndarray, reference: np.ndarray, days: np.ndarray) -> np.ndarray:
    """Per pixel, the median over all observed dates, cloudy ones included, for every date.

    Parameters
    ----------
    D
        ``(pixels, dates)``, NaN where not observed.
    reference, days
        Unused (the signature of every baseline).

    Returns
    -------
    numpy.ndarray
        ``(pixels, dates)``; NaN for a pixel never observed.
    """
    del reference, days
    return np.repeat(_nanmedian(D, axis=1)[:, None], D.shape[1], axis=1)


def clear_median(D: np.ndarray, reference: np.ndarray, days: np.ndarray) -> np.ndarray:
    """Per pixel, the median over the dates the reference calls clear, for every date.

    A pixel with no clear date falls back to :func:`temporal_median`. The reference mask is an
    oracle here: this baseline knows where the clouds are.

    Parameters
    ----------
    D
        ``(pixels, dates)``, NaN where not observed.
    reference
        ``(pixels, dates)`` reference codes.
    days
        Unused.

    Returns
    -------
    numpy.ndarray
        ``(pixels, dates)``.
    """
    clear = _nanmedian(np.where(reference == CLEAR, D, np.nan), axis=1)
    clear = np.where(np.isnan(clear), _nanmedian(D, axis=1), clear)
    return np.repeat(clear[:, None], D.shape[1], axis=1)


def nearest_clear(D: np.ndarray, reference: np.ndarray, days: np.ndarray) -> np.ndarray:
    """Per pixel and date, the value of the nearest date in time that is clear at that pixel.

    A clear entry returns itself; of two dates equally near, the earlier is taken. A pixel with
    no clear date falls back to :func:`temporal_median`. Like :func:`clear_median`, it uses the
    reference mask as an oracle.

    Parameters
    ----------
    D
        ``(pixels, dates)``, NaN where not observed.
    reference
        ``(pixels, dates)`` reference codes.
    days
        ``(dates,)`` acquisition days (any integer day count).

    Returns
    -------
    numpy.ndarray
        ``(pixels, dates)``.
    """
    days = np.asarray(days, dtype=np.int64)
    clear = reference == CLEAR
    fallback = _nanmedian(D, axis=1)
    out = np.empty(D.shape, dtype=np.float64)
    rows = np.arange(D.shape[0])
    for j in range(D.shape[1]):
        order = np.lexsort((days, np.abs(days - days[j])))  # nearest first, earlier on ties
        first = np.argmax(clear[:, order], axis=1)
        pick = order[first]
        found = clear[rows, pick]
        out[:, j] = np.where(found, D[rows, pick], fallback)
    return out


#: Baseline name -> function(D, reference, days) -> (pixels, dates) estimate.
BASELINES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "temporal-median": temporal_median,
    "nearest-clear": nearest_clear,
    "clear-median": clear_median,
}
