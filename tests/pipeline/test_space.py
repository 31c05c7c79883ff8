"""The output disk's room, checked before a run starts
(:func:`pipeline.control.folders.check_space`)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from pipeline.config import Config, parse
from pipeline.control.folders import STORED_FRACTION, check_space, expected_bytes
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.plan import RunPlan, make_plan


class _Usage(NamedTuple):
    total: int
    used: int
    free: int


def _plan(out: Path, paths: list[Path], output: Any = None, **sections: Any) -> RunPlan:
    inputs = {"kind": "geotiff", "paths": [str(p) for p in paths]}
    written = {"path": str(out), **(output or {})}
    return make_plan(parse({"inputs": inputs, "output": written, **sections}, Config))


def _free(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """The output disk reports ``free`` bytes free (the real disk cannot be filled for a test)."""
    monkeypatch.setattr(shutil, "disk_usage", lambda _: _Usage(10 * free + 1, 0, free))


def test_the_estimate_follows_the_stores_data_types(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    base = _plan(tmp_path / "a", geotiff_series.paths)
    values = len(base.acquisitions) * len(base.bands) * base.grid.height * base.grid.width
    assert values > 0
    # float32 COGs hold 2 bytes a value more than uint16 ones.
    wide = _plan(tmp_path / "b", geotiff_series.paths, output={"cog_dtype": "float32"})
    assert expected_bytes(wide) - expected_bytes(base) == pytest.approx(
        2 * values * STORED_FRACTION["cogs"], abs=2
    )
    # A layer of 4 bytes a value in the cube for each of aATM's haze and the refinement's shadow;
    # a haze layer that is all zeros (RPCA's; the refinement's, whose shadow takes its place)
    # compresses to nothing.
    layer = 4 * values * STORED_FRACTION["cube"]
    rpca = _plan(tmp_path / "c", geotiff_series.paths, solver={"method": "rpca"})
    assert expected_bytes(base) - expected_bytes(rpca) == pytest.approx(layer, abs=2)
    refined = _plan(tmp_path / "d", geotiff_series.paths, solver={"method": "rpca", "refine": True})
    assert expected_bytes(refined) - expected_bytes(rpca) == pytest.approx(layer, abs=2)
    aatm_refined = _plan(tmp_path / "e", geotiff_series.paths, solver={"refine": True})
    assert expected_bytes(aatm_refined) == expected_bytes(base)


def test_a_disk_without_room_is_named_before_the_run_starts(
    geotiff_series: SimulatedProducts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    plan = _plan(out, geotiff_series.paths)
    expected = expected_bytes(plan)
    caplog.set_level(logging.WARNING, logger="pipeline.control.folders")
    _free(monkeypatch, expected)  # just enough: no warning
    assert check_space(plan) == expected
    assert not caplog.records
    _free(monkeypatch, expected - 1)
    check_space(plan)
    (record,) = caplog.records
    message = record.getMessage()
    assert message.startswith(f"output.path: {out} has ") and "GB free" in message
    assert "choose another `output.path`" in message


def test_what_an_earlier_run_left_counts_towards_the_room(
    geotiff_series: SimulatedProducts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A resumed run writes only what is missing: the bytes already under ``output.path`` are
    taken off the estimate (and it is never below 0)."""
    out = tmp_path / "out"
    plan = _plan(out, geotiff_series.paths)
    expected = expected_bytes(plan)
    (out / "work").mkdir(parents=True)
    (out / "work" / "left.bin").write_bytes(b"\0" * 1000)
    caplog.set_level(logging.WARNING, logger="pipeline.control.folders")
    _free(monkeypatch, expected - 1000)
    assert check_space(plan) == expected - 1000
    assert not caplog.records
    (out / "work" / "left.bin").write_bytes(b"\0" * (expected + 5000))
    assert check_space(plan) == 0
