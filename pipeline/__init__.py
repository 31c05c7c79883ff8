"""GF-4 scene series to cloud-free mosaics: I/O, tiling, orchestration on Dask, and the CLI.

:func:`remove_clouds` (an :class:`xarray.DataArray` in, an :class:`xarray.Dataset` out) is an
attribute that imports :mod:`pipeline.api` on first use (PEP 562): ``import pipeline`` (as every
module of the package does, and every worker) does not load the whole run path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.errors import ConfigError, InputError, PipelineError, TileError

if TYPE_CHECKING:  # resolved lazily at run time, see __getattr__
    from pipeline.api import remove_clouds

__all__ = ["ConfigError", "InputError", "PipelineError", "TileError", "remove_clouds"]


def __getattr__(name: str) -> Any:
    if name == "remove_clouds":
        from pipeline.api import remove_clouds

        return remove_clouds
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
