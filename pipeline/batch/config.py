"""The batch configuration (``configs/archive-example.yaml``): archive, grouping, output, the
single-run template every series gets, and the one cluster of the batch."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.config import (
    ClusterSpec,
    ConfigSection,
    GridConfig,
    SolverConfig,
    TilingConfig,
    load,
)
from pipeline.ids import json_digest

__all__ = [
    "ArchiveConfig",
    "ArchiveSection",
    "GroupingSection",
    "OutputSection",
    "RunTemplate",
    "SeriesInputs",
    "SeriesOutput",
    "load_archive_config",
]


class ArchiveSection(ConfigSection):
    """Where the products are (``archive``)."""

    roots: tuple[Path, ...]
    sensors: tuple[Literal["PMS", "IRS"], ...] = ("PMS",)

    @field_validator("roots", "sensors", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        """A single root or sensor may be written without a list."""
        return (value,) if isinstance(value, str | Path) else value

    @field_validator("roots")
    @classmethod
    def _some_root(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        """At least one root, with ``~`` expanded."""
        if not value:
            raise ValueError("expected at least one archive root directory")
        return tuple(Path(os.path.expanduser(str(p))) for p in value)


class GroupingSection(ConfigSection):
    """How products are grouped into series (``grouping``)."""

    window_days: int = Field(default=16, ge=1)
    window_origin: date = date(2016, 1, 1)
    min_overlap: float = Field(default=0.5, gt=0, le=1)
    min_dates: int = Field(default=3, ge=2)


class OutputSection(ConfigSection):
    """Where results go (``output``)."""

    path: Path
    extract_dir: Path | None = None
    keep_work: bool = False
    remove_superseded: bool = False
    catalog_title: str = "GF-4 cloud-free series"


class SeriesInputs(ConfigSection):
    """Input options applied to every series (``run.inputs``)."""

    max_dn: float | None = Field(default=None, gt=0)
    dn_rule: Literal["auto", "metadata", "pow2"] = "auto"


class SeriesOutput(ConfigSection):
    """Output options applied to every series (``run.output``)."""

    cog_dtype: Literal["uint16", "float32"] = "uint16"
    quicklooks: bool = True


class RunTemplate(ConfigSection):
    """The single-run sections applied to every series (``run``); see ``configs/*.yaml``."""

    inputs: SeriesInputs = SeriesInputs()
    output: SeriesOutput = SeriesOutput()
    grid: GridConfig = GridConfig()
    tiling: TilingConfig = TilingConfig()
    solver: SolverConfig = SolverConfig()


class ArchiveConfig(ConfigSection):
    """The whole batch configuration; see ``configs/archive-example.yaml``.

    ``cluster`` sits beside ``run``, not inside it: one cluster is started for the whole batch
    and every series runs on it.
    """

    archive: ArchiveSection
    output: OutputSection
    grouping: GroupingSection = GroupingSection()
    run: RunTemplate = RunTemplate()
    cluster: ClusterSpec = ClusterSpec()

    def config_hash(self) -> str:
        """Hash of everything that changes a series' results (the ``run`` template)."""
        run = self.run.model_dump(mode="json")
        # The floor and the shadow-free fill spelt as before they existed where they are off:
        # the series of a batch from before those keys are not re-run.
        self.run.solver.spell_options(run["solver"])
        return json_digest(run, 16)

    @property
    def series_root(self) -> Path:
        """The folder holding one output folder per series."""
        return self.output.path / "series"

    @property
    def state_dir(self) -> Path:
        """The batch's own state: the scan cache and the lock."""
        return self.output.path / ".batch"


def load_archive_config(path: str | Path) -> ArchiveConfig:
    """Read and validate a YAML batch configuration.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    ArchiveConfig
        The frozen, validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown, missing or of the wrong type.
    """
    return load(path, ArchiveConfig, what="archive config")
