"""The run configuration (``python -m pipeline run CONFIG``): its sections and their rules.

Relative paths in the file are taken relative to the current working directory, like any other
command-line path. ``inputs`` is a union tagged by ``inputs.kind``: each kind of input has only
the keys that mean something for it, so a key of another kind is an error, not silently unused.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from cloudcore.catalog import (
    ADDITIVE_METHODS,
    GROUND_FLOOR,
    METHODS,
    SCENE_METHODS,
    SHADOW_METHODS,
    SHADOW_WEIGHT,
    Method,
)
from pipeline.config.base import ConfigSection
from pipeline.config.cluster import ClusterSpec
from pipeline.config.mask import MaskConfig

log = logging.getLogger(__name__)

__all__ = [
    "Config",
    "GeotiffInputs",
    "Gf4Inputs",
    "GridConfig",
    "InputsConfig",
    "MaskConfig",
    "OutputConfig",
    "QualityConfig",
    "SimulatedInputs",
    "SolverConfig",
    "StacInputs",
    "StacSearch",
    "TilingConfig",
]


class _ScaledInputs(ConfigSection):
    """Keys every kind of input has: how DN become [0, 1], and the heights for RPCs."""

    max_dn: float | None = Field(default=None, gt=0)
    # The declared maximum (GF-4 2^ValidPixelBits − 1, GeoTIFF NBITS or dtype) checked against
    # the data; pipeline.inputs.scaling has the rules.
    dn_rule: Literal["auto", "metadata", "pow2"] = "auto"
    # A DEM (any GDAL raster of heights above the ellipsoid, metres) for RPC orthorectification;
    # without it GDAL assumes height 0, which displaces pixels wherever the terrain has relief.
    dem: Path | None = None


class _FileInputs(_ScaledInputs):
    """Inputs read from files the user names (``inputs.paths``)."""

    paths: tuple[str, ...] = ()

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value: Any) -> Any:
        # ``paths: products/*.tar.gz`` is as natural in YAML as a one-element list.
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _paths_needed(self) -> _FileInputs:
        # The number of dates is checked against the *resolved* files at discovery.
        if not self.paths:
            kind = getattr(self, "kind", "?")
            raise ValueError(f"inputs.kind {kind!r} needs `inputs.paths` (a list or a glob)")
        return self


class Gf4Inputs(_FileInputs):
    """GF-4 L1A products: directories or ``.tar.gz`` archives (``inputs.kind: gf4``)."""

    kind: Literal["gf4"]
    sensor: Literal["PMS", "IRS"] = "PMS"
    extract_dir: Path | None = None
    # DN (the paper's convention) by default; radiance or TOA reflectance (with CRESDA's
    # coefficients from calibration_table) make dates of different integration times
    # comparable (pipeline.inputs.radiometry).
    calibration: Literal["dn", "radiance", "reflectance"] = "dn"
    calibration_table: Path | None = None


class GeotiffInputs(_FileInputs):
    """A georeferenced GeoTIFF series of any sensor (``inputs.kind: geotiff``)."""

    kind: Literal["geotiff"]
    dates: tuple[date, ...] | None = None
    date_pattern: str = r"(\d{8})"


class SimulatedInputs(_ScaledInputs):
    """A GF-4-like series the run simulates itself, for the demo (``inputs.kind: simulated``)."""

    kind: Literal["simulated"]
    sensor: Literal["PMS", "IRS"] = "PMS"
    calibration: Literal["dn", "radiance", "reflectance"] = "dn"
    calibration_table: Path | None = None
    n_dates: int = Field(default=7, ge=2)
    size: int = Field(default=1024, ge=16)
    seed: int = 0
    cloud_style: Literal["reference", "perlin", "moving", "none"] = "reference"


class QualityConfig(ConfigSection):
    """A provider's quality band (``inputs.quality``): the entries it calls cloud, shadow or no
    data are left out of the solve and filled (:mod:`pipeline.inputs.stac_source`)."""

    asset: str
    rule: Literal["scl", "landsat-c2", "fmask", "classes"]
    # provider: the provider's mask is the mask (what it calls clear is kept as observed);
    # union: a pixel either mask calls cloud or shadow is filled (docs/REAL-CLOUDS.md).
    combine: Literal["provider", "union"] = "provider"
    # For rule "classes": the quality values of each class.
    cloud: tuple[int, ...] = ()
    shadow: tuple[int, ...] = ()
    nodata: tuple[int, ...] = ()


class StacSearch(ConfigSection):
    """A STAC API search (``inputs.search``), run with pystac-client."""

    url: str
    collections: tuple[str, ...] = ()
    bbox: tuple[float, float, float, float] | None = None
    datetime: str | None = None
    query: dict[str, Any] | None = None
    max_items: int = Field(default=1000, ge=1)


class StacInputs(ConfigSection):
    """A series described by STAC (``inputs.kind: stac``): a static catalog or ItemCollection
    file (``catalog``), or a STAC API search (``search``); read with odc-stac."""

    kind: Literal["stac"]
    catalog: str | None = None
    search: StacSearch | None = None
    # Asset keys or eo:bands common names, in the order the outputs list them.
    bands: tuple[str, ...]
    quality: QualityConfig | None = None
    # DN that maps to 1.0; default the bands' data type's maximum (e.g. 10000 for Sentinel-2
    # L2A, whose raster:bands scale is 1e-4, must be given here).
    max_dn: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> StacInputs:
        if (self.catalog is None) == (self.search is None):
            raise ValueError(
                "inputs.kind 'stac' needs exactly one of `inputs.catalog` and `inputs.search`"
            )
        if not self.bands:
            raise ValueError("inputs.bands: name at least one band (asset key or common name)")
        return self

    # Keys the other kinds have, which the rest of the pipeline reads.
    @property
    def dem(self) -> None:
        """No DEM: STAC assets are orthorectified already."""
        return None


#: The ``inputs`` section: one of the kinds above, chosen by ``inputs.kind``.
InputsConfig = Annotated[
    Gf4Inputs | GeotiffInputs | SimulatedInputs | StacInputs, Field(discriminator="kind")
]


class OutputConfig(ConfigSection):
    """Where and how results are written (``output``)."""

    path: Path
    cog_dtype: Literal["uint16", "float32"] = "uint16"
    quicklooks: bool = True


class GridConfig(ConfigSection):
    """Optional overrides of the target grid derived from the inputs (``grid``)."""

    crs: str | None = None
    resolution: float | None = Field(default=None, gt=0)
    bounds: tuple[float, float, float, float] | None = None

    @field_validator("bounds", mode="before")
    @classmethod
    def _four_numbers(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, str) or len(value) != 4):
            raise ValueError("expected [left, bottom, right, top] (4 numbers in the grid CRS)")
        return value

    @field_validator("bounds")
    @classmethod
    def _ordered(
        cls, value: tuple[float, float, float, float] | None
    ) -> tuple[float, float, float, float] | None:
        if value is not None and not (value[0] < value[2] and value[1] < value[3]):
            raise ValueError(
                "bounds must be [left, bottom, right, top] with left<right, bottom<top"
            )
        return value


class TilingConfig(ConfigSection):
    """Tile size and halo overlap in target-grid pixels (``tiling``)."""

    # 1024² tiles (~100 per GF-4 PMS band) with a 128 px halo: tiles much larger than clouds keep
    # the per-tile fits close to a whole-scene fit (docs/SOLVERS.md has the figures).
    tile_size: int = Field(default=1024, ge=16)
    overlap: int = Field(default=128, ge=0)

    @model_validator(mode="after")
    def _overlap_fits(self) -> TilingConfig:
        # Halos must reach only the 8 neighbours, and the two feather ramps of a tile must not
        # meet inside its core.
        if 2 * self.overlap > self.tile_size:
            raise ValueError(
                f"tiling.overlap {self.overlap} is more than half of tiling.tile_size "
                f"{self.tile_size}: lower the overlap or raise the tile size"
            )
        return self


@dataclass(frozen=True)
class ScopeTraits:
    """What a solve scope can do, as the configuration checks it (the scopes themselves are
    :mod:`pipeline.solve.scopes`)."""

    methods: tuple[str, ...]  # the methods it solves
    refines: bool  # whether it can refine (cloudcore.refine)
    why_not_method: str = ""  # why it does not solve the others
    # Whether the scope is part of the work's ids: not tile scope's, the default, whose ids did
    # not change when scene scope came (pipeline.plan).
    named_in_ids: bool = True


#: The traits of each ``solver.scope``. Scene scope runs the ALM on blocks that live in Dask
#: actors (cloudcore.scene): not ATM, whose inner loop takes many SVTs per iteration, and no
#: refinement, which is per tile.
SCOPE_TRAITS = {
    "tile": ScopeTraits(methods=METHODS, refines=True, named_in_ids=False),
    "scene": ScopeTraits(
        methods=SCENE_METHODS,
        refines=False,
        why_not_method=" (its inner loop takes many SVTs per iteration)",
    ),
}


class SolverConfig(ConfigSection):
    """Decomposition settings passed to :func:`cloudcore.decompose` (``solver``)."""

    # The default (aATM, 1.4 × λ̂*, not refined) was chosen by leave-one-site-out on five real
    # cloudy series from three sensors (docs/REAL-CLOUDS.md, `python -m cloudlab heldout`), with
    # the mask's settings (pipeline/config/mask.py) and the ground capped: held out, its mean r
    # on pasted real clouds is 0.179 (the temporal median's 0.360; λ̂* itself, chosen the same
    # way, 0.48), and it changes the reference-clear pixels by r 0.032 on average. The earlier
    # default (rpca 1/√d, refined), chosen on one site, was worse than the median on three of
    # the other four.
    method: Method = "aatm"
    lam: Literal["auto", "star"] | float = "star"
    # λ = lam_scale × the rule's λ (lam auto or star); with lam a number, that number is λ and
    # lam_scale does not apply.
    # 1.4 of 1, 1.4 and 2, by leave-one-site-out: λ̂*, fitted to the paper's simulation, is too
    # small for real clouds (more of the scene goes into C, and the mask then flags clear pixels).
    lam_scale: float = Field(default=1.4, gt=0)
    # The masked re-solve (cloudcore.refine), tile scope only. Off by default: chosen on one
    # site, it did not transfer (docs/REAL-CLOUDS.md).
    refine: bool = False
    beta: float = Field(default=1.0, gt=0)
    # κ of aatm-shadow: the shadow layer's ℓ1 weight relative to the cloud's.
    shadow_weight: float = Field(default=SHADOW_WEIGHT, gt=0)
    # Each pixel's ground capped at its median over the dates, the excess moved into the cloud
    # layer (cloudcore.cap_ground): a date overcast over the whole tile is otherwise taken into
    # the low-rank ground, and the mask calls its clouds clear. Additive methods only. On since
    # 2026-11-27: held out, the mask's cloud + haze F1 against Fmask and Sen2Cor rose from
    # 0.55–0.71 to 0.80–0.84 and the mean r on pasted clouds from 0.214 to 0.189
    # (docs/REAL-CLOUDS.md, "Overcast dates"). Left out (null): on for the additive methods, off
    # for atm; true with atm is an error. With refine the refined ground is capped (not scored).
    cap_ground: bool | None = None
    # With the cap, each pixel's ground also raised to this quantile of its dates, the deficit
    # taken out of the residual (aATM's haze layer, RPCA's cloud layer), where the mask reads
    # shadows (cloudcore.cap_ground's floor): aATM's cloud layer is non-negative, so a cloud's
    # shadow is otherwise taken into the ground and never flagged. A quantile in (0, 0.5]; 0:
    # no floor. Left out (null): cloudcore.catalog.GROUND_FLOOR where the ground is capped and
    # there is no shadow layer, else none. Not with a shadow layer (aatm-shadow, refine), whose
    # S holds the shadows.
    floor_ground: float | None = Field(default=None, ge=0, le=0.5)
    # The relative residual ‖D − L − C − N‖_F / ‖D‖_F at which the solve stops. 3e-5 rather than
    # cloudcore's 1e-7 (floored at 1e-6 in float32): about a fifth fewer iterations; on the
    # real-cloud benchmark nine of ten scores within 0.2 % of a solve to 1e-7, and 3 pixels of
    # the smallest site's mask flipped (benchmarks/tolerance.py, docs/PERFORMANCE.md).
    tol: float = Field(default=3e-5, gt=0)
    # The growth of the ALM's step μ per iteration (μ ← ρμ). 2 rather than the paper's 1.5
    # (cloudcore's default): about 30 % fewer iterations, and held out on the real-cloud
    # benchmark its scores were at least as good (docs/REAL-CLOUDS.md, "The ALM's growth ρ").
    # A different solve, not a faster one of the same: most written DN move.
    rho: float = Field(default=2.0, gt=1, allow_inf_nan=False)
    max_iter: int = Field(default=1000, ge=1)
    dtype: Literal["float32", "float64"] = "float32"
    # ``tile``: one solve per tile halo, blended (the default, as users asked). ``scene``: one
    # exact solve per band over the whole scene, distributed over the tiles
    # (pipeline.solve.scopes); docs/SCOPES.md says when to choose which.
    scope: Literal["tile", "scene"] = "tile"

    @model_validator(mode="after")
    def _scope_can_solve(self) -> SolverConfig:
        traits = SCOPE_TRAITS[self.scope]
        if self.method not in traits.methods:
            solves = f"{', '.join(traits.methods[:-1])} or {traits.methods[-1]}"
            raise ValueError(
                f"solver.scope '{self.scope}' solves {solves}, not {self.method}"
                f"{traits.why_not_method}: use solver.scope 'tile' for {self.method}"
            )
        if self.cap_ground is True and self.method not in ADDITIVE_METHODS:
            raise ValueError(
                f"solver.cap_ground moves the ground's excess into an additive cloud layer; "
                f"{self.method}'s is an opacity: set solver.cap_ground false or choose one of "
                f"{', '.join(ADDITIVE_METHODS)}"
            )
        if self.floor_ground and self.method not in ADDITIVE_METHODS:
            raise ValueError(
                f"solver.floor_ground moves the ground's deficit into an additive residual; "
                f"{self.method}'s cloud layer is an opacity: set solver.floor_ground 0 (or leave "
                f"it out) or choose one of {', '.join(ADDITIVE_METHODS)}"
            )
        if self.floor_ground and (self.refine or self.method in SHADOW_METHODS):
            raise ValueError(
                "solver.floor_ground takes a shadow out of the ground into the residual; with "
                f"{'solver.refine' if self.refine else self.method} the shadow layer S holds "
                "it: set solver.floor_ground 0 (or leave it out)"
            )
        if self.floor_ground and not self.caps_ground:
            raise ValueError(
                "solver.floor_ground raises the ground capped by solver.cap_ground: set "
                "solver.cap_ground true (or leave it out), or solver.floor_ground 0"
            )
        if self.refine and not traits.refines:
            raise ValueError(
                f"solver.refine is done per tile: set solver.scope 'tile', or solver.refine false "
                f"(or leave it out) for {self.scope} scope"
            )
        return self

    @property
    def refines(self) -> bool:
        """Whether each tile's decomposition is refined (:func:`cloudcore.refine`)."""
        return self.refine

    @property
    def caps_ground(self) -> bool:
        """Whether the solve's ground is capped at each pixel's median date
        (:func:`cloudcore.cap_ground`): ``cap_ground``, or left out, for the additive methods."""
        if self.cap_ground is None:
            return self.method in ADDITIVE_METHODS
        return self.cap_ground

    @property
    def ground_floor(self) -> float | None:
        """The quantile of its dates each pixel's ground is raised to
        (:func:`cloudcore.cap_ground`'s ``floor``), or None: ``floor_ground``, 0 for none, or
        left out :data:`cloudcore.catalog.GROUND_FLOOR` where the ground is capped and the solve
        has no shadow layer."""
        if self.floor_ground is None:
            shadow_layer = self.refine or self.method in SHADOW_METHODS
            return GROUND_FLOOR if self.caps_ground and not shadow_layer else None
        return self.floor_ground or None

    def spell_floor(self, dump: dict[str, Any]) -> dict[str, Any]:
        """``dump``, this solver's ``model_dump``, with ``floor_ground`` as it takes effect
        (:attr:`ground_floor`) and left out where there is no floor: spelt as before the key
        existed, so the tile ids and the batch hash of earlier runs stay the same."""
        dump.pop("floor_ground", None)
        if self.ground_floor is not None:
            dump["floor_ground"] = self.ground_floor
        return dump

    @field_validator("lam", mode="before")
    @classmethod
    def _lam_rule_or_number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected 'auto', 'star' or a positive number")
        if isinstance(value, int | float):
            if not math.isfinite(value) or value <= 0:
                raise ValueError("expected 'auto', 'star' or a positive number")
            return float(value)
        if value not in ("auto", "star"):
            raise ValueError("expected 'auto', 'star' or a positive number")
        return value


class Config(ConfigSection):
    """The whole run configuration; see ``configs/*.yaml`` for commented examples."""

    inputs: InputsConfig
    output: OutputConfig
    grid: GridConfig = GridConfig()
    tiling: TilingConfig = TilingConfig()
    solver: SolverConfig = SolverConfig()
    mask: MaskConfig = MaskConfig()
    cluster: ClusterSpec = ClusterSpec()

    @property
    def quality(self) -> QualityConfig | None:
        """The provider's mask the run uses (``inputs.quality`` of STAC inputs), or None."""
        return self.inputs.quality if isinstance(self.inputs, StacInputs) else None

    @property
    def applied_offset(self) -> float | None:
        """The scale in pixels of the date's offset the mask pass adds (``mask.offset``), or
        None where it adds none: ``offset: 0``, no ``keep_clear``, or a method whose layers do
        not add up to the residual (``atm``: :data:`cloudcore.catalog.ADDITIVE_METHODS`)."""
        return self.mask.kept_offset if self.solver.method in ADDITIVE_METHODS else None

    @property
    def applied_interpolate(self) -> bool:
        """Whether the mask pass raises the ground it writes by each pixel's own departure on
        its clear dates (``mask.interpolate``): with ``keep_clear`` and a method whose layers add
        up to the residual, as :attr:`applied_offset`."""
        mask = self.mask
        return mask.interpolate and mask.keep_clear and self.solver.method in ADDITIVE_METHODS

    @model_validator(mode="after")
    def _interpolate_needs_the_cap(self) -> Config:
        """A warning where the interpolation runs on a ground that is not capped: the mask then
        keeps much of an overcast date (its cloud taken into the ground no longer stands out),
        and the interpolation writes that cloud into the fill of the dates around (held out on
        one real site r 0.167 → 0.417; docs/REAL-CLOUDS.md, "A pixel's own clear dates"). Not an
        error: on two other sites it still helped."""
        if self.applied_interpolate and not self.solver.caps_ground:
            log.warning(
                "mask.interpolate with solver.cap_ground false: clouds the mask keeps on "
                "overcast dates can be written into the fill; set mask.interpolate: false"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _keep_clear_moved(cls, data: Any) -> Any:
        """``output.keep_clear`` of earlier versions is ``mask.keep_clear`` now: still read, with
        a warning, so that older run configurations keep working."""
        output = data.get("output") if isinstance(data, dict) else None
        if not isinstance(output, dict) or "keep_clear" not in output:
            return data
        mask = data.get("mask", {})
        if isinstance(mask, MaskConfig):  # built in Python: its settings as given
            mask = mask.model_dump(exclude_unset=True)
        if not isinstance(mask, dict):
            return data  # the mask section's own error says what is wrong
        if "keep_clear" in mask:
            raise ValueError(
                "output.keep_clear and mask.keep_clear are both set: keep mask.keep_clear only"
            )
        keep = output["keep_clear"]
        if not isinstance(keep, bool):
            raise ValueError(
                f"output.keep_clear: expected true or false, got {keep!r} (and write it as "
                "mask.keep_clear: the key moved there)"
            )
        log.warning("output.keep_clear is now mask.keep_clear: move it there in your config")
        output = {k: v for k, v in output.items() if k != "keep_clear"}
        return {**data, "output": output, "mask": {**mask, "keep_clear": keep}}
