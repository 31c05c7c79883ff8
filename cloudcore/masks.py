"""Where the clouds were: a cloud / haze / shadow mask from a decomposition's sparse layers.

GF-4 has no official cloud mask; the decomposition already holds one. Per entry (pixel, date),
the *anomaly* is how far the observation departs from the low-rank ground: A = C + N above it
(cloud and haze brighten) and S below it (shadows darken: the layer of
:data:`cloudcore.SHADOW_METHODS` and of :func:`cloudcore.refine`; for the other methods the
residual below the ground, L − D = −(C + N)). With β = 1 and a tile's λ
(~1e-3), aATM's N is bounded by λ/β (at the optimum an entry's residual r splits as
C = shrink(r, λ/β), N = r − C), so N alone is not haze: the brightening is C + N, and its size
tells thick cloud from thin haze.

The thresholds are relative to the scene, not absolute reflectances: in units of the *anomaly
scale* σ, 1.4826 × the median of |D − L| over the scene's observed entries where D < L. Clouds
and haze only brighten, so the entries below the ground are clear ones (and the rare shadow):
σ measures how far clear ground departs from the low-rank fit (noise, registration,
phenology) even when most entries are cloudy (in the paper's simulation 8 % of them are clear;
the median of all |D − L| was 9x larger there). An entry is

* **cloud** (2) where A ≥ ``cloud``·σ,
* **shadow** (3) where S ≥ ``shadow``·σ (and not cloud),
* **haze** (1) where A ≥ ``haze``·σ (and neither),
* **clear** (0) otherwise, and **no data** (255) where not observed.

With a *whiteness* ratio w > 0 (``MaskRule.white``), a brightening counts as cloud or haze only
where it is white or bluish: the shortest band brightened by at least w times the most any band
brightened, in the data's own units (:class:`Whiteness`). Cloud adds about the same reflectance
to every solar band and haze adds more at short wavelengths (scattering falls with wavelength),
whereas the ground's own changes brighten the long bands far more than the blue: a crop or
forest greening in the near infrared, bare soil, harvest or drying in the red and SWIR. The
same premise is behind Fmask's whiteness and HOT tests (Zhu & Woodcock 2012; Zhang, Guindon &
Cihlar 2002). It needs the bands in units that are roughly comparable (DN fractions of one
sensor, radiance over a common reference, or reflectance). The same premise, turned round,
lets a flat brightening be cloud from a lower threshold (``MaskRule.white_cloud``): where the
shortest band brightened by at least ``white_cloud_ratio`` (0.7) of the most any band did.

Several bands are combined by averaging A/σ and S/σ over the bands first, so one noisy band
does not decide. An opening by a (2·``radius`` + 1)² square then removes cloud and shadow
specks smaller than the square (they become haze or clear by the rules above). With a shadow
edge (``MaskRule.shadow_edge``) a shadow then extends into the entries next to it darkened by
at least that lower threshold, up to ``edge_reach`` pixels (hysteresis, as in edge detection):
a penumbra is a shadow's, an isolated entry that dark is not. Beside a cloud
(``MaskRule.shadow_near``, within ``near_reach`` pixels of a cloud of the same date) an entry
is shadow from a lower threshold, measured from its date's darkening around it (a date darker
as a whole is not a shadow): a cloud casts its shadow on its own date, a little way off. With
ground that stays (``MaskRule.persist``, :func:`persistent_ground`) a brightening that holds its
place and shape on the nearest acquisitions of other days, before and after, is ground (a
field laid bare, snow), not cloud: a cloud does not come back to the same pixels in the same
shape a day later, and the ground's own changes do. The factors were chosen on real cloudy
series with reference masks (docs/REAL-CLOUDS.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cloudcore._morphology import dilate, extend, opening
from cloudcore.anomaly import result_scale
from cloudcore.catalog import (
    MASK_BRIGHT_LEVEL,
    MASK_CLOUD,
    MASK_EDGE_REACH,
    MASK_EVERY_BAND,
    MASK_FLAT_RATIO,
    MASK_FLAT_REACH,
    MASK_GROW,
    MASK_HAZE,
    MASK_LEVEL_BELOW,
    MASK_NEAR_REACH,
    MASK_PERSIST,
    MASK_PERSIST_COVER,
    MASK_PERSIST_REACH,
    MASK_PERSIST_SPILL,
    MASK_RADIUS,
    MASK_SHADOW,
    MASK_SHADOW_EDGE,
    MASK_SHADOW_FLAT,
    MASK_SHADOW_NEAR,
    MASK_WHITE,
    MASK_WHITE_CLOUD,
    MASK_WHITE_CLOUD_RATIO,
)
from cloudcore.mask_scores import BandMean, Shade, Whiteness, add_bands
from cloudcore.persistence import (
    Neighbours,
    neighbour_scores,
    other_day_neighbours,
    persistent_ground,
)
from cloudcore.result import Decomposition

__all__ = [
    "CLEAR",
    "CLOUD",
    "HAZE",
    "NODATA",
    "SHADOW",
    "BandMean",
    "MaskRule",
    "Neighbours",
    "Whiteness",
    "classify",
    "classify_result",
    "classify_scores",
    "darkening_level",
    "neighbour_scores",
    "other_day_neighbours",
    "persistent_ground",
    "whiteness_tests",
]

CLEAR, HAZE, CLOUD, SHADOW, NODATA = 0, 1, 2, 3, 255


@dataclass(frozen=True)
class MaskRule:
    """Thresholds of :func:`classify` in units of the anomaly scale σ, and the opening radius.

    The defaults were measured (docs/REAL-CLOUDS.md, ``python -m cloudlab experiment
    configs/real-clouds.yaml``).
    """

    cloud: float = MASK_CLOUD
    haze: float = MASK_HAZE
    shadow: float = MASK_SHADOW
    radius: int = MASK_RADIUS
    #: Pixels by which cloud and shadow grow (a (2·grow + 1)² dilation after the opening) into
    #: the entries that are not already cloud or shadow: a cloud's rim is thinner than its core
    #: but is not clear ground (Fmask grows its clouds by 3 px for the same reason).
    grow: int = MASK_GROW
    #: The whiteness ratio w (:class:`Whiteness`): a brightening is cloud or haze only where the
    #: shortest band brightened by at least w times the most any band did; 0: every brightening.
    white: float = MASK_WHITE
    #: Every band brightened: a brightening counts as cloud or haze only where every band with
    #: a value brightened by at least this times the most any band did (:class:`Whiteness`,
    #: the same gate as ``white``); 0: no test. A cloud brightens every band of a land pixel
    #: about alike (D − L = C(1 − L) in each); the ground's own changes seldom do.
    every_band: float = MASK_EVERY_BAND
    #: A shadow's edge: the shadow extends into neighbouring entries darkened by at least this
    #: many σ (a lower threshold, hysteresis), one pixel a step, at most ``edge_reach`` pixels
    #: from where it reached ``shadow``; 0: no edges. A shadow's penumbra and its dimmer parts
    #: are darkened less than its core, and an isolated entry that dark is not a shadow.
    shadow_edge: float = MASK_SHADOW_EDGE
    edge_reach: int = MASK_EDGE_REACH
    #: White clouds at a lower threshold: a brightening whose shortest band brightened by at
    #: least ``white_cloud_ratio`` of the most any band did (flat across the bands, as a cloud
    #: brightens them; the ground's own changes seldom are) is cloud from this many σ, below
    #: ``cloud``; 0: off.
    white_cloud: float = MASK_WHITE_CLOUD
    white_cloud_ratio: float = MASK_WHITE_CLOUD_RATIO
    #: A shadow beside its cloud: an entry darker than its date around it
    #: (:func:`darkening_level`) by at least this many σ, within ``near_reach`` pixels of a
    #: cloud of the same date, is shadow (below ``shadow``: beside a cloud is where a darkening
    #: is most likely its shadow); 0: off.
    shadow_near: float = MASK_SHADOW_NEAR
    near_reach: int = MASK_NEAR_REACH
    #: A shadow dark in every band: an entry the rest of the rule calls clear, within
    #: ``flat_reach`` pixels of a cloud of its date, whose bands are darkened below the pixel's
    #: median ground by at least this many σ on their mean and each to at most ``flat_ratio``
    #: of it (:class:`~cloudcore.mask_scores.Shade`), is shadow; 0: off.
    shadow_flat: float = MASK_SHADOW_FLAT
    flat_ratio: float = MASK_FLAT_RATIO
    flat_reach: int = MASK_FLAT_REACH
    #: A date's brightening level: before the thresholds, the mean brightening of the entries
    #: of the same date within this many pixels (a square) brightened by less than
    #: ``level_below`` σ is taken out of each entry's (:func:`darkening_level`'s mean, of the
    #: brightening); 0: off. A date brighter across the scene than the ground is not cloud
    #: where it is no brighter than around it.
    bright_level: int = MASK_BRIGHT_LEVEL
    level_below: float = MASK_LEVEL_BELOW
    #: Ground that stays (:func:`persistent_ground`): the fraction of its own brightening a
    #: flagged pixel must keep on the nearest acquisitions of other days; 0: off. Within
    #: ``persist_reach`` pixels, at least ``persist_cover`` of the flagged pixels must keep it
    #: and at most ``persist_spill`` of the unflagged ones be brightened by ``haze`` σ there.
    persist: float = MASK_PERSIST
    persist_reach: int = MASK_PERSIST_REACH
    persist_cover: float = MASK_PERSIST_COVER
    persist_spill: float = MASK_PERSIST_SPILL

    @property
    def reads_whiteness(self) -> bool:
        """Whether the rule reads the bands' whiteness (:class:`Whiteness`)."""
        return self.white > 0 or self.white_cloud > 0 or self.every_band > 0

    @property
    def gates_colour(self) -> bool:
        """Whether a brightening's colour gates it (``white`` or ``every_band``)."""
        return self.white > 0 or self.every_band > 0

    @property
    def context(self) -> int:
        """How far (pixels) the codes of an entry depend on the scores around it on its date:
        the brightening level's square, the opening's erosion and dilation, the square of
        ground that stays, the shadow's edge and the growth, and the reach of a shadow dark in
        every band (from the grown clouds)."""
        edge = self.edge_reach if self.shadow_edge > 0 else 0
        near = self.near_reach if self.shadow_near > 0 else 0
        flat = self.flat_reach if self.shadow_flat > 0 else 0
        persist = self.persist_reach if self.persist > 0 else 0
        return self.bright_level + 2 * self.radius + persist + max(edge, near, flat) + self.grow


def classify(
    brightening: np.ndarray,
    darkening: np.ndarray | None,
    scales: np.ndarray,
    observed: np.ndarray,
    rule: MaskRule = MaskRule(),
    short_band: int | None = None,
    neighbours: np.ndarray | None = None,
    *,
    observations: np.ndarray | None = None,
    residuals: np.ndarray | None = None,
) -> np.ndarray:
    """Mask codes per date and pixel from the bands' anomalies.

    Parameters
    ----------
    brightening
        A = C + N per band: ``(bands, dates, rows, cols)``; NaN where not observed.
    darkening
        S per band, same shape (None: no shadow layer, no shadow class).
    scales
        The anomaly scale σ of each band (:func:`~cloudcore.anomaly.anomaly_scale` over the
        whole scene), > 0.
    observed
        ``(dates, rows, cols)`` booleans: the date observed the pixel (in some band).
    rule
        Thresholds and opening radius.
    short_band
        The index of the band of shortest wavelength (:class:`Whiteness`): required with
        ``rule.white`` or ``rule.white_cloud`` > 0 and more than one band (the bands' order
        says nothing of their wavelengths), not read otherwise.
    neighbours
        ``(dates, 2)`` each date's nearest dates of other days (:func:`other_day_neighbours`),
        which ``rule.persist`` > 0 reads; None: none (a series of one day).
    observations, residuals
        D and D − L per band, of ``brightening``'s shape, NaN where not observed (or no
        ground): what a shadow dark in every band (``rule.shadow_flat`` > 0, with
        ``darkening``) reads (:class:`~cloudcore.mask_scores.Shade`); required then.

    Returns
    -------
    numpy.ndarray
        ``(dates, rows, cols)`` uint8: 0 clear, 1 haze, 2 cloud, 3 shadow, 255 no data.
    """
    added = add_bands(brightening, scales)
    shade = None
    if rule.shadow_flat > 0 and darkening is not None:
        if observations is None or residuals is None:
            raise ValueError(
                f"a rule with shadow_flat={rule.shadow_flat:g} needs the bands' observations and "
                "residuals (or shadow_flat=0)"
            )
        sums = Shade(brightening.shape[1:], rule.flat_ratio)
        for d, r, sigma in zip(observations, residuals, np.asarray(scales, float), strict=True):
            sums.add(d, r, float(sigma))
        shade = sums.dark(rule.shadow_flat)
    bright = added.mean()
    dark = add_bands(darkening, scales).mean() if darkening is not None else None
    around = None
    if rule.persist > 0 and neighbours is not None:
        around = neighbour_scores(bright, observed, neighbours)
    if not rule.reads_whiteness:
        return classify_scores(bright, dark, observed, rule, neighbours=around, shade=shade)
    if short_band is None and len(brightening) > 1:
        raise ValueError(
            f"a rule with white={rule.white:g}, white_cloud={rule.white_cloud:g} or every_band="
            f"{rule.every_band:g} needs short_band: which of the {len(brightening)} bands has the "
            "shortest wavelength"
        )
    whiteness = Whiteness(brightening.shape[1:], lowest=rule.every_band > 0)
    for b, band in enumerate(brightening):
        whiteness.add(band, short=b == (short_band or 0))
    white, flat = whiteness_tests(whiteness, rule, added.count)
    return classify_scores(bright, dark, observed, rule, white, flat, around, shade)


def whiteness_tests(
    whiteness: Whiteness, rule: MaskRule, bands: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The whiteness tests a rule reads (:func:`classify_scores`'s ``white`` and ``flat``):
    :meth:`Whiteness.passes` of ``rule.white`` where > 0 and :meth:`Whiteness.flat` of
    ``rule.white_cloud_ratio`` where ``rule.white_cloud`` > 0, else None.

    Parameters
    ----------
    whiteness
        The bands' brightenings, added.
    rule
        The mask rule.
    bands
        How many bands have a value at each entry (:attr:`BandMean.count` of the brightenings).

    Returns
    -------
    tuple
        ``white``, ``flat``.
    """
    white = whiteness.passes(rule.white, rule.every_band) if rule.gates_colour else None
    flat = whiteness.flat(rule.white_cloud_ratio, bands) if rule.white_cloud > 0 else None
    return white, flat


def classify_scores(
    bright: np.ndarray,
    dark: np.ndarray | None,
    observed: np.ndarray,
    rule: MaskRule = MaskRule(),
    white: np.ndarray | None = None,
    flat: np.ndarray | None = None,
    neighbours: Neighbours | None = None,
    shade: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`classify` from the bands' mean anomalies in units of σ (:class:`BandMean`):
    ``bright`` and ``dark`` are the ``(dates, rows, cols)`` means of A/σ and S/σ (``dark`` None:
    no shadow class); ``observed``, ``rule`` and the codes returned are :func:`classify`'s.
    ``white`` (:meth:`Whiteness.passes` of ``rule.white``) is where a brightening may be cloud or
    haze, required when ``rule.white`` > 0; ``flat`` (:meth:`Whiteness.flat` of
    ``rule.white_cloud_ratio``) where it is
    white enough to be cloud from ``rule.white_cloud`` σ, required when that is > 0
    (:func:`whiteness_tests` gives both); neither is read otherwise. ``neighbours`` (the
    brightening of each date's nearest acquisitions of other days, :func:`neighbour_scores`) is
    what ``rule.persist`` > 0 reads; None: no date has one (a series of one day), and the rule
    changes nothing. ``shade`` (:meth:`~cloudcore.mask_scores.Shade.dark` of
    ``rule.shadow_flat``, the Shade made with ``rule.flat_ratio``) is where an entry is dark in
    every band, required when ``rule.shadow_flat`` > 0 and there is a shadow class, not read
    otherwise."""
    if rule.white_cloud > 0 and flat is None:
        raise ValueError(f"a rule with white_cloud={rule.white_cloud:g} needs the bands' whiteness")
    own = bright  # the brightening as measured, before the level and the whiteness test
    if rule.bright_level > 0:
        # Counted: entries brightened less than a cloud's, so a cloud does not raise the level
        # of its own date around it. NaN (unobserved) is never counted.
        counted = observed & (bright < np.float32(rule.level_below))
        bright = bright - darkening_level(bright, counted, rule.bright_level)
    if rule.gates_colour:
        if white is None:
            raise ValueError(
                f"a rule with white={rule.white:g} or every_band={rule.every_band:g} needs the "
                "bands' whiteness"
            )
        bright = np.where(white, bright, np.float32(0.0))
    codes = np.full(bright.shape, CLEAR, dtype=np.uint8)
    codes[bright >= rule.haze] = HAZE
    cloud = bright >= rule.cloud
    if flat is not None and rule.white_cloud > 0:
        # After the gate: a white cloud passes the whiteness test too, whatever the two ratios
        # (so a brightening is never cloud at 3σ and clear at 6σ).
        cloud |= (bright >= rule.white_cloud) & flat
    shadow = (dark >= rule.shadow) & ~cloud if dark is not None else None
    if rule.radius > 0:
        # Within each date; in place, one scratch array for both (cloudcore._morphology).
        scratch = np.empty_like(cloud)
        opening(cloud, rule.radius, out=cloud, scratch=scratch)
        if shadow is not None:
            opening(shadow, rule.radius, out=shadow, scratch=scratch)
    if rule.persist > 0 and neighbours is not None:
        # Before the shadows beside a cloud: ground that stays casts none.
        ground = persistent_ground(own, cloud | (codes == HAZE), observed, neighbours, rule)
        cloud &= ~ground
        codes[ground] = CLEAR
        if shadow is not None:
            shadow &= ~ground
    if shadow is not None and dark is not None and rule.shadow_near > 0:
        beside = dilate(cloud, rule.near_reach) & ~cloud
        # Only the dates with a cloud have pixels beside one. In place: the level becomes the
        # darkening beyond it (one float array, not two).
        clouded = np.asarray(beside.any(axis=(-2, -1)))
        beyond = darkening_level(dark, observed & ~cloud, rule.near_reach, clouded)
        np.subtract(dark, beyond, out=beyond)
        beside &= beyond >= rule.shadow_near
        del beyond
        shadow |= beside
    if shadow is not None and dark is not None and rule.shadow_edge > 0:
        shadow = extend(shadow, (dark >= rule.shadow_edge) & ~cloud, rule.edge_reach)
    if rule.grow > 0:
        # Shadow grows only where cloud did not reach: a pixel is one or the other.
        cloud = dilate(cloud, rule.grow) & observed
        if shadow is not None:
            shadow = dilate(shadow, rule.grow) & observed & ~cloud
    if shadow is not None and rule.shadow_flat > 0:
        if shade is None:
            raise ValueError(
                f"a rule with shadow_flat={rule.shadow_flat:g} needs the bands' shade (Shade)"
            )
        # Last, and only where the rest calls clear: neither grown nor kept from haze.
        shadow |= shade & dilate(cloud, rule.flat_reach) & (codes == CLEAR) & observed & ~cloud
    if shadow is not None:
        codes[shadow] = SHADOW
    codes[cloud] = CLOUD
    codes[~observed] = NODATA
    return codes


def darkening_level(
    dark: np.ndarray, counted: np.ndarray, reach: int, dates: np.ndarray | None = None
) -> np.ndarray:
    """How much darker each date is around each pixel than its ground, at least 0: the mean of
    ``dark`` over the ``counted`` entries of the (2·``reach`` + 1)² square around it on its
    date (0 where it counts none). A date darker as a whole (a lower sun, a clearer or hazier
    atmosphere than the ground's dates) darkens every pixel alike; a shadow darkens a few
    pixels more than those around them. :func:`classify_scores` reads a brightening's level
    (``MaskRule.bright_level``) from it too: the same mean, of the brightening.

    Parameters
    ----------
    dark
        ``(dates, rows, cols)`` darkening in units of σ (NaN where unobserved is fine).
    counted
        Booleans of the same shape: the entries the mean reads (observed, not cloud).
    reach
        The square's half-width in pixels.
    dates
        ``(dates,)`` booleans: the dates whose level is wanted (None: every date); the others'
        are 0.

    Returns
    -------
    numpy.ndarray
        ``(dates, rows, cols)`` levels, ``dark``'s dtype.

    Notes
    -----
    The sums are exact (:func:`cloudcore._window.window_means`: integers), so a pixel's level
    depends only on the entries within ``reach`` of it, not on where the array starts, and a
    tile classified with that margin gives the whole scene's codes bit for bit.
    """
    from cloudcore._window import window_means

    wanted = np.ones(dark.shape[0], bool) if dates is None else np.asarray(dates, bool)
    level = np.zeros(dark.shape, dtype=dark.dtype)
    window_means(dark, np.ascontiguousarray(counted), reach, 0.0, wanted, level)
    return level


def classify_result(
    results: Decomposition | Sequence[Decomposition],
    frame: tuple[int, int],
    rule: MaskRule = MaskRule(),
    observed: np.ndarray | None = None,
    short_band: int | None = None,
) -> np.ndarray:
    """:func:`classify` of the decompositions of one image's bands (or of one band).

    Each band's σ is its own (:func:`~cloudcore.anomaly.result_scale`). The darkening is a
    band's ``S``, or L − D = −(C + N) for a method without a shadow layer.

    Parameters
    ----------
    results
        A :class:`cloudcore.Decomposition` of D (pixels × dates), pixels in row-major order of
        ``frame``, or a sequence of them, one per band.
    frame
        (rows, cols) of the image.
    rule
        Thresholds and opening radius.
    observed
        (pixels, dates) booleans, one for all bands (None: where the first band's L is finite).
    short_band
        :func:`classify`'s.

    Returns
    -------
    numpy.ndarray
        ``(dates, rows, cols)`` uint8 codes.
    """
    bands = [results] if isinstance(results, Decomposition) else list(results)
    seen = np.isfinite(bands[0].L) if observed is None else np.asarray(observed, dtype=bool)
    n = seen.shape[1]

    def frames(x: np.ndarray) -> np.ndarray:
        return np.where(seen, x, np.nan).T.reshape(n, *frame)

    bright = np.stack([frames(r.C + r.N) for r in bands])
    # Without a shadow layer the residual's negative part, L − D = −(C + N), is the darkening.
    dark = np.stack([frames(r.S) if r.S is not None else -frames(r.C + r.N) for r in bands])
    scales = np.array([result_scale(r, seen) for r in bands])
    shade = {}
    if rule.shadow_flat > 0:  # D − L is C + N − S, and D as the layers give it back
        residuals = np.stack(
            [b - d if r.S is not None else b for b, d, r in zip(bright, dark, bands, strict=True)]
        )
        observations = np.stack([frames(r.L) for r in bands]) + residuals
        shade = {"observations": observations, "residuals": residuals}
    return classify(bright, dark, scales, seen.T.reshape(n, *frame), rule, short_band, **shade)
