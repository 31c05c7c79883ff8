"""Every row of docs/BAD_INPUT.md: a one-line ``error: …`` naming the file, tile or key and what to
change, exit code 2, and no published output (no cube.zarr, cog/, quicklooks/, diagnostics.csv,
COMPLETE.json). Run through the real CLI: in-process ``main`` where the error comes before any
cluster starts, a subprocess where the process itself must be constrained (a full disk).
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import zarr

from pipeline.cli import main
from pipeline.inputs.synthetic import SimulatedProducts, make_gf4_series
from tests.pipeline.processes import free_port
from tests.pipeline.runs import config_dict, published, write_config


@pytest.fixture(scope="module")
def gf4(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """3 small GF-4 PMS products, copied by each test that damages one."""
    return make_gf4_series(tmp_path_factory.mktemp("gf4_bad"), n_dates=3, size=64, seed=7)


def _gf4_copy(gf4: SimulatedProducts, dst: Path) -> list[Path]:
    return [Path(shutil.copytree(p, dst / Path(p).name)) for p in gf4.paths]


def _gf4_config(out: Path, paths: list[Path], **extra: Any) -> dict[str, Any]:
    data = config_dict(out, paths)
    data["inputs"] = {"kind": "gf4", "paths": [str(p) for p in paths]}
    data["inputs"]["extract_dir"] = str(out.parent / "extract")
    data["tiling"] = {"tile_size": 32, "overlap": 8}
    for section, values in extra.items():
        data.setdefault(section, {}).update(values)
    return data


def _cli(tmp_path: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``run`` in-process; assert exit 2, one ``error:`` line, nothing published."""
    cfg = write_config(tmp_path / "c.yaml", data)
    code = main(["-q", "run", str(cfg)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    out = Path(data["output"]["path"]) if isinstance(data.get("output"), dict) else None
    if out is not None:
        assert published(out) == []
    return err


# Each case: (id, builder(tmp_path, gf4, geotiff) -> config dict, substrings the line must have).
Builder = Callable[[Path, SimulatedProducts, SimulatedProducts], dict[str, Any]]


def _missing_file(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    return config_dict(tmp / "out", [*tif.paths[:2], tmp / "scene_20200109.tif"])


def _no_match(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", [])
    data["inputs"]["paths"] = [str(tmp / "nothing_here" / "*.tif")]
    return data


def _corrupt_tiff(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    bad = tmp / "scene_20200109.tif"
    bad.write_bytes(b"II*\x00" + b"\x07" * 4000)  # a TIFF signature, then garbage
    return config_dict(tmp / "out", [*tif.paths[:2], bad])


def _truncated_tiff(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    image = next(paths[1].glob("*.tiff"))
    data = image.read_bytes()
    image.write_bytes(data[: len(data) * 2 // 3])  # an interrupted download
    return _gf4_config(tmp / "out", paths)


def _truncated_archive(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    archive = tmp / f"{paths[2].name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(paths[2], arcname=paths[2].name)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    return _gf4_config(tmp / "out", [*paths[:2], archive])


def _xml_tag(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    xml = next(paths[0].glob("GF4_PMS_*.xml"))
    text = xml.read_text()
    start, end = text.index("<CenterTime>"), text.index("</CenterTime>") + len("</CenterTime>")
    xml.write_text(text[:start] + text[end:])
    return _gf4_config(tmp / "out", paths)


def _xml_garbage(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    next(paths[0].glob("GF4_PMS_*.xml")).write_text("<ProductMetaData><CenterTime>")
    return _gf4_config(tmp / "out", paths)


def _rpb_missing(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    next(paths[1].glob("*.rpb")).unlink()
    return _gf4_config(tmp / "out", paths)


def _rpb_malformed(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    paths = _gf4_copy(gf4, tmp)
    next(paths[1].glob("*.rpb")).write_text("lineOffset = not a number;\n")
    return _gf4_config(tmp / "out", paths)


def _bands_differ(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    src_path = tif.paths[1]
    four = tmp / Path(src_path).name
    with rasterio.open(src_path) as src:
        profile = {**src.profile, "count": 4}
        with rasterio.open(four, "w", **profile) as dst:
            dst.write(src.read([1, 2, 3, 4]))
    return config_dict(tmp / "out", [tif.paths[0], four, tif.paths[2]])


def _one_date(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    return config_dict(tmp / "out", tif.paths[:1])


def _same_date(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    twin = tmp / f"copy_{Path(tif.paths[0]).name}"
    shutil.copy(tif.paths[0], twin)
    return config_dict(tmp / "out", [*tif.paths[:2], twin])


def _above_max_dn(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", tif.paths[:3])
    data["inputs"]["max_dn"] = 1000  # the files hold DN up to 65535
    data["cluster"]["n_workers"] = 1
    return data


def _unknown_key(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", tif.paths)
    data["solver"]["max_iters"] = 10
    return data


def _wrong_type(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", tif.paths)
    data["tiling"]["tile_size"] = "large"
    return data


def _bad_crs(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", tif.paths)
    data["grid"] = {"crs": "EPSG:999999"}
    return data


def _not_writable(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    blocker = tmp / "a_file"
    blocker.write_text("not a directory")
    return config_dict(blocker / "out", tif.paths)


def _outside_bounds(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    data = config_dict(tmp / "out", tif.paths)
    data["grid"] = {"bounds": [500_000, 4_500_000, 506_400, 4_506_400]}  # 100 km away
    return data


def _unreachable(tmp: Path, gf4: SimulatedProducts, tif: SimulatedProducts) -> dict[str, Any]:
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    return config_dict(tmp / "out", tif.paths, kind="address", address=address)


CASES: list[tuple[str, Builder, tuple[str, ...]]] = [
    ("missing-file", _missing_file, ("scene_20200109.tif: no such file", "inputs.paths")),
    ("glob-matches-nothing", _no_match, ("inputs.paths: pattern", "matches no file")),
    ("corrupt-tiff", _corrupt_tiff, ("scene_20200109.tif: not a readable raster",)),
    ("truncated-tiff", _truncated_tiff, (".tiff: file is truncated", "re-download")),
    ("truncated-tar-gz", _truncated_archive, (".tar.gz: archive is truncated or corrupt",)),
    ("xml-missing-tag", _xml_tag, (".xml: missing required tag <CenterTime>",)),
    ("xml-not-xml", _xml_garbage, (".xml", "not readable XML")),
    ("rpb-missing", _rpb_missing, ("a PMI product holds PMS and IRS", ".rpb is missing")),
    ("rpb-malformed", _rpb_malformed, (".rpb is malformed", "re-download")),
    ("band-lists-differ", _bands_differ, ("bands B1,B2,B3,B4 differ", "remove the file")),
    ("fewer-than-2-dates", _one_date, ("found 1 acquisition(s)", "at least 2 dates")),
    ("same-date-twice", _same_date, ("same time", "remove one from inputs.paths")),
    ("dn-above-max", _above_max_dn, ("tile r", "exceeds max_dn 1000", "inputs.max_dn")),
    ("unknown-config-key", _unknown_key, ("unknown key `solver.max_iters`", "solver.max_iter`?")),
    ("wrong-type-in-config", _wrong_type, ("key `tiling.tile_size`: got 'large'",)),
    ("invalid-crs", _bad_crs, ("grid.crs: 'EPSG:999999' is not a CRS",)),
    ("output-not-writable", _not_writable, ("output.path: cannot write", "writable `output.path`")),
    (
        "inputs-outside-bounds",
        _outside_bounds,
        ("does not overlap grid.bounds", "widen grid.bounds"),
    ),
    ("unreachable-scheduler", _unreachable, ("cluster.address 'tcp://127.0.0.1:", "start it")),
]


@pytest.mark.parametrize(("builder", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_published(
    builder: Builder,
    expected: tuple[str, ...],
    tmp_path: Path,
    gf4: SimulatedProducts,
    geotiff_series: SimulatedProducts,
    capsys: pytest.CaptureFixture[str],
    unanswered_fast: None,
) -> None:
    err = _cli(tmp_path, builder(tmp_path, gf4, geotiff_series), capsys)
    for text in expected:
        assert text in err, err


def test_missing_config_file_and_invalid_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("inputs: [unclosed\n")
    assert main(["run", str(tmp_path / "bad.yaml")]) == 2
    err = capsys.readouterr().err
    assert "is not valid YAML at line" in err and err.count("\n") == 1


def _limit_file_size() -> None:
    # A real "disk full" for this process tree: writes past 64 KiB fail with EFBIG (Python
    # ignores SIGXFSZ, so the write returns the error instead of killing the process).
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_full_disk_is_one_line_exit_2_nothing_published(
    tmp_path: Path, geotiff_series: SimulatedProducts
) -> None:
    out = tmp_path / "out"
    data = config_dict(out, geotiff_series.paths[:3])
    data["cluster"]["n_workers"] = 1
    cfg = write_config(tmp_path / "c.yaml", data)
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "-q", "run", str(cfg)],
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_limit_file_size,
    )
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: output.path: cannot write ") and "file size limit" in line, line
    assert "free space or choose another `output.path`" in line
    assert published(out) == []


@pytest.mark.slow
def test_tile_with_no_valid_data_is_nan_not_an_error(
    tmp_path: Path, geotiff_series: SimulatedProducts, caplog: pytest.LogCaptureFixture
) -> None:
    # grid.bounds two 64 px tile columns wider than the inputs (east): the last column's halos
    # see no data on any date. Decision: not an error — NaN in the cube, nodata in the COGs,
    # one warning naming the tiles.
    out = tmp_path / "out"
    data = config_dict(out, geotiff_series.paths[:3])
    data["grid"] = {"bounds": [440_000, 4_413_600, 452_800, 4_420_000]}
    data["output"]["quicklooks"] = False
    data["cluster"]["n_workers"] = 1
    cfg = write_config(tmp_path / "c.yaml", data)
    assert main(["run", str(cfg)]) == 0
    assert "2 tile(s) have no valid data on any date (r00c03, r01c03)" in caplog.text
    clear = np.asarray(zarr.open_array(store=str(out / "cube.zarr"), path="clear", mode="r")[...])
    assert clear.shape[-1] == 256
    assert np.isnan(clear[..., 128:]).all() and np.isfinite(clear[..., 8:120, 8:120]).all()
    with rasterio.open(sorted((out / "cog").glob("*.tif"))[0]) as cog:
        assert cog.nodata == 0 and (cog.read(1)[:, 128:] == 0).all()
