"""Configuration of the real-cloud experiment (``kind: real-clouds``, configs/real-clouds.yaml)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from cloudlab.config import SolverSettings
from cloudlab.realdata import resolve_series
from pipeline.config import ConfigSection, load
from pipeline.config.base import read_yaml
from pipeline.errors import ConfigError

__all__ = [
    "KINDS",
    "MaskSettings",
    "PairSettings",
    "RealCloudsConfig",
    "SeriesWindow",
    "SolverEntry",
    "experiment_kind",
    "load_real_clouds_config",
]

Baseline = Literal["temporal-median", "nearest-clear", "clear-median"]

#: The experiment kinds that ``python -m cloudlab experiment`` runs.
KINDS = ("simulation", "real-clouds")


class SeriesWindow(ConfigSection):
    """One series: the dates from ``start`` to ``end`` (inclusive), named ``name``."""

    name: str
    start: dt.date
    end: dt.date

    @model_validator(mode="after")
    def _ordered(self) -> SeriesWindow:
        """``start`` not after ``end``."""
        if self.start > self.end:
            raise ValueError(f"series {self.name!r}: `start` is after `end`")
        return self


class SolverEntry(ConfigSection):
    """A method of :func:`cloudcore.decompose` and its λ rule (as the pipeline's ``solver.lam``:
    ``star`` λ̂*, ``auto`` 1/√d, or a number; d is the pixels of the series' D) and scale (as
    ``solver.lam_scale``, 1 here: the rule's own λ), and whether its decomposition is refined
    (:func:`cloudcore.refine`, as the pipeline's ``solver.refine``)."""

    method: str
    lam: Literal["star", "auto"] | float = "star"
    lam_scale: float = Field(default=1.0, gt=0)
    refine: bool = False

    @field_validator("method")
    @classmethod
    def _known(cls, value: str) -> str:
        """Any name in :data:`cloudcore.METHODS`."""
        from cloudcore import METHODS

        if value not in METHODS:
            raise ValueError(f"unknown method {value!r}; choose one of {', '.join(METHODS)}")
        return value

    @field_validator("lam")
    @classmethod
    def _positive(cls, value: str | float) -> str | float:
        """A numeric λ must be > 0."""
        if not isinstance(value, str) and value <= 0:
            raise ValueError("a numeric `lam` must be > 0")
        return value

    @property
    def label(self) -> str:
        """``method/lam``, e.g. ``aatm/star``, with ``+refine`` when refined: the name in the
        tables."""
        return f"{self.method}/{self.lam}" + ("+refine" if self.refine else "")


class PairSettings(ConfigSection):
    """How (clear target, cloudy source) date pairs are chosen, per series."""

    clear_max: float = Field(default=0.01, ge=0, le=1)
    min_observed: float = Field(default=0.5, ge=0, le=1)
    cloudy_min: float = Field(default=0.05, ge=0, le=1)
    cloudy_max: float = Field(default=0.7, ge=0, le=1)
    per_series: int = Field(default=3, ge=1)
    #: How the source date is treated: ``drop-source`` leaves it out of the pasted series (its
    #: clouds then occur once, as real clouds do), ``keep-source`` keeps it (the same cloud at
    #: the same pixels on two dates). Each protocol is scored (docs/REAL-CLOUDS.md).
    protocols: tuple[Literal["drop-source", "keep-source"], ...] = ("drop-source", "keep-source")

    @field_validator("protocols")
    @classmethod
    def _some_protocol(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """At least one, none twice."""
        if not value or len(set(value)) != len(value):
            raise ValueError("expected 'drop-source', 'keep-source' or both, once each")
        return value


class MaskSettings(ConfigSection):
    """Mask agreement: :func:`cloudcore.classify` on the unmodified series, against the reference.

    ``cloud``, ``haze``, ``shadow`` and ``radius`` override :class:`cloudcore.MaskRule`'s
    defaults (None: keep them).
    """

    enabled: bool = True
    cloud: float | None = Field(default=None, gt=0)
    haze: float | None = Field(default=None, gt=0)
    shadow: float | None = Field(default=None, gt=0)
    radius: int | None = Field(default=None, ge=0)

    def overrides(self) -> dict[str, Any]:
        """The rule's fields that were set."""
        fields = {"cloud": self.cloud, "haze": self.haze, "shadow": self.shadow}
        fields["radius"] = self.radius
        return {k: v for k, v in fields.items() if v is not None}


def _default_series() -> tuple[SeriesWindow, ...]:
    return tuple(
        SeriesWindow(name=str(y), start=dt.date(y, 5, 1), end=dt.date(y, 10, 31))
        for y in (2008, 2009, 2010, 2011)
    )


class RealCloudsConfig(ConfigSection):
    """The real-cloud experiment; see ``configs/real-clouds.yaml`` for a commented example."""

    kind: Literal["real-clouds"] = "real-clouds"
    name: str = "real-clouds"
    data: str = "bundled:p035r032"
    series: tuple[SeriesWindow, ...] = Field(default_factory=_default_series)
    #: Window ``[row, col, rows, cols]`` of the images to use (None: all of them).
    crop: tuple[int, int, int, int] | None = None
    bands: tuple[str, ...] | None = None
    #: Leave out of every series the dates with more than this fraction of their observed
    #: pixels cloud or shadow (None: keep every date, as the pipeline does).
    drop_cloudy_above: float | None = Field(default=None, ge=0, le=1)
    solvers: tuple[SolverEntry, ...] = (
        SolverEntry(method="aatm", lam="star"),
        SolverEntry(method="aatm", lam="auto"),
        SolverEntry(method="rpca", lam="star"),
        SolverEntry(method="rpca", lam="auto"),
        SolverEntry(method="nnrpca", lam="auto"),
        SolverEntry(method="rpca", lam="auto", refine=True),
    )
    baselines: tuple[Baseline, ...] = ("temporal-median", "nearest-clear", "clear-median")
    pairs: PairSettings = PairSettings()
    mask: MaskSettings = MaskSettings()
    seed: int = 0
    solver: SolverSettings = SolverSettings()
    output: Path = Path("real-clouds-output")
    #: Directory that a relative ``data`` path is resolved against (the config file's folder).
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("series", "solvers")
    @classmethod
    def _not_empty(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        """At least one entry."""
        if not value:
            raise ValueError("expected at least one entry")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> RealCloudsConfig:
        """Series names and solver labels are table keys: no repeats."""
        names = [s.name for s in self.series]
        labels = [s.label for s in self.solvers]
        if len(set(names)) != len(names):
            raise ValueError("`series`: names must be distinct")
        if len(set(labels)) != len(labels):
            raise ValueError("`solvers`: the same method, λ and refine twice")
        return self

    @property
    def data_path(self) -> Path:
        """The series file."""
        return resolve_series(self.data, self.base_dir)


def experiment_kind(path: str | Path) -> str:
    """The ``kind`` of an experiment configuration: ``simulation`` (the default) or
    ``real-clouds``.

    A file that cannot be read is called a simulation config here: its loader then reports the
    problem with the file.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    str

    Raises
    ------
    ConfigError
        ``kind`` is set to something else.
    """
    try:
        data = read_yaml(path)
    except ConfigError:
        return "simulation"
    kind = data.get("kind", "simulation") if isinstance(data, dict) else "simulation"
    if kind not in KINDS:
        raise ConfigError(
            f"{path}: key `kind`: got {kind!r}, expected one of {', '.join(map(repr, KINDS))}"
        )
    return str(kind)


def load_real_clouds_config(path: str | Path) -> RealCloudsConfig:
    """Read and validate a real-cloud experiment configuration.

    Parameters
    ----------
    path
        The YAML file; a relative ``data`` path is taken against its folder.

    Returns
    -------
    RealCloudsConfig

    Raises
    ------
    ConfigError
        The file is missing or not YAML, a key is unknown or of the wrong type, or the data
        file cannot be found.
    """
    path = Path(path)
    cfg = load(path, RealCloudsConfig, program_keys={"base_dir": path.resolve().parent})
    _ = cfg.data_path  # fail at the door
    return cfg
