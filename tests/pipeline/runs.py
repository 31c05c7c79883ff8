"""Whole runs for end-to-end tests: a small geotiff run's config, the CLI in its own process
(killed with ``kill -9`` at a chosen point if need be), the completion markers a run leaves, and
its outputs compared bit for bit (shared by test_faults, test_bad_input, test_resume, test_scene,
tests/deploy/test_dask_cli and tests/slurm/test_slurm)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import yaml
import zarr

TILE, OVERLAP = 64, 16
N_TILES, N_BANDS = 4, 5  # the 128 px geotiff_series fixture in 64 px tiles, 5 bands
PUBLISHED = ("cube.zarr", "cog", "quicklooks", "diagnostics.csv", "COMPLETE.json")

ROW_MARKER = re.compile(r"B\d-r\d\d-[0-9a-f]{16}\.json")  # one per (band, tile row)
SEAM_MARKER = re.compile(r"B\d-s\d\d-[0-9a-f]{16}\.json")  # one per border of tile rows
# The shadowed series (shadowed_series): the date with a shadow, what is left of its reflectance.
SHADOWED, DARK = 3, 0.4


def config_dict(out: Path, paths: list[Path], **cluster: Any) -> dict[str, Any]:
    """A small geotiff run: 4 tiles x 5 bands, quicklooks on."""
    return {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths]},
        "output": {"path": str(out), "quicklooks": True},
        "tiling": {"tile_size": TILE, "overlap": OVERLAP},
        "solver": {"max_iter": 200},
        "cluster": {"dashboard": False, "n_workers": 2, "threads_per_worker": 1, **cluster},
    }


def shadowed_series(folder: Path, region: Callable[[np.ndarray], np.ndarray]) -> tuple[Any, Any]:
    """6 dates of 96² px (about 29 % of each date under simulated cloud) with date
    :data:`SHADOWED`'s clear pixels within ``region`` (a function of the (rows, cols) clear
    booleans) in shadow: every band at :data:`DARK` of its reflectance. Returns the
    :class:`~pipeline.inputs.synthetic.SimulatedProducts` and the shadow's (rows, cols)
    booleans."""
    from pipeline.inputs.synthetic import make_geotiff_series

    products = make_geotiff_series(folder, n_dates=6, size=96, seed=6, max_crop_px=0)
    with rasterio.open(products.truth_path) as src:
        truth = src.read()
    with rasterio.open(products.paths[SHADOWED], "r+") as dst:
        dn = dst.read()
        # A shadow is seen where the date is clear (a cloud above it hides it).
        clear = (np.abs(dn / 65535 - truth) < 0.02).all(axis=0)
        shadow = clear & region(clear)
        dn[:, shadow] = np.round(dn[:, shadow] * DARK).astype(dn.dtype)
        dst.write(dn)
    return products, shadow


def address_config(out: Path, paths: list[Path], scheduler: str, **solver: Any) -> Any:
    """A small geotiff run (48 px tiles, 8 px overlap, no quicklooks) on the scheduler at
    ``scheduler``, with ``solver`` settings: a validated :class:`pipeline.config.Config`."""
    from pipeline.config import Config, parse

    return parse(
        {
            "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths]},
            "output": {"path": str(out), "quicklooks": False},
            "tiling": {"tile_size": 48, "overlap": 8},
            "solver": solver,
            "cluster": {"kind": "address", "address": scheduler, "dashboard": False},
        },
        Config,
    )


def write_config(path: Path, data: dict[str, Any]) -> Path:
    """``data`` written as YAML to ``path``; returns ``path``."""
    path.write_text(yaml.safe_dump(data))
    return path


def published(out: Path) -> list[str]:
    """Which of the user-facing products exist under ``out``."""
    return [name for name in PUBLISHED if (out / name).exists()]


def cli(
    config: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``python -m pipeline -q run CONFIG`` (or another command) in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "-q", *args, str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def markers(out: Path, prefix: str = "") -> dict[str, int]:
    """The completion markers under ``out`` whose name starts with ``prefix``, with their
    modification times (ns)."""
    done = out / "work" / "done"
    if not done.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in done.glob(f"{prefix}*.json")}


def row_markers(out: Path) -> list[Path]:
    """The markers of (band, tile row) tasks solved so far."""
    return [out / "work" / "done" / k for k in markers(out) if ROW_MARKER.fullmatch(k)]


def seam_markers(out: Path) -> list[str]:
    """The names of the markers of seams between tile rows blended so far."""
    return [k for k in markers(out) if SEAM_MARKER.fullmatch(k)]


def solved_tiles(out: Path) -> int:
    """Tiles solved and written so far: tiles are done a row at a time, listed in its marker."""
    total = 0
    for path in row_markers(out):
        try:
            total += len(json.loads(path.read_text())["tiles"])
        except FileNotFoundError:  # superseded and removed while we looked
            pass
    return total


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every 50 ms until it holds; TimeoutError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def outputs(out: Path) -> dict[str, Any]:
    """Everything a user takes away, for exact comparison: cube arrays and coordinates, and per
    COG its bytes, pixels and georeferencing."""
    found: dict[str, Any] = {}
    for name in ("clear", "cloud", "haze", "x", "y", "time"):
        array = zarr.open_array(store=str(out / "cube.zarr"), path=name, mode="r")
        found[f"cube/{name}"] = np.asarray(array[...])
    for cog in sorted((out / "cog").glob("*.tif")):
        with rasterio.open(cog) as src:
            found[f"{cog.name}/pixels"] = src.read()
            found[f"{cog.name}/georef"] = (src.crs.to_wkt(), tuple(src.transform), src.nodata)
        found[f"{cog.name}/bytes"] = cog.read_bytes()
    return found


def assert_identical(got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Two :func:`outputs` are the same: the same keys, arrays bit for bit, the rest equal."""
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            # NaN where nothing was observed: equal_nan, otherwise bit for bit.
            np.testing.assert_array_equal(got[key], value, err_msg=key, strict=True)
        else:
            assert got[key] == value, key


def run_and_kill(cfg: Path, out: Path, when: Callable[[], bool], what: str) -> None:
    """Start ``python -m pipeline run`` in its own process group, and kill -9 the whole group
    (the CLI and its local cluster's worker processes) once ``when()`` holds."""
    env = {**os.environ, "CLOUDREMOVAL_TASK_DELAY": "0.25"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "-q", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        wait(lambda: when() or proc.poll() is not None, 180, what)
        assert proc.poll() is None, f"the run ended before the kill point ({what})"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=15)
    # Every process of the group is gone before the rerun starts.
    wait(lambda: not _group_alive(proc.pid), 15, "the killed process group to exit")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
