"""The ground no brighter than its median date: overcast dates are not ground.

A low-rank fit takes a date that is cloudy everywhere into its ground: a whole column brightened
by a cloud deck costs the nuclear norm about ‖column‖₂, the sparse layer λ‖column‖₁, which is
larger (for λ near 1/√d) whenever the cloud is spread over the column. The ground of such a date
is then the cloud, its residual D − L is near 0, and a mask read off the residual calls it clear:
on the real-cloud benchmark's sites the reference's overcast dates (≥ 90 % cloud) were called
cloud on 0–57 % of their pixels (docs/REAL-CLOUDS.md, "Overcast dates").

:func:`cap_ground` caps each pixel's ground, on the dates it was observed, at the median of its
ground over every date that has one, and moves the excess into the cloud layer, so that D = L +
C + N (− S) still holds there. A ground brighter than the pixel's median is what a cloud
absorbed into the fit looks like; a ground that truly brightened (a dry season, bare soil) is
capped too, and its departure is then in the residual, where the mask's whiteness test tells it
from a cloud and the date's offset (:mod:`cloudcore.offset`) carries it into the entries that
are filled. An entry that was not observed is left as the solve completed it: it took no cloud
in, and it has no residual for the offset to read, so a cap there would write a dry season's
ground at the median (a provider's flagged clouds, filled so, came out 3.7 times worse on the
CBERS site: docs/REAL-CLOUDS.md, "What a provider's mask buys").

With ``floor`` q it also raises each pixel's ground, where observed, to its q-quantile over the
dates and takes the deficit out of the residual (the layer ``below``): a shadow darkens the
observation, aATM's cloud layer is non-negative, so a cloud shadow has nowhere to go but the
ground, and a mask that reads the residual does not find it (docs/REAL-CLOUDS.md, "Shadows: the
ground floored"). A ground below the pixel's lower dates is what an absorbed shadow looks like.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from cloudcore._median import sort_columns, sorted_median
from cloudcore._problem import numba_threads

__all__ = ["cap_ground"]

#: Pixels per parallel block of the kernel (each block sorts into one scratch array).
_BLOCK = 1024


def cap_ground(
    L: np.ndarray,
    C: np.ndarray,
    observed: np.ndarray | None = None,
    threads: int | None = None,
    floor: float | None = None,
    below: np.ndarray | None = None,
) -> None:
    """Cap the ground at each pixel's median over the dates, where observed, the excess moved
    into the cloud layer; with ``floor``, also raise it there to a lower quantile; in place.

    Parameters
    ----------
    L
        The ground ``(pixels, dates)``, NaN where the solve returns none (pixels or dates seen
        nowhere: left out of the median, left NaN).
    C
        The cloud layer of the same shape: C + (L − median)⁺ where observed, unchanged
        elsewhere (the solvers' C is 0 where not observed).
    observed
        Boolean of the same shape, True where observed; None: every entry. Only observed
        entries are capped (and floored): where nothing was observed (a provider's flag, a
        date's footprint) the solve's ground is a completion from the other dates, which took
        no cloud or shadow in, and no offset read off the residual would give a capped one
        its departure back.
    threads
        numba threads for this call (None: numba's current setting), as
        :func:`cloudcore.decompose`'s.
    floor
        None: no floor. Else q in (0, 0.5]: each pixel's ground is raised to its q-quantile over
        the dates (:func:`numpy.nanquantile`'s linear interpolation, in float64, stored in the
        arrays' precision) and the deficit subtracted from ``below`` where observed.
    below
        The layer that takes the floor's deficit, same shape as ``L``: the signed residual
        layer (aATM's N, RPCA's C; it may be ``C`` itself). None: ``C``.

    Notes
    -----
    For the additive methods (aATM, aATM-shadow, RPCA, NN-RPCA), whose D = L + C + N (− S): ATM's
    C is an opacity. The median of an even number of dates is the mean of the middle two, as
    :func:`numpy.median`'s; a pixel with a ground on fewer than three dates is left as it is
    (the median of two is their mean). The arrays are worked on in the solvers' dates × pixels
    layout, so ``(pixels, dates)`` arrays that are transposed views of C-contiguous ones (what
    :func:`cloudcore.decompose` returns) are capped where they are; others through a copy.
    """
    below = C if below is None else below
    if below is not C and np.shares_memory(below, C):
        raise ValueError("below must be C itself or an array that does not overlap it")
    if L.shape != C.shape or below.shape != L.shape:
        raise ValueError(f"L {L.shape}, C {C.shape} and below {below.shape} must have one shape")
    if observed is not None and observed.shape != L.shape:
        raise ValueError(f"observed {observed.shape} must have L's shape {L.shape}")
    if floor is not None and not 0.0 < floor <= 0.5:
        raise ValueError(f"floor is a quantile in (0, 0.5], got {floor}")
    arrays = (L, C) if below is C else (L, C, below)
    wide = [np.ascontiguousarray(x.T) for x in arrays]
    obs = np.ones((1, 1), np.bool_) if observed is None else np.ascontiguousarray(observed.T)
    q = -1.0 if floor is None else float(floor)  # < 0: no floor (one compiled signature)
    with numba_threads(threads):
        _cap(wide[0], wide[1], wide[-1], obs, observed is not None, q)
    for x, w in zip(arrays, wide, strict=True):
        if not np.shares_memory(x, w):
            x[...] = w.T


@njit(cache=True, parallel=True, nogil=True)
def _cap(L, C, below, obs, masked, q):  # pragma: no cover - compiled
    """:func:`cap_ground` on dates × pixels arrays, in place (``q`` < 0: no floor).

    Each block of pixels is sorted over the dates (:mod:`cloudcore._median`), NaN last as
    +inf; a pixel with a ground on fewer than :data:`~cloudcore._median.MIN_DATES` dates is
    left as it is.
    """
    n, d = L.shape
    for b in prange((d + _BLOCK - 1) // _BLOCK):
        p0 = b * _BLOCK
        m = min(d, p0 + _BLOCK) - p0
        rows = np.empty((n, m), L.dtype)
        counts = np.zeros(m, np.int64)
        for j in range(n):
            for i in range(m):
                v = L[j, p0 + i]
                finite = v == v
                rows[j, i] = v if finite else np.inf
                counts[i] += finite
        sort_columns(rows)
        medians = np.empty(m, L.dtype)
        floors = np.full(m, np.nan, L.dtype)  # nothing is below NaN: nothing raised
        for i in range(m):
            k = counts[i]
            medians[i] = sorted_median(rows, k, i)  # NaN with too few: nothing is capped
            if medians[i] != medians[i]:
                continue
            if q > 0:  # NumPy's linear quantile: position (k − 1)·q between sorted values,
                # interpolated in float64 as numpy's _lerp (from the upper value for t ≥ 0.5)
                h = (k - 1) * q
                low = int(np.floor(h))
                t = h - low
                below_q = np.float64(rows[low, i])
                if t == 0:
                    floors[i] = below_q
                else:
                    above_q = np.float64(rows[low + 1, i])
                    gap = above_q - below_q
                    floors[i] = below_q + gap * t if t < 0.5 else above_q - gap * (1 - t)
        # Without a floor the deficit (0) goes to a scratch row: ``below`` is then C itself,
        # and two writes to one array would keep the loop from vectorising (twice as slow).
        sink = np.empty(m, below.dtype)
        for j in range(n):
            seen = obs[j, p0 : p0 + m] if masked else obs[0, :0]  # unread without a mask
            row = slice(p0, p0 + m)
            taker = below[j, row] if q > 0 else sink
            _bound_row(L[j, row], C[j, row], taker, medians, floors, seen, masked)


@njit(cache=True, nogil=True)
def _bound_row(ground, cloud, below, medians, floors, observed, masked):  # pragma: no cover
    """One date's pixels of a block in one pass: the ground capped at the medians, the excess
    added to ``cloud``, or raised to the floors (NaN: none), the deficit taken from ``below``,
    each where observed (everywhere if not ``masked``); an entry not observed keeps its ground.
    A pixel is over its median or under its floor, never both (floor ≤ median), so ``below``
    may be ``cloud`` itself. Selects, not branches: it vectorises."""
    for i in range(ground.size):
        value, median, floor = ground[i], medians[i], floors[i]
        seen = observed[i] if masked else True
        over = (value > median) & seen  # False where either is NaN
        under = (value < floor) & seen
        ground[i] = median if over else floor if under else value
        excess = value - median if over else 0.0  # float64: the sum rounds as the dtype's
        deficit = floor - value if under else 0.0
        cloud[i] += excess
        below[i] -= deficit
