"""The experiment configuration (``configs/experiment-*.yaml``) and the images it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config import ClusterSpec, ConfigSection, load
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic.ground import DATA_DIR, DEMO_IMAGE

__all__ = [
    "BUNDLED_IMAGES",
    "ExperimentConfig",
    "LambdaGridConfig",
    "MCConfig",
    "SolverSettings",
    "image_label",
    "load_experiment_config",
    "resolve_bundled",
    "resolve_image",
]

#: ``bundled:NAME`` image references: files shipped in ``pipeline/data`` (DATA_DIR).
BUNDLED_IMAGES: dict[str, str] = {"tyrol": DEMO_IMAGE}

Method = Literal["aatm", "rpca", "nnrpca", "atm"]
Baseline = Literal["cloudy", "median", "min"]


class LambdaGridConfig(ConfigSection):
    """The λ grid (``lambdas``), in units of λ₀ = 1/√d.

    The paper's grid is ``low: 0.1, high: 10, count: 51``: 51 values equally spaced in log scale
    with λ₀ in the middle (docs/CONVENTIONS.md §4). ``stride`` keeps every stride-th value to
    save time, but the values around λ₀ (``keep_center // 2 + 1`` steps below,
    ``keep_center // 2`` above) are always kept so the paper's tables (9 values, λ₀ 6th) can
    still be filled.
    """

    low: float = Field(default=0.1, gt=0)
    high: float = Field(default=10.0, gt=0)
    count: int = Field(default=51, ge=1)
    stride: int = Field(default=1, ge=1)
    keep_center: int = Field(default=9, ge=0)
    include_star: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> LambdaGridConfig:
        """Reject a reversed range, and a single value that is not a single point."""
        if self.high < self.low:
            raise ValueError("`lambdas.low` must not exceed `lambdas.high`: swap them")
        if self.count == 1 and self.high != self.low:
            raise ValueError("`lambdas.count` 1 needs `lambdas.low` == `lambdas.high`")
        return self


class MCConfig(ConfigSection):
    """The matrix-completion post-step (``mc``), see :func:`cloudcore.complete`."""

    enabled: bool = True
    gamma: float = Field(default=0.8, gt=0)
    radius: int = Field(default=3, ge=0)
    alpha: float | None = Field(default=None, gt=0)
    # aATM's cloud is C + N (the paper's "for aATM the cloud is the summation of C and N").
    cloud_layer: Literal["c+n", "c"] = "c+n"


class SolverSettings(ConfigSection):
    """Settings passed to every :func:`cloudcore.decompose` call (``solver``)."""

    beta: float = Field(default=1.0, gt=0)
    tol: float = Field(default=1e-7, gt=0)
    max_iter: int = Field(default=1000, ge=1)
    # float64 by default: fidelity to the paper's experiments matters more than speed here.
    dtype: Literal["float32", "float64"] = "float64"


class ExperimentConfig(ConfigSection):
    """A whole experiment; see ``configs/experiment-*.yaml`` for commented examples.

    ``kind: real-clouds`` files are :class:`cloudlab.realconfig.RealCloudsConfig` instead.
    """

    kind: Literal["simulation"] = "simulation"
    name: str = "experiment"
    images: tuple[str, ...] = ("bundled:tyrol",)
    size: int | None = Field(default=1024, ge=16)
    ns: tuple[int, ...] = (7,)
    repeats: int = Field(default=50, ge=1)
    seed: int = 0
    cloud_style: Literal["reference", "perlin", "moving"] = "reference"
    max_dn: float | None = Field(default=None, gt=0)
    methods: tuple[Method, ...] = ("aatm", "rpca", "nnrpca", "atm")
    baselines: tuple[Baseline, ...] = ("cloudy", "median", "min")
    lambdas: LambdaGridConfig = LambdaGridConfig()
    mc: MCConfig = MCConfig()
    solver: SolverSettings = SolverSettings()
    output: Path = Path("experiment-output")
    cluster: ClusterSpec = ClusterSpec()
    #: Directory that relative image paths are resolved against (the config file's folder).
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("images", "ns", "methods", "baselines", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        """Accept a single value where a list is expected (``ns: 7``)."""
        return [value] if isinstance(value, str | int) and not isinstance(value, bool) else value

    @field_validator("ns")
    @classmethod
    def _ns_at_least_two(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        """Numbers of dates: at least one, each at least 2, no repeats."""
        if not value:
            raise ValueError("expected at least one number of dates")
        if min(value) < 2:
            raise ValueError("expected numbers of dates >= 2 (λ̂* and the low-rank model need 2)")
        if len(set(value)) != len(value):
            raise ValueError("expected distinct numbers of dates")
        return value

    @field_validator("images", "methods")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """At least one entry, no repeats."""
        if not value:
            raise ValueError("expected at least one entry")
        if len(set(value)) != len(value):
            raise ValueError("expected distinct entries")
        return value


def load_experiment_config(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment configuration.

    Relative image paths are resolved against the config file's folder (so the config can sit
    next to its data); ``output`` is relative to the working directory, like any command-line
    output path.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    ExperimentConfig
        The frozen, validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, a key is unknown, missing or of the wrong type, or an
        image cannot be found.
    """
    path = Path(path)
    cfg = load(path, ExperimentConfig, program_keys={"base_dir": path.resolve().parent})
    for ref in cfg.images:
        resolve_image(ref, cfg.base_dir)  # fail at the door, not inside a worker
    return cfg


def resolve_image(ref: str, base_dir: str | Path = ".") -> Path:
    """The file behind an image reference: ``bundled:NAME`` or a path.

    Parameters
    ----------
    ref
        ``bundled:tyrol`` (the package's ``pipeline/data/tyrol-w1_1k_rgb.tif``) or a file path,
        relative paths taken against ``base_dir``.
    base_dir
        The config file's folder.

    Returns
    -------
    pathlib.Path
        The image file.

    Raises
    ------
    ConfigError
        Unknown bundled name or missing file.
    """
    return resolve_bundled(
        ref, base_dir, key="images", what="image", bundled=BUNDLED_IMAGES, folder=DATA_DIR
    )


def resolve_bundled(
    ref: str, base_dir: str | Path, *, key: str, what: str, bundled: dict[str, str], folder: Path
) -> Path:
    """The file behind ``bundled:NAME`` (``folder / bundled[NAME]``) or a path (relative ones
    taken against ``base_dir``), for the config key ``key`` naming a ``what``.

    Raises
    ------
    ConfigError
        Unknown bundled name or missing file, naming ``key`` and what to write instead.
    """
    names = ", ".join(f"bundled:{k}" for k in bundled)
    if ref.startswith("bundled:"):
        name = ref.removeprefix("bundled:")
        if name not in bundled:
            raise ConfigError(f"{key}: unknown bundled {what} {ref!r}; use one of {names}")
        return folder / bundled[name]
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    if not path.is_file():
        raise ConfigError(
            f"{key}: file {path} not found; give a path relative to the config file or use {names}"
        )
    return path


def image_label(ref: str) -> str:
    """Short name of an image for tables and seeds: ``tyrol`` or the file stem.

    Parameters
    ----------
    ref
        An image reference as in the config's ``images``.

    Returns
    -------
    str
    """
    return ref.removeprefix("bundled:") if ref.startswith("bundled:") else Path(ref).stem
