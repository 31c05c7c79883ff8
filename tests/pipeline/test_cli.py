"""The command line: exit codes, one-line errors, GeoTIFF series end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import rasterio
import yaml

from pipeline.cli import main
from pipeline.fixtures import SimulatedProducts


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_error_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {"inputs": {"kind": "simulated"}, "output": {"path": "o"}, "tiling": {"overlapp": 8}},
    )
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "tiling.overlap`?" in err


def test_missing_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {
            "inputs": {"kind": "geotiff", "paths": ["nope/*.tif"]},
            "output": {"path": str(tmp_path / "o")},
        },
    )
    assert main(["-q", "run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: inputs.paths") and err.count("\n") == 1


def test_unreachable_scheduler_names_the_key(
    tmp_path: Path, geotiff_series: SimulatedProducts, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in geotiff_series.paths]},
            "output": {"path": str(tmp_path / "o")},
            "cluster": {"kind": "address", "address": "tcp://127.0.0.1:9"},
        },
    )
    assert main(["-q", "run", str(cfg)]) == 2
    assert "cluster.address 'tcp://127.0.0.1:9'" in capsys.readouterr().err


def test_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "sim"), "--dates", "2", "--size", "32"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3 and printed[-1].startswith("truth: ")


def test_run_geotiff_series(
    tmp_path: Path, geotiff_series: SimulatedProducts, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in geotiff_series.paths]},
            "output": {"path": str(tmp_path / "out"), "cog_dtype": "float32", "quicklooks": False},
            "tiling": {"tile_size": 64, "overlap": 16},
            "cluster": {"n_workers": 2, "threads_per_worker": 1, "dashboard": False},
        },
    )
    assert main(["-q", "run", str(cfg)]) == 0
    assert "solved 20 (skipped 0)" in capsys.readouterr().out  # 2 x 2 tiles x 5 bands
    cogs = sorted((tmp_path / "out" / "cog").glob("*.tif"))
    assert len(cogs) == 5 * 5
    with rasterio.open(geotiff_series.paths[0]) as src, rasterio.open(cogs[0]) as cog:
        assert cog.crs == src.crs and cog.dtypes[0] == "float32"
        assert cog.transform.a == src.transform.a and cog.transform.e == src.transform.e
