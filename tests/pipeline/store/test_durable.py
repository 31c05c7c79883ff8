"""A write the user must fix becomes one line naming the place (pipeline.store.durable)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from pipeline.store.durable import OutputError, output_errors


def test_a_full_disk_inside_output_errors_is_the_users_one_line_error(tmp_path: Path) -> None:
    where = tmp_path / "cube.zarr"
    with pytest.raises(OutputError) as caught, output_errors(where):
        raise OSError(errno.ENOSPC, "No space left on device")
    message = str(caught.value)
    assert "\n" not in message
    assert str(where) in message and "free space" in message
    assert isinstance(caught.value.__cause__, OSError)


def test_other_errors_pass_output_errors_unchanged(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), output_errors(tmp_path):
        raise FileNotFoundError(errno.ENOENT, "gone", str(tmp_path / "x"))
    with pytest.raises(ValueError), output_errors(tmp_path):
        raise ValueError("not a storage error")
