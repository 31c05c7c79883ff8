"""GF-4 scene series to cloud-free mosaics: I/O, tiling, orchestration on Dask, and the CLI."""

from pipeline.errors import ConfigError, InputError, PipelineError, TileError

__all__ = ["ConfigError", "InputError", "PipelineError", "TileError"]
