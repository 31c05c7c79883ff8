"""The mask's per-entry scores, added one band at a time: the bands' mean anomaly in units of σ
(:class:`BandMean`) and how white a brightening is (:class:`Whiteness`).

A mask over many bands holds one band's arrays at once (the pipeline's mask pass reads one
band's layers at a time); these accumulate what :func:`cloudcore.masks.classify_scores` reads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cloudcore._median import sort_columns, sorted_median

__all__ = ["BandMean", "Shade", "Whiteness", "add_bands"]


class BandMean:
    """The mean over bands of each band's anomaly in units of its σ, summed one band at a time
    (a mask over many bands holds one band's arrays at once), in float32; 0 where no band has a
    finite value.

    Parameters
    ----------
    shape
        The shape of one band's anomaly, e.g. ``(dates, rows, cols)``.
    """

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.total = np.zeros(shape, np.float32)
        self.count = np.zeros(shape, np.uint8)

    def add(self, anomaly: np.ndarray, sigma: float) -> None:
        """Add one band: its anomaly (NaN where not observed) and its σ (floored at the smallest
        float32 so that a σ of 0 cannot divide by zero)."""
        anomaly = np.asarray(anomaly)
        if anomaly.shape != self.total.shape:
            raise ValueError(f"anomaly of shape {anomaly.shape}, expected {self.total.shape}")
        scale = _band_scale(sigma)
        # One pass in a compiled loop: the float32 quotients and sums of
        # ``total += where(finite, anomaly, 0).astype(float32) / scale; count += finite``, bit
        # for bit (tested), without its three temporaries (7 against 18 ms for 7 × 1028²).
        _add_band(self.total.reshape(-1), self.count.reshape(-1), anomaly.reshape(-1), scale)

    def mean(self, *, in_place: bool = False) -> np.ndarray:
        """The mean over the bands added; with ``in_place``, computed into the sums' own array
        (the same values, no second array; the sums are then spent)."""
        return np.divide(
            self.total, np.maximum(self.count, 1), out=self.total if in_place else None
        )


def _band_scale(sigma: float) -> np.float32:
    """A band's σ as the sums divide by it: float32, floored at the smallest float32 so that a
    σ of 0 cannot divide by zero."""
    return np.float32(max(float(sigma), float(np.finfo(np.float32).tiny)))


@njit(cache=True, nogil=True)
def _add_band(
    total: np.ndarray, count: np.ndarray, anomaly: np.ndarray, scale: np.float32
) -> None:  # pragma: no cover - compiled; tested through BandMean
    for i in range(total.size):
        value = anomaly[i]
        if np.isfinite(value):
            total[i] += np.float32(value) / scale
            count[i] += 1
        else:
            total[i] += np.float32(0.0)  # as the expression adds its 0 (−0 + 0 is +0)


class Whiteness:
    """Whether each entry's brightening is white or bluish enough to be cloud or haze
    (:mod:`cloudcore.masks`): the shortest band's brightening against the largest of any
    band's, added one band at a time in the data's units (not in units of σ: the test compares
    colours, and a band's σ is how noisy it is, not how bright).

    Parameters
    ----------
    shape
        The shape of one band's anomaly, e.g. ``(dates, rows, cols)``.
    lowest
        Also keep the smallest brightening of any band, for the test that every band brightened
        (``MaskRule.every_band``): one more float32 array, only where a rule reads it.
    """

    def __init__(self, shape: tuple[int, ...], lowest: bool = False) -> None:
        self.short = np.full(shape, np.nan, np.float32)
        self.peak = np.full(shape, np.nan, np.float32)
        self.low = np.full(shape, np.nan, np.float32) if lowest else None

    def add(self, anomaly: np.ndarray, short: bool = False) -> None:
        """Add one band.

        Parameters
        ----------
        anomaly
            The band's D − L (or C + N), of the shape given; NaN where not observed.
        short
            This is the band of shortest wavelength.
        """
        anomaly = np.asarray(anomaly, dtype=np.float32)
        if anomaly.shape != self.peak.shape:
            raise ValueError(f"anomaly of shape {anomaly.shape}, expected {self.peak.shape}")
        np.fmax(self.peak, anomaly, out=self.peak)  # NaN only where no band has a value
        if self.low is not None:
            np.fmin(self.low, anomaly, out=self.low)
        if short:
            self.short[...] = anomaly

    def passes(self, ratio: float, every_band: float = 0.0) -> np.ndarray:
        """Where a brightening may be cloud or haze.

        Parameters
        ----------
        ratio
            The whiteness ratio w (``MaskRule.white``); 0: no whiteness test.
        every_band
            ``MaskRule.every_band``: also every band brightened by at least this times the
            largest brightening of any band; 0: no such test (the Whiteness must have been made
            with ``lowest`` otherwise).

        Returns
        -------
        numpy.ndarray
            Booleans: the shortest band brightened by at least ``ratio`` times the largest
            brightening of any band, or that band has no value (nothing to tell the colour by);
            and with ``every_band`` every band with a value by at least that share of it.
        """
        if ratio > 0:
            passed = ~(self.short < np.float32(ratio) * self.peak)
        else:
            passed = np.ones(self.peak.shape, bool)
        if every_band > 0:
            if self.low is None:
                raise ValueError("every_band needs a Whiteness made with lowest=True")
            passed &= ~(self.low < np.float32(every_band) * self.peak)
        return passed

    def flat(self, ratio: float, bands: np.ndarray) -> np.ndarray:
        """Where a brightening is white enough to be a cloud's: the shortest band brightened
        by at least ``ratio`` times the largest brightening of any band, and at least one other
        band has a value (one band alone has no colour to tell by).

        Parameters
        ----------
        ratio
            ``MaskRule.white_cloud_ratio``.
        bands
            How many bands have a value at each entry: the :attr:`BandMean.count` of the same
            brightenings (kept there already, not counted twice).

        Returns
        -------
        numpy.ndarray
            Booleans (False where the shortest band has no value, unlike :meth:`passes`).
        """
        return (self.short >= np.float32(ratio) * self.peak) & (bands >= 2)


class Shade:
    """How far each entry lies below the pixel's median ground in every band, for the shadow
    dark in every band (``MaskRule.shadow_flat``), added one band at a time: the bands' mean
    of (median ground − D)⁺ in units of σ (:class:`BandMean`), and whether every band with a
    ratio D / median ground has one at most ``ratio`` (``MaskRule.flat_ratio``): a byte an
    entry, not the largest ratio itself, so a mask task holds 6 bytes an entry, not 9.

    The ground is D − R, R the band's residual D − L (what the layers give back where the
    band observed: C + N − S); its median is over the dates (``nanmedian``: dates with no
    ground, NaN, left out); a pixel with a ground on fewer than three dates, or a median ground
    ≤ 0, has no ratio, and is never called dark in every band (:mod:`cloudcore._median`).

    Parameters
    ----------
    shape
        The shape of one band's values, ``(dates, rows, cols)``.
    ratio
        The largest D / median ground of every band of an entry dark in every band.
    """

    def __init__(self, shape: tuple[int, ...], ratio: float) -> None:
        self.below = BandMean(shape)
        self.ratio = float(ratio)
        # 0: no band has a ratio yet; 1: every band's is at most `ratio`; 2: one is above it.
        self.state = np.zeros(shape, np.uint8)

    def add(self, observation: np.ndarray, residual: np.ndarray, sigma: float) -> None:
        """Add one band.

        Parameters
        ----------
        observation
            The band's D, ``(dates, rows, cols)``, NaN where not observed.
        residual
            The band's D − L of the same shape (NaN where there is no ground).
        sigma
            The band's anomaly scale σ.
        """
        observation = np.ascontiguousarray(observation, dtype=np.float32)
        residual = np.ascontiguousarray(residual, dtype=np.float32)
        if observation.shape != self.state.shape or residual.shape != observation.shape:
            raise ValueError(
                f"observation {observation.shape} and residual {residual.shape}, "
                f"expected {self.state.shape}"
            )
        n = observation.shape[0]
        scale = _band_scale(sigma)
        # One compiled pass per band: NumPy's nanmedian over the dates and the four array
        # expressions after it took 2.2 s for a 1024² core of 7 dates on a busy machine.
        _add_shade(
            observation.reshape(n, -1),
            residual.reshape(n, -1),
            scale,
            np.float32(self.ratio),
            self.below.total.reshape(n, -1),
            self.below.count.reshape(n, -1),
            self.state.reshape(n, -1),
        )

    def dark(self, sigma: float) -> np.ndarray:
        """Where an entry is dark in every band: the bands' mean darkening below the median
        ground at least ``sigma`` σ and every band with a ratio at most :attr:`ratio` of it
        (booleans; False where no band has one)."""
        return (self.below.mean() >= np.float32(sigma)) & (self.state == 1)


#: Pixels a block of :func:`_add_shade` sorts at once (n × this float32 stays in L1/L2).
_SHADE_BLOCK = 512


@njit(cache=True, nogil=True)
def _add_shade(
    D: np.ndarray,
    R: np.ndarray,
    scale: np.float32,
    limit: np.float32,
    total: np.ndarray,
    count: np.ndarray,
    state: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through Shade against NumPy
    """:meth:`Shade.add` on ``(dates, pixels)`` arrays, in place: per pixel the median of its
    finite grounds D − R (:mod:`cloudcore._median`, ``numpy.nanmedian``'s; NaN with fewer than
    :data:`~cloudcore._median.MIN_DATES` or at or below 0); then per date the darkening
    max(median − D, 0) added to ``total``/``count`` as :meth:`BandMean.add` adds, and
    D / median, where it is a number, to ``state`` (1 while every band's is at most ``limit``,
    2 once one is above it). Sorted a block at a time: 0.061 s a band for a 7 × 1184 × 1024
    window on this machine, a per-pixel insertion sort about three times that."""
    n, pixels = D.shape
    # Sorted whole (contiguous, so the network vectorises): in a last, shorter block the
    # columns past its pixels hold the block before's values (or +inf), never read.
    rows = np.full((n, _SHADE_BLOCK), np.inf, np.float32)
    medians = np.empty(_SHADE_BLOCK, np.float32)
    finite = np.empty(_SHADE_BLOCK, np.int64)
    zero = np.float32(0.0)
    for p0 in range(0, pixels, _SHADE_BLOCK):
        m = min(_SHADE_BLOCK, pixels - p0)
        finite[:m] = 0
        for t in range(n):
            for i in range(m):
                v = D[t, p0 + i] - R[t, p0 + i]
                seen = v == v
                rows[t, i] = v if seen else np.inf
                finite[i] += seen
        sort_columns(rows)
        for i in range(m):
            medians[i] = sorted_median(rows, finite[i], i)
            if not medians[i] > zero:
                medians[i] = np.nan
        for t in range(n):
            for i in range(m):
                d, median = D[t, p0 + i], medians[i]
                below = median - d
                counted = below == below  # as BandMean.add: a NaN adds +0 and is not counted
                total[t, p0 + i] += (max(below, zero) if counted else zero) / scale
                count[t, p0 + i] += counted
                # 0 without a ratio, 1 at most the limit, 2 above it; the state is the largest
                # yet (a select, not branches: it vectorises).
                ratio = d / median
                code = np.uint8(ratio == ratio) + np.uint8(ratio > limit)
                state[t, p0 + i] = max(state[t, p0 + i], code)


def add_bands(x: np.ndarray, scales: np.ndarray) -> BandMean:
    """The bands (the first axis) of ``x`` in units of their σ ``scales``, added
    (:class:`BandMean`)."""
    mean = BandMean(x.shape[1:])
    for band, sigma in zip(x, np.asarray(scales, dtype=np.float64), strict=True):
        mean.add(band, float(sigma))
    return mean
