"""What the mask pass writes into a band's ``clear`` with ``mask.keep_clear``: the observation
where the mask keeps it, no data where the band did not observe, the ground elsewhere (plus the
date's offset, ``mask.offset``), and the provenance of each value.

Split from :mod:`pipeline.outputs.mask_layer`, which decides the codes and calls these per core
and band.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from cloudcore.masks import NODATA
from pipeline.config.mask import needs_rows_ground
from pipeline.grid.tiling import Window

__all__ = [
    "FILLED",
    "FLAGGED",
    "OBSERVED",
    "ResidualEdges",
    "context_residual",
    "filled_shift",
    "keep_observed",
    "layer_parts",
    "layer_residual",
    "provenance_codes",
]

#: Provenance codes: the output is the observation / is modelled / is modelled where the
#: provider's quality band (``inputs.quality``) flags cloud or shadow (no data is 255).
OBSERVED, FILLED, FLAGGED = 1, 0, 2


def provenance_codes(clear: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
    """The provenance of ``clear`` values (any shape): :data:`OBSERVED` where ``kept`` (the
    observations kept, ``mask.keep_clear``), :data:`FILLED` elsewhere, ``NODATA`` where the
    value is NaN."""
    provenance = np.full(clear.shape, FILLED, dtype=np.uint8)
    if kept is not None:
        provenance[kept] = OBSERVED
    provenance[~np.isfinite(clear)] = NODATA
    return provenance


def layer_parts(
    arrays: Mapping[str, Any], band: int, window: Window, *, haze: bool, shadow: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """One band's solved layers over ``window`` as :func:`layer_residual` sums them: C + N
    (N read when ``haze``) and S (read when ``shadow``, else None), each a new array."""
    rows, cols = window.slices
    added = np.asarray(arrays["cloud"][:, band, rows, cols])
    if haze:
        added += np.asarray(arrays["haze"][:, band, rows, cols])
    return added, np.asarray(arrays["shadow"][:, band, rows, cols]) if shadow else None


def layer_residual(
    arrays: Mapping[str, Any], band: int, window: Window, *, haze: bool, shadow: bool
) -> np.ndarray:
    """D − L of one band over ``window`` from the solved layers, C + N − S (the additive
    methods' constraint, to the solver's tolerance; ``haze`` and ``shadow``: whether those
    layers are read, :func:`layer_parts`). They are layers the mask pass never writes, so a
    rerun, or a neighbour's task that has already kept its observations in ``clear``, reads the
    same values."""
    residual, darkening = layer_parts(arrays, band, window, haze=haze, shadow=shadow)
    if darkening is not None:
        residual -= darkening
    return residual


@dataclass
class ResidualEdges:
    """Each band's residual D − L (:func:`layer_residual`) over the first and last columns of
    a window of scene columns ``[col_off, col_end)`` and rows from ``row_off``: the mask pass
    keeps them from its scores' read of the same layers (:mod:`pipeline.outputs.mask_layer`)."""

    col_off: int
    col_end: int
    row_off: int
    width: int  # the columns kept on each side
    left: list[np.ndarray] = field(default_factory=list)  # per band: (time, rows, first cols)
    right: list[np.ndarray] = field(default_factory=list)  # per band: (time, rows, last cols)

    def add(self, added: np.ndarray, shadow: np.ndarray | None) -> None:
        """Keep the next band's edges of C + N (``added``) less S (``shadow``, None without a
        shadow layer), both over the whole window as :func:`layer_parts` reads them."""
        for kept, cols in (
            (self.left, slice(None, self.width)),
            (self.right, slice(-self.width, None)),
        ):
            edge = added[..., cols].copy()
            if shadow is not None:
                edge -= shadow[..., cols]
            kept.append(edge)

    def columns(self, band: int, rows: slice, start: int, stop: int) -> np.ndarray:
        """The band's residual over scene ``rows`` and columns ``[start, stop)``, which must lie
        within the first or the last columns kept."""
        left, right = self.left[band], self.right[band]
        r = slice(rows.start - self.row_off, rows.stop - self.row_off)
        first_right = self.col_end - right.shape[-1]
        if stop <= self.col_off + left.shape[-1]:
            return left[..., r, start - self.col_off : stop - self.col_off]
        if start >= first_right:
            return right[..., r, start - first_right : stop - first_right]
        raise ValueError(
            f"columns {start}-{stop} lie beyond the edges kept of {self.col_off}-{self.col_end}"
        )


def context_residual(
    arrays: Mapping[str, Any],
    band: int,
    context: Window,
    core: Window,
    edges: Sequence[ResidualEdges],
    *,
    haze: bool,
    shadow: bool,
) -> np.ndarray:
    """:func:`layer_residual` over ``context``, bit for bit: the core's own columns read from the
    cube (a chunk column of their own), the context's columns on either side of the core from
    the ``edges`` that cover them (the same float32 sums, made when the scores read them).

    Reading the whole context decoded the neighbouring cores' whole chunk columns for the few
    columns the context takes from each (``mask.offset``'s margin, 40 px by default).
    """
    rows = slice(context.row_off, context.row_end)
    own = Window(context.row_off, core.col_off, context.height, core.width)
    parts = [layer_residual(arrays, band, own, haze=haze, shadow=shadow)]
    if context.col_off < core.col_off:
        parts.insert(0, _edge_columns(edges, band, rows, context.col_off, core.col_off))
    if core.col_end < context.col_end:
        parts.append(_edge_columns(edges, band, rows, core.col_end, context.col_end))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def _edge_columns(
    edges: Sequence[ResidualEdges], band: int, rows: slice, start: int, stop: int
) -> np.ndarray:
    parts = [
        e.columns(band, rows, max(start, e.col_off), min(stop, e.col_end))
        for e in edges
        if max(start, e.col_off) < min(stop, e.col_end)
    ]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def filled_shift(
    residual: np.ndarray,
    evidence: np.ndarray,
    *,
    scale: float | None,
    times: Sequence[float] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`keep_observed` writes a filled entry from, over a window (time, rows, cols):
    the residual D − L less the pixel's own departure from the ground on its nearest
    ``evidence`` dates (:func:`cloudcore.departure.interpolated_departure` at the dates'
    ``times``, ``mask.interpolate``; None: not taken out), and the date's departure spread
    from what is left (:func:`cloudcore.offset.clear_offset` over ``scale`` px, ``mask.offset``;
    None: zeros). A filled entry is then D − residual + shift: L + departure + offset."""
    from cloudcore.departure import interpolated_departure
    from cloudcore.offset import clear_offset

    if times is not None:  # R − departure into the departure's own buffer: no third array
        departure = interpolated_departure(residual, evidence, np.asarray(times))
        residual = np.subtract(residual, departure, out=departure)
    if scale is None:
        return residual, np.zeros_like(residual)
    return residual, clear_offset(residual, evidence, scale=scale)


def keep_observed(
    arrays: Mapping[str, Any],
    source: Any,
    core: Window,
    band: int,
    keep: np.ndarray,
    flagged: np.ndarray | None,
    offset: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Write the observations kept (where ``keep``, from the mask) into the band's ``clear``
    over the core, with no data where the band did not observe, and return its provenance
    (time, rows, cols).

    Where the provider flagged cloud or shadow (``flagged``) the staged observation is NaN, and
    the output is filled, not no data. With ``offset`` (the core's residual D − L and the date's
    departure, :mod:`cloudcore.offset`) an observed entry that is filled is written as the
    ground plus the departure, D − (D − L) + offset, clipped to [0, 1]: from the input and the
    solved layers, never from ``clear`` itself, so that a rerun writes the same; where D − L is
    NaN, no data. The band's stored ``clear`` (the rows' ground) is read only where it is
    needed, and written (:func:`pipeline.config.mask.needs_rows_ground`).
    """
    rows, cols = core.slices
    # Read again rather than kept from the scores: keeping every band's observations would undo
    # the one-band-at-a-time memory bound.
    observation = np.asarray(source[:, band, rows, cols])
    if needs_rows_ground(True, offset is not None, flagged is not None):
        clear = np.asarray(arrays["clear"][:, band, rows, cols])
    else:
        clear = np.full(observation.shape, np.nan, np.float32)
    provenance = np.empty(clear.shape, np.uint8)
    keep = np.broadcast_to(np.asarray(keep, dtype=bool), clear.shape)
    # Without an offset or a provider's flags the kernel does not read those arguments, but
    # numba types every branch, so they cannot be None: arrays of the same dtype stand in.
    residual, shift = offset if offset is not None else (observation, observation)
    flags = keep if flagged is None else np.broadcast_to(flagged, clear.shape)
    _compose_core(
        clear,
        observation,
        keep,
        flags,
        flagged is not None,
        residual,
        shift,
        offset is not None,
        provenance,
    )
    arrays["clear"][:, band, rows, cols] = clear
    return provenance


@njit(cache=True, nogil=True)
def _compose_core(
    clear: np.ndarray,
    observation: np.ndarray,
    keep: np.ndarray,
    flags: np.ndarray,
    has_flags: bool,
    residual: np.ndarray,
    shift: np.ndarray,
    has_offset: bool,
    provenance: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through keep_observed
    # One pass over the core's entries doing, entry by entry and in float32, what the NumPy
    # composition does in a dozen passes over the whole core (12 temporaries of 7 × 1024² per
    # band; tested against it bit for bit, tests/pipeline/outputs/test_kept.py):
    #   filled entries (observed, not kept): clip(D − R + offset, 0, 1) where finite;
    #   kept entries: the observation (cloudcore.kept.keep_clear);
    #   unobserved entries: NaN, unless the provider flagged them;
    #   provenance_codes of the result, FLAGGED where flagged and finite.
    for t in range(clear.shape[0]):
        for i in range(clear.shape[1]):
            for j in range(clear.shape[2]):
                value = clear[t, i, j]
                seen = observation[t, i, j]
                finite = np.isfinite(seen)
                kept = keep[t, i, j] and finite
                if kept:
                    value = seen
                elif has_offset and finite:
                    shifted = np.float32(seen - residual[t, i, j]) + shift[t, i, j]
                    # np.clip(x, 0, 1) as NumPy (>= 2.1) does it: NaN and −0 stay as they
                    # are (earlier NumPy returned +0 for −0: a zero's sign, no value differs).
                    if shifted < 0:
                        shifted = np.float32(0.0)
                    elif shifted > 1:
                        shifted = np.float32(1.0)
                    if np.isfinite(shifted):
                        value = shifted
                if not finite and not (has_flags and flags[t, i, j]):
                    value = np.float32(np.nan)
                clear[t, i, j] = value
                if not np.isfinite(value):
                    provenance[t, i, j] = NODATA
                elif has_flags and flags[t, i, j]:
                    provenance[t, i, j] = FLAGGED
                elif kept:
                    provenance[t, i, j] = OBSERVED
                else:
                    provenance[t, i, j] = FILLED
