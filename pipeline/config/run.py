"""The run configuration (``python -m pipeline run CONFIG``): its sections and their rules.

Relative paths in the file are taken relative to the current working directory, like any other
command-line path. ``inputs`` is a union tagged by ``inputs.kind``: each kind of input has only
the keys that mean something for it, so a key of another kind is an error, not silently unused.
"""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from cloudcore.catalog import ADDITIVE_METHODS
from pipeline.config.base import ConfigSection
from pipeline.config.cluster import ClusterSpec
from pipeline.config.mask import MaskConfig, needs_rows_ground
from pipeline.config.solver import SolverConfig

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

    @property
    def rows_write_ground(self) -> bool:
        """Whether the solve writes its ground into ``clear`` (the tile rows the ground they
        blend, scene scope's shards their cores'; :func:`~pipeline.config.mask.needs_rows_ground`):
        not with ``keep_clear`` and the offset or the interpolation, and no provider's mask."""
        shifted = self.applied_offset is not None or self.applied_interpolate
        return needs_rows_ground(self.mask.keep_clear, shifted, self.quality is not None)

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
