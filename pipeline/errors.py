"""Exception hierarchy of the pipeline: every user-facing failure is one of these.

The CLI turns a :class:`PipelineError` into a one-line message and exit code 2 (bad input or
configuration, the user can fix it); anything else is an internal failure with exit code 1.
"""

from __future__ import annotations

__all__ = ["ConfigError", "InputError", "PipelineError", "TileError"]


class PipelineError(Exception):
    """Base class: a failure the user can act on; the message says what and where."""


class ConfigError(PipelineError):
    """The configuration is invalid: the message names the key and what to change."""


class InputError(PipelineError):
    """An input product or file is unusable: the message names the file and the problem."""


class TileError(PipelineError):
    """A tile could not be processed: carries the tile id."""

    def __init__(self, tile_id: str, message: str) -> None:
        super().__init__(f"tile {tile_id}: {message}")
        self.tile_id = tile_id
        self.message = message

    def __reduce__(self) -> tuple[type[TileError], tuple[str, str]]:
        # Raised on workers and pickled back to the client: the default reduction would call
        # __init__ with the formatted message only.
        return (TileError, (self.tile_id, self.message))
