"""The command line: exit codes, one-line errors, GeoTIFF series end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import yaml
import zarr
from PIL import Image

from pipeline.cli import main
from pipeline.inputs.synthetic import SimulatedProducts


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_error_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {
            "inputs": {"kind": "simulated"},
            "output": {"path": str(tmp_path / "o")},
            "tiling": {"overlapp": 8},
        },
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
    tmp_path: Path,
    geotiff_series: SimulatedProducts,
    capsys: pytest.CaptureFixture[str],
    unanswered_fast: None,
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
    cogs = sorted((tmp_path / "out" / "cog").glob("*_B?.tif"))
    assert len(cogs) == 5 * 5
    with rasterio.open(geotiff_series.paths[0]) as src, rasterio.open(cogs[0]) as cog:
        assert cog.crs == src.crs and cog.dtypes[0] == "float32"
        assert cog.transform.a == src.transform.a and cog.transform.e == src.transform.e


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_go_before_or_after_the_subcommand(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs" / "o"
    cfg = _write(
        tmp_path / "c.yaml",
        {"inputs": {"kind": "geotiff", "paths": ["nope/*.tif"]}, "output": {"path": str(out)}},
    )
    argv = ["--debug", "-q", "run", str(cfg)] if where == "before" else ["run", str(cfg), "-q"]
    argv += ["--debug"] if where == "after" else []
    assert main(argv) == 2  # the user's error, not an argparse one (which exits with 2 too)
    assert capsys.readouterr().err.startswith("error: inputs.paths")
    # Stopped before writing anything: no empty output directory is left behind.
    assert not (tmp_path / "runs").exists()


def test_bad_input_keeps_an_existing_output_directory(tmp_path: Path) -> None:
    """Only directories the run made, and only while empty, go when it stops on bad input."""
    out = tmp_path / "o"
    (out / "work").mkdir(parents=True)
    (out / "notes.txt").write_text("the user's")
    cfg = _write(
        tmp_path / "c.yaml",
        {"inputs": {"kind": "geotiff", "paths": ["nope/*.tif"]}, "output": {"path": str(out)}},
    )
    assert main(["-q", "run", str(cfg)]) == 2
    assert (out / "notes.txt").read_text() == "the user's" and (out / "work").is_dir()


def test_plan_of_simulated_inputs_simulates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    cfg = _write(
        tmp_path / "c.yaml",
        {"inputs": {"kind": "simulated", "n_dates": 3}, "output": {"path": str(out)}},
    )
    assert main(["-q", "plan", str(cfg)]) == 0
    assert "`run` simulates the 3 dates first" in capsys.readouterr().out
    assert not out.exists()  # no products simulated, no work folder


def test_products_of_a_run_are_labelled_quicklooks(
    tmp_path: Path, geotiff_series: SimulatedProducts
) -> None:
    cfg = _write(
        tmp_path / "c.yaml",
        {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in geotiff_series.paths]},
            "output": {"path": str(tmp_path / "out")},
            "tiling": {"tile_size": 128, "overlap": 0},
            "cluster": {"n_workers": 1, "threads_per_worker": 1, "dashboard": False},
        },
    )
    assert main(["-q", "run", str(cfg)]) == 0
    looks = sorted((tmp_path / "out" / "quicklooks").glob("*.png"))
    assert len(looks) == len(geotiff_series.paths)
    image = np.asarray(Image.open(looks[0]))  # (rows, columns, RGB)
    # A black title bar above the two halves, with the white label text in it.
    bar = image[:12]
    assert (bar == 0).mean() > 0.5 and bar.max() == 255
    # Three panels side by side: observed, the mask over it, cloud-free.
    codes = zarr.open_array(store=str(tmp_path / "out" / "cube.zarr"), path="mask", mode="r")
    mask = np.asarray(codes[0])
    height, width = mask.shape
    assert image.shape[1] == 3 * width + 2 * max(width // 50, 2)
    top = image.shape[0] - height  # the title bar's height
    left = image[top:, :width].astype(int)
    middle = image[top:, width + max(width // 50, 2) :][:, :width].astype(int)
    cloud, clear = mask == 2, mask == 0
    assert cloud.any() and clear.any()
    # cloud is tinted red; clear pixels are the observed image as it is
    assert (middle[cloud, 0] - middle[cloud, 1]).mean() > 60
    np.testing.assert_array_equal(middle[clear], left[clear])
