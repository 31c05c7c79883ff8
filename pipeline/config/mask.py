"""The ``mask`` section of a run's configuration: the cloud / haze / shadow mask's thresholds and
what the outputs keep (:class:`cloudcore.MaskRule`, docs/MASK.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field, model_validator

from cloudcore.catalog import (
    MASK_BRIGHT_LEVEL,
    MASK_CLOUD,
    MASK_EDGE_REACH,
    MASK_FLAT_RATIO,
    MASK_FLAT_REACH,
    MASK_GROW,
    MASK_HAZE,
    MASK_INTERPOLATE,
    MASK_LEVEL_BELOW,
    MASK_NEAR_REACH,
    MASK_OFFSET,
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
from pipeline.config.base import ConfigSection

__all__ = ["BENCHMARK_ONLY", "MaskConfig", "needs_rows_ground"]

#: Fields of :class:`cloudcore.MaskRule` that are not configuration keys: measured held out,
#: they made the output worse, and a run keeps their off value (docs/REAL-CLOUDS.md, "Every
#: band brightened"). Every other field of the rule is a key of this section (tested).
BENCHMARK_ONLY = frozenset({"every_band"})


def needs_rows_ground(keep_clear: bool, shifted: bool, flagged: bool) -> bool:
    """Whether a run needs the ground the tile rows blend written into ``clear``.

    Without ``keep_clear`` it is the output. With it the mask pass writes every entry of
    ``clear`` over again: the observation where kept, no data where not observed, and a filled
    entry from the ground itself only without an offset or the interpolation (``shifted``) or
    where a provider's mask flags it (``flagged``, ``inputs.quality``). Otherwise a filled
    entry is D − R plus the shift, with R = C + N − S from the cloud, haze and shadow layers,
    and where R is NaN no data: R is NaN only where every solved layer is, the ground too (a
    date the tile left out, a tile no date observed; the layers are blended alike,
    ``tests/pipeline/test_footprints.py``). So the rows (in scene scope the shards) do not
    write the ground and the mask pass does not read it: at full size a third of what the pass
    read from a cube that has left the page cache, and as much written by the rows.
    """
    return not keep_clear or not shifted or flagged


class MaskConfig(ConfigSection):
    """The cloud / haze / shadow mask (``mask``): thresholds in units of the scene's anomaly
    scale σ and the opening radius in pixels (:class:`cloudcore.MaskRule`)."""

    # cloudcore.MaskRule's defaults, from cloudcore.catalog (which imports no numba).
    cloud: float = Field(default=MASK_CLOUD, gt=0)
    haze: float = Field(default=MASK_HAZE, gt=0)
    shadow: float = Field(default=MASK_SHADOW, gt=0)
    radius: int = Field(default=MASK_RADIUS, ge=0, le=16)
    # Pixels by which cloud and shadow grow after the opening (their thin rims are not clear).
    grow: int = Field(default=MASK_GROW, ge=0, le=16)
    # A shadow's edge: a shadow extends into the pixels next to it darkened by at least this
    # many σ (below `shadow`: hysteresis), one pixel a step, at most `edge_reach` pixels; a
    # penumbra belongs to its shadow, an isolated pixel that dark is not a shadow. 0: off.
    shadow_edge: float = Field(default=MASK_SHADOW_EDGE, ge=0)
    edge_reach: int = Field(default=MASK_EDGE_REACH, ge=1, le=16)
    # A shadow beside its cloud: a pixel darker than its date around it (the mean darkening
    # within the same square) by at least this many σ (below `shadow`), within `near_reach`
    # pixels of a cloud of the same date, is shadow; a cloud casts its shadow on its own date,
    # a little way off. 0: off. Each core then reads `near_reach` px more around it. Chosen by
    # leave-one-site-out with the rest (docs/REAL-CLOUDS.md).
    shadow_near: float = Field(default=MASK_SHADOW_NEAR, ge=0)
    near_reach: int = Field(default=MASK_NEAR_REACH, ge=1, le=64)
    # A shadow dark in every band: a pixel the rest calls clear, within `flat_reach` pixels of
    # a cloud of the same date, is shadow where its bands are darkened below the pixel's median
    # ground by at least this many σ on their mean and each to at most `flat_ratio` of it (a
    # shadow takes the direct sunlight away in every band; the median ground is what the pixel
    # is on most dates, so a ground that took a large shadow in does not hide it). 0: off.
    # Each core then reads `flat_reach` px more around it, and the observations there. Chosen by
    # leave-one-site-out (docs/REAL-CLOUDS.md, "A shadow dark in every band").
    shadow_flat: float = Field(default=MASK_SHADOW_FLAT, ge=0)
    flat_ratio: float = Field(default=MASK_FLAT_RATIO, gt=0, lt=1)
    flat_reach: int = Field(default=MASK_FLAT_REACH, ge=1, le=64)
    # A date's brightening level: before the thresholds, the mean brightening of the pixels
    # within this many pixels (a square) brightened by less than `level_below` σ is taken out
    # of each pixel's, so a date brighter across the scene than the ground (a hazier day, the
    # season) is not cloud where it is no brighter than around it. 0: off. Each core then reads
    # `bright_level` px more around it. Measured by leave-one-site-out (docs/REAL-CLOUDS.md).
    bright_level: int = Field(default=MASK_BRIGHT_LEVEL, ge=0, le=64)
    level_below: float = Field(default=MASK_LEVEL_BELOW, gt=0)
    # Ground that stays: a brightening flagged as cloud or haze is ground where, within
    # `persist_reach` pixels, at least `persist_cover` of the flagged pixels kept this fraction
    # of their brightening on the nearest acquisitions of other days (at least 12 h apart:
    # GF-4's same-day acquisitions see the same clouds) before and after, and at most
    # `persist_spill` of the pixels around them brightened by `haze` σ there. A field laid bare
    # or snow stays where it is from day to day; a cloud does not. 0: off. Each core then reads
    # `persist_reach` px more around it. Measured held out, off: it also keeps real clouds that
    # are in place on the neighbouring days (docs/REAL-CLOUDS.md, "Ground that stays").
    persist: float = Field(default=MASK_PERSIST, ge=0, le=1)
    persist_reach: int = Field(default=MASK_PERSIST_REACH, ge=1, le=64)
    persist_cover: float = Field(default=MASK_PERSIST_COVER, gt=0, le=1)
    persist_spill: float = Field(default=MASK_PERSIST_SPILL, ge=0, le=1)
    # Keep the observation where the mask says clear (provenance 1 in the cube), and the modelled
    # ground elsewhere; where a band did not observe the pixel the output is no data. With
    # keep_haze, the observation is kept under haze too (thin cloud: the ground is still seen;
    # the default haze threshold equals the cloud's, so there is no haze class to keep).
    # Both on by default, chosen with the solver by leave-one-site-out (docs/REAL-CLOUDS.md):
    # a pixel the mask calls clear comes out as observed in every band.
    keep_clear: bool = True
    keep_haze: bool = True
    # With keep_clear: where the ground is written over an observed pixel (cloud, shadow), add
    # the date's own departure from the ground (season, sun, atmosphere), measured on the
    # pixels kept as observed and spread over this many pixels (cloudcore.offset); 0: the
    # ground alone (null, as everywhere, means the default). Chosen by leave-one-site-out with
    # the rest (docs/REAL-CLOUDS.md). Not applied with solver.method atm (its C is an opacity:
    # its layers do not add up to the residual).
    # At most 64 px: each core then reads 208 px around it (cloudcore.offset.offset_margin).
    offset: float = Field(default=MASK_OFFSET, ge=0, le=64)
    # With keep_clear: where the ground is written over an observed pixel, add first the
    # pixel's own departure from the ground on its nearest dates kept as observed before and
    # after, interpolated in time (cloudcore.departure: a field laid bare, snow that stays,
    # seen minutes or days away), then the date's offset over what is left. Not with
    # solver.method atm (as the offset). Chosen by leave-one-site-out (docs/REAL-CLOUDS.md).
    interpolate: bool = MASK_INTERPOLATE
    # Call a brightening cloud or haze only where the band of shortest wavelength brightened by
    # at least this fraction of the most any band did (cloudcore.masks.Whiteness): clouds are
    # white, haze bluish, while the ground's own changes (greening, bare soil, harvest) brighten
    # the long bands. 0: no test. Chosen by leave-one-site-out (docs/REAL-CLOUDS.md).
    white: float = Field(default=MASK_WHITE, ge=0, le=1)
    # The band the test reads as the shortest (null: the run's band of shortest centre
    # wavelength among GF-4's, B2 blue for PMS; the first band if none is known).
    white_band: str | None = None
    # White clouds from a lower threshold: a brightening whose shortest band brightened by at
    # least white_cloud_ratio of the most any band did (as a cloud brightens them all about
    # alike) is cloud from this many σ. 0: off; at or above `cloud` it changes nothing.
    white_cloud: float = Field(default=MASK_WHITE_CLOUD, ge=0)
    white_cloud_ratio: float = Field(default=MASK_WHITE_CLOUD_RATIO, gt=0, le=1)

    @property
    def kept_offset(self) -> float | None:
        """``offset`` where this mask adds one (``keep_clear`` on, ``offset`` > 0), else None;
        whether the method allows it is :attr:`Config.applied_offset`'s."""
        return self.offset if self.keep_clear and self.offset > 0 else None

    def rule(self) -> Any:
        """As a :class:`cloudcore.MaskRule` (its fields, read by name from this section; those
        of :data:`BENCHMARK_ONLY` at the rule's own default, off)."""
        from cloudcore.masks import MaskRule

        fields = [f.name for f in dataclasses.fields(MaskRule) if f.name not in BENCHMARK_ONLY]
        return MaskRule(**{name: getattr(self, name) for name in fields})

    def options_off(self) -> set[str]:
        """The fields of the settings that came after the first cubes and are off here
        (``grow`` 0, ``white`` 0, no shadow edge, no shadow beside its cloud or dark in every
        band, no white clouds,
        no brightening level, no ground that stays, no ``interpolate``):
        a cube's identity and attributes leave them out, as before they existed, so cubes of
        earlier versions resume (:attr:`pipeline.plan.RunPlan.cube_token`,
        :func:`pipeline.solve.cube.open_cube`)."""
        off = set() if self.grow else {"grow"}
        off |= set() if self.white > 0 else {"white"}
        off |= set() if self.shadow_edge > 0 else {"shadow_edge", "edge_reach"}
        off |= set() if self.shadow_near > 0 else {"shadow_near", "near_reach"}
        off |= set() if self.shadow_flat > 0 else {"shadow_flat", "flat_ratio", "flat_reach"}
        off |= set() if self.white_cloud > 0 else {"white_cloud", "white_cloud_ratio"}
        off |= set() if self.bright_level > 0 else {"bright_level", "level_below"}
        persist = {"persist", "persist_reach", "persist_cover", "persist_spill"}
        off |= set() if self.persist > 0 else persist
        # Without keep_clear nothing is filled from it: as off (cubes of then resume).
        off |= set() if self.interpolate and self.keep_clear else {"interpolate"}
        return off

    @model_validator(mode="after")
    def _lower_thresholds_below_their_own(self) -> MaskConfig:
        if self.shadow_edge >= self.shadow:
            raise ValueError(
                f"mask.shadow_edge {self.shadow_edge:g} must be below mask.shadow "
                f"{self.shadow:g} (it is the lower threshold a shadow extends into), or 0 (off)"
            )
        # Only when set: with a lower `shadow` the default shadow_near merely adds nothing.
        if "shadow_near" in self.model_fields_set and self.shadow_near >= self.shadow > 0:
            raise ValueError(
                f"mask.shadow_near {self.shadow_near:g} must be below mask.shadow "
                f"{self.shadow:g} (it is the lower threshold beside a cloud), or 0 (off)"
            )
        return self
