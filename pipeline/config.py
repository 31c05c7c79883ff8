"""Run configuration: YAML validated once, at the door, into frozen typed objects.

Every section forbids unknown keys. Validation failures become one-line :class:`ConfigError`
messages naming the dotted key, what was found and what to change (with the nearest valid key
suggested for typos), so a user never sees a pydantic traceback.

Relative paths in the file are taken relative to the current working directory, like any other
command-line path.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from pipeline.backends import ClusterSpec, ConfigSection
from pipeline.errors import ConfigError

ModelT = TypeVar("ModelT", bound=BaseModel)

__all__ = [
    "ClusterConfig",
    "Config",
    "GridConfig",
    "InputsConfig",
    "OutputConfig",
    "SolverConfig",
    "TilingConfig",
    "load_config",
    "parse_config",
]


class InputsConfig(ConfigSection):
    """Where the image series comes from (``inputs``)."""

    kind: Literal["gf4", "geotiff", "simulated"]
    paths: tuple[str, ...] = ()
    sensor: Literal["PMS", "IRS"] = "PMS"
    max_dn: float | None = Field(default=None, gt=0)
    dn_rule: Literal["sensor", "pow2"] = "sensor"
    dates: tuple[date, ...] | None = None
    date_pattern: str = r"(\d{8})"
    extract_dir: Path | None = None
    # A DEM (any GDAL raster of heights above the ellipsoid, metres) for RPC orthorectification;
    # without it GDAL assumes height 0, which displaces pixels wherever the terrain has relief.
    dem: Path | None = None
    n_dates: int = Field(default=7, ge=2)
    size: int = Field(default=1024, ge=16)
    seed: int = 0
    cloud_style: Literal["reference", "perlin", "moving", "none"] = "reference"

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value: Any) -> Any:
        # ``paths: products/*.tar.gz`` is as natural in YAML as a one-element list.
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _paths_needed(self) -> InputsConfig:
        # The number of dates is checked against the *resolved* files at discovery.
        if self.kind != "simulated" and not self.paths:
            raise ValueError(f"inputs.kind {self.kind!r} needs `inputs.paths` (a list or a glob)")
        return self


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
    # the per-tile fits close to a whole-scene fit (README "Tiling and seams" has the figures).
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


class SolverConfig(ConfigSection):
    """Decomposition settings passed to :func:`cloudcore.decompose` (``solver``)."""

    method: Literal["aatm", "rpca", "nnrpca", "atm"] = "aatm"
    # λ̂* (the paper's fitted best λ, per tile) by default: measured r 0.065 vs 0.104 for 1/√d on
    # the paper's simulation, and far less sensitive to the tile size (README "Choosing λ").
    lam: Literal["auto", "star"] | float = "star"
    beta: float = Field(default=1.0, gt=0)
    tol: float = Field(default=1e-7, gt=0)
    max_iter: int = Field(default=1000, ge=1)
    dtype: Literal["float32", "float64"] = "float32"

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


# The ``cluster`` section is one model for run, batch and experiment configurations; it lives
# with the back-ends that interpret it (it also expands ``${VAR}`` in ``cluster.address``).
ClusterConfig = ClusterSpec


class Config(ConfigSection):
    """The whole run configuration; see ``configs/*.yaml`` for commented examples."""

    inputs: InputsConfig
    output: OutputConfig
    grid: GridConfig = GridConfig()
    tiling: TilingConfig = TilingConfig()
    solver: SolverConfig = SolverConfig()
    cluster: ClusterConfig = ClusterConfig()


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML run configuration.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    Config
        The frozen, fully validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown, missing or of the wrong type.
    """
    return parse_config(read_yaml(path), source=str(path))


def parse_config(data: Any, *, source: str = "<config>") -> Config:
    """Validate an already parsed configuration mapping (see :func:`load_config`).

    Parameters
    ----------
    data
        The mapping, as read from YAML.
    source
        Name of where it came from, used in error messages.

    Returns
    -------
    Config
        The frozen, fully validated configuration.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with sections inputs, output, ...")
    # A section left empty in YAML (only comments under it) means "all defaults".
    data = {key: value for key, value in data.items() if value is not None}
    return validate(Config, data, source)


def read_yaml(path: str | Path, what: str = "config file") -> Any:
    r"""Parse a YAML file, turning I/O and syntax errors into one-line :class:`ConfigError`\ s.

    Parameters
    ----------
    path
        The file.
    what
        How the file is named in messages ("config file", "archive config", ...).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{what} {path} is not valid YAML{where}: fix the syntax") from None


def validate(
    model: type[ModelT], data: Mapping[str, Any], source: str, *, hidden: Collection[str] = ()
) -> ModelT:
    """Validate ``data`` into ``model``; every problem becomes part of one :class:`ConfigError`.

    Unknown keys get the nearest valid key suggested; ``hidden`` fields (filled in by the
    program, not by users) are never suggested.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        messages = [_describe(err, model, hidden) for err in exc.errors()]
        raise ConfigError(f"{source}: " + "; ".join(messages)) from None


def _describe(err: Mapping[str, Any], model: type[BaseModel], hidden: Collection[str]) -> str:
    """One pydantic error as 'key: what is wrong, what to do'."""
    loc = [str(part) for part in err["loc"]]
    # Union members and list indices appear in ``loc``; keep the user's key path only.
    key_parts = [p for p in loc if not p.startswith(("literal[", "float", "function-"))]
    key = ".".join(key_parts) or "<top level>"
    kind = err["type"]
    if kind == "extra_forbidden":
        parent, name = key_parts[:-1], key_parts[-1]
        valid = [f for f in _fields_at(parent, model) if f not in hidden]
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
        hint = (
            f"did you mean `{'.'.join([*parent, close[0]])}`?"
            if close
            else (f"valid keys here: {', '.join(valid)}")
        )
        return f"unknown key `{key}`: {hint}"
    if kind == "missing":
        return f"missing key `{key}`: add it"
    got = err.get("input")
    detail = _strip(err["msg"])
    if kind == "value_error" and not detail.startswith("expected "):
        return f"section `{key}`: {detail}"  # cross-field rule: the message names the keys
    expected = err.get("ctx", {}).get("expected") or detail.removeprefix("expected ")
    return f"key `{key}`: got {got!r}, expected {expected}"


def _strip(msg: str) -> str:
    for prefix in ("Input should be ", "Value error, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def _fields_at(parts: list[str], model: type[BaseModel]) -> list[str]:
    """The valid key names of the section at ``parts`` of ``model``."""
    for part in parts:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
