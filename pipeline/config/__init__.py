"""Configuration: every YAML file the pipeline reads, validated once, at the door.

:func:`load` reads any of them (a run, an archive batch, an experiment) into its model; the
run's models are here, the batch's and the experiment's live with their subcommands.
"""

from pipeline.config.base import ConfigSection, load, parse
from pipeline.config.cluster import ClusterSpec
from pipeline.config.run import (
    Config,
    GeotiffInputs,
    Gf4Inputs,
    GridConfig,
    InputsConfig,
    MaskConfig,
    OutputConfig,
    QualityConfig,
    SimulatedInputs,
    StacInputs,
    StacSearch,
    TilingConfig,
)
from pipeline.config.solver import SolverConfig

__all__ = [
    "ClusterSpec",
    "Config",
    "ConfigSection",
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
    "load",
    "parse",
]
