"""The mask pass's per-pixel scores of one window of a tile row: every band's layers read
once, one band at a time, into what :func:`cloudcore.masks.classify_scores` reads
(:mod:`pipeline.outputs.mask_layer` sweeps a row's cores with them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.grid.tiling import Window
from pipeline.outputs.kept import ResidualEdges, layer_parts

if TYPE_CHECKING:
    from pipeline.outputs.mask_layer import MaskJob

__all__ = ["Scores", "columns", "from_column", "reads_shade", "scored_layers", "scores_over"]


@dataclass
class Scores:
    """The per-pixel inputs of :func:`cloudcore.masks.classify_scores` over scene columns
    ``[col_off, col_off + width)`` of a tile row's rows (the cores' and the margin
    :func:`_row_codes` reads above and below): the bands' mean anomalies in units of σ and
    where some band observed."""

    col_off: int
    bright: np.ndarray
    dark: np.ndarray | None
    observed: np.ndarray
    white: np.ndarray | None  # where a brightening may be cloud (rule.white > 0), else None
    flat: np.ndarray | None  # where a brightening is white cloud (rule.white_cloud > 0)
    shade: np.ndarray | None  # where an entry is dark in every band (rule.shadow_flat > 0)
    # With an offset: each band's residual D − L over the window's first and last
    # MaskJob.reach columns, which a neighbouring core's context takes from it; None without.
    edges: ResidualEdges | None = None

    @property
    def col_end(self) -> int:
        return self.col_off + self.bright.shape[-1]


def reads_shade(job: MaskJob) -> bool:
    """Whether the scores read the observations: a shadow dark in every band is looked for
    (``mask.shadow_flat``)."""
    return job.rule.shadow_flat > 0


def scored_layers(job: MaskJob) -> list[str]:
    """The solved layers the scores read: all but ``clear``, and ``haze`` only if it can be
    non-zero where observed."""
    return [n for n in job.layers if n != "clear" and (n != "haze" or job.haze)]


def from_column(scores: Scores, start: int) -> Scores:
    """``scores`` from scene column ``start`` on: a copy of those columns (:func:`columns`'
    cut), so that the ones before it are freed (``scores`` itself when it starts there or
    later); the residual's edges are kept whole, as the offset of the core to the right still
    reads them."""
    if start <= scores.col_off:
        return scores
    bright, dark, observed, white, flat, shade = columns([scores], start, scores.col_end)

    def copy(x: np.ndarray | None) -> np.ndarray | None:
        return None if x is None else x.copy()

    return Scores(
        start,
        bright.copy(),
        copy(dark),
        observed.copy(),
        copy(white),
        copy(flat),
        copy(shade),
        scores.edges,
    )


def columns(
    held: Sequence[Scores], start: int, stop: int
) -> tuple[
    np.ndarray,
    np.ndarray | None,
    np.ndarray,
    np.ndarray | None,
    np.ndarray | None,
    np.ndarray | None,
]:
    """The scores over scene columns ``[start, stop)``, from consecutive held ones covering
    them (a copy only where two join)."""

    def cut(s: Scores, x: np.ndarray) -> np.ndarray:
        return x[..., max(start, s.col_off) - s.col_off : min(stop, s.col_end) - s.col_off]

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)

    def joined_or_none(parts: list[np.ndarray | None]) -> np.ndarray | None:
        return None if parts[0] is None else joined([p for p in parts if p is not None])

    used = [s for s in held if s.col_off < stop and s.col_end > start]
    return (
        joined([cut(s, s.bright) for s in used]),
        joined_or_none([None if s.dark is None else cut(s, s.dark) for s in used]),
        joined([cut(s, s.observed) for s in used]),
        joined_or_none([None if s.white is None else cut(s, s.white) for s in used]),
        joined_or_none([None if s.flat is None else cut(s, s.flat) for s in used]),
        joined_or_none([None if s.shade is None else cut(s, s.shade) for s in used]),
    )


def scores_over(
    arrays: Mapping[str, Any],
    seen: Any,
    observations: Any,
    job: MaskJob,
    scales: Sequence[float],
    window: Window,
) -> Scores:
    """The scores over ``window``, one band at a time: each band's C + N and S, NaN where the
    band did not observe the pixel (``seen``; the solver's C, N, S are 0 there, not evidence),
    are added to the bands' means in units of the band's σ in ``scales``
    (:class:`cloudcore.masks.BandMean`), and with a whiteness test to its
    :class:`cloudcore.masks.Whiteness`, so the task holds one band's layers at once. With a
    shadow dark in every band (:func:`reads_shade`), each band's observations
    (``observations``) and the ground they imply, D − (C + N − S) where observed, are added to
    a :class:`cloudcore.mask_scores.Shade`: from the layers the pass never writes, as the
    offset's residual (``clear`` may already hold a neighbour's kept observations)."""
    from cloudcore.mask_scores import Shade
    from cloudcore.masks import BandMean, Whiteness, whiteness_tests

    rows, cols = window.slices
    shape = (seen.shape[0], window.height, window.width)
    bright = BandMean(shape)
    # Shadow darkens: below the ground by S where the solve has a shadow layer, and by
    # L − D = −(C + N) where it has none (every method's residual holds the shadows then).
    dark = BandMean(shape)
    # The shadow layer is read for the offset's residual wherever there is one, and scored
    # only where it is the mask's solve's own (MaskJob.shadow_scored).
    has_shadow = "shadow" in job.layers
    scores_shadow = has_shadow and job.shadow_scored
    observed = np.zeros(shape, dtype=bool)  # in some band
    rule = job.rule
    whiteness = Whiteness(shape, lowest=rule.every_band > 0) if rule.reads_whiteness else None
    shade = Shade(shape, job.rule.flat_ratio) if reads_shade(job) else None
    # The residual's edges for the offset (pipeline.outputs.kept.context_residual): kept from
    # this read rather than read again, which decoded the neighbours' whole chunk columns for
    # a few of their columns (4.8 of a full-size mask task's 22.6 s, warm).
    reach = job.reach
    edges = ResidualEdges(window.col_off, window.col_end, window.row_off, reach) if reach else None
    for b, sigma in enumerate(scales):
        observed_b = np.asarray(seen[:, b, rows, cols]) == 1
        observed |= observed_b
        unseen = ~observed_b
        anomaly, shadow = layer_parts(arrays, b, window, haze=job.haze, shadow=has_shadow)
        if edges is not None:
            edges.add(anomaly, shadow)
        own = shadow if scores_shadow else None  # the mask solve's shadow layer, if it has one
        if shade is not None:
            observation = np.asarray(observations[:, b, rows, cols], dtype=np.float32)
            # NaN there already as staged (not observed, or the provider's flags): kept
            # explicit, so the shade counts only what `seen` says the band observed.
            observation[unseen] = np.nan
            shade.add(observation, anomaly if own is None else anomaly - own, sigma)
        anomaly[unseen] = np.nan
        bright.add(anomaly, sigma)
        if whiteness is not None:
            whiteness.add(anomaly, short=b == job.short_band)
        if own is not None:
            own[unseen] = np.nan
            dark.add(own, sigma)
        else:
            dark.add(np.negative(anomaly, out=anomaly), sigma)
    white, flat = (None, None)
    if whiteness is not None:
        white, flat = whiteness_tests(whiteness, job.rule, bright.count)
    dim = None if shade is None else shade.dark(job.rule.shadow_flat)
    # The means in the sums' own arrays: the task holds no second copy of either.
    mean_bright, mean_dark = bright.mean(in_place=True), dark.mean(in_place=True)
    return Scores(window.col_off, mean_bright, mean_dark, observed, white, flat, dim, edges)
