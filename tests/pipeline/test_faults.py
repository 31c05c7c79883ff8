"""Faults with real processes: a tile that keeps failing, a worker killed with SIGKILL, and the
whole ``python -m pipeline run`` killed with SIGKILL at several points and rerun.

Nothing is mocked: the scheduler and workers are separate ``dask`` processes on 127.0.0.1 (or
the local cluster the CLI starts), the kills are ``kill -9``, stores are real Zarr and products
real GeoTIFFs. The outputs of interrupted-and-resumed runs must be *bitwise* identical to an
uninterrupted run's, and a rerun must recompute only the tiles without a completion marker.

``CLOUDREMOVAL_TASK_DELAY`` (see :mod:`pipeline.cluster`) slows every task a little so that a
kill lands inside the stage it targets on a 2-core CI machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import yaml
import zarr

from pipeline.cli import main
from pipeline.config import Config, parse
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.run import run
from tests.pipeline.processes import DASK, free_port, start_scheduler, wait_for_workers

TILE, OVERLAP = 64, 16
N_TILES, N_BANDS = 4, 5  # the 128 px geotiff_series fixture in 64 px tiles, 5 bands
PUBLISHED = ("cube.zarr", "cog", "quicklooks", "diagnostics.csv", "COMPLETE.json")


# --- helpers shared with test_bad_input -------------------------------------------------------


def config_dict(out: Path, paths: list[Path], **cluster: Any) -> dict[str, Any]:
    """A small geotiff run: 4 tiles x 5 bands, quicklooks on."""
    return {
        "inputs": {"kind": "geotiff", "paths": [str(p) for p in paths]},
        "output": {"path": str(out), "quicklooks": True},
        "tiling": {"tile_size": TILE, "overlap": OVERLAP},
        "solver": {"max_iter": 200},
        "cluster": {"dashboard": False, "n_workers": 2, "threads_per_worker": 1, **cluster},
    }


def write_config(path: Path, data: dict[str, Any]) -> Path:
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


def _markers(out: Path, prefix: str = "") -> dict[str, int]:
    done = out / "work" / "done"
    if not done.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in done.glob(f"{prefix}*.json")}


ROW_MARKER = re.compile(r"B\d-r\d\d-[0-9a-f]{16}\.json")  # one per (band, tile row)
SEAM_MARKER = re.compile(r"B\d-s\d\d-[0-9a-f]{16}\.json")  # one per border of tile rows


def _row_markers(out: Path) -> list[Path]:
    return [out / "work" / "done" / k for k in _markers(out) if ROW_MARKER.fullmatch(k)]


def _seam_markers(out: Path) -> list[str]:
    return [k for k in _markers(out) if SEAM_MARKER.fullmatch(k)]


def _solved_tiles(out: Path) -> int:
    """Tiles solved and written so far: tiles are done a row at a time, listed in its marker."""
    total = 0
    for path in _row_markers(out):
        try:
            total += len(json.loads(path.read_text())["tiles"])
        except FileNotFoundError:  # superseded and removed while we looked
            pass
    return total


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
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
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            # NaN where nothing was observed: equal_nan, otherwise bit for bit.
            np.testing.assert_array_equal(got[key], value, err_msg=key, strict=True)
        else:
            assert got[key] == value, key


# --- processes ----------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=15)


def _start_worker(address: str, logs: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    # --no-nanny: the worker is this very process, so kill -9 of its pid is a lost worker.
    with open(logs / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            [
                *(DASK, "worker", address, "--host", "127.0.0.1", "--nthreads", "1"),
                *("--no-nanny", "--no-dashboard", "--name", name),
                *("--local-directory", str(logs / name)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )


@pytest.fixture
def dask_processes(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """``dask scheduler`` and 2 ``dask worker`` processes on 127.0.0.1; all killed at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path / "dask_logs"
    logs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_scheduler(port, logs))
        delay = {"CLOUDREMOVAL_TASK_DELAY": "0.3"}
        workers = [_start_worker(address, logs, f"w{i}", delay) for i in range(2)]
        procs += workers
        wait_for_workers(address, 2, procs)
        yield address, workers
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def reference(
    geotiff_series: SimulatedProducts, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The outputs of one uninterrupted run (in-process, local cluster)."""
    out = tmp_path_factory.mktemp("reference")
    summary = run(parse(config_dict(out, geotiff_series.paths), Config))
    assert summary.ok and summary.solved == N_TILES * N_BANDS, summary.describe()
    return outputs(out)


# --- tests ------------------------------------------------------------------------------------


def test_failing_tile_is_reported_nothing_published_rerun_finishes(
    geotiff_series: SimulatedProducts, tmp_path: Path, reference: dict[str, Any]
) -> None:
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.yaml", config_dict(out, geotiff_series.paths))
    # A real exception, raised inside the real worker process on every attempt (2 retries).
    broken = cli(cfg, "run", env={"CLOUDREMOVAL_FAIL_TILES": "r01c00"})
    assert broken.returncode == 3, broken.stderr
    assert broken.stderr.strip().splitlines()[-1].startswith("error: 5 tile task(s) failed")
    # The tile's row task fails (rows are solved and blended together), naming the tile.
    failed = re.findall(
        r"FAILED solve B\d-r01-\w+: solve (B\d-r01c00-\w+): injected failure", broken.stdout
    )
    assert len(failed) == N_BANDS, broken.stdout
    # Every other row finished, and nothing a user would take for a result exists.
    assert _solved_tiles(out) == N_TILES // 2 * N_BANDS
    assert published(out) == []
    # The mask tasks share the solve batch behind every row: a failed row drops them, so no
    # mask was classified over the hole (the template's metadata is all there is).
    mask = out / "cube.zarr.partial" / "mask"
    assert [p.name for p in mask.rglob("*") if p.is_file()] == ["zarr.json"]
    status = cli(cfg, "status")
    assert "run: failed" in status.stdout and "solve: 10/20 tiles done" in status.stdout

    fixed = cli(cfg, "run")
    assert fixed.returncode == 0, fixed.stderr
    assert "staged 0 (skipped 4), solved 10 (skipped 10)" in fixed.stdout
    assert published(out) == list(PUBLISHED)
    assert_identical(outputs(out), reference)


def test_worker_killed_mid_solve_outputs_unchanged(
    geotiff_series: SimulatedProducts,
    tmp_path: Path,
    dask_processes: tuple[str, list[subprocess.Popen[bytes]]],
    reference: dict[str, Any],
) -> None:
    address, workers = dask_processes
    out = tmp_path / "out"
    cfg = parse(config_dict(out, geotiff_series.paths, kind="address", address=address), Config)
    killed: list[int] = []

    def kill_one_worker_mid_solve() -> None:
        # Watch the markers appear, then kill -9 a worker while row tasks are still running.
        _wait(lambda: len(_row_markers(out)) >= 3, 120, "3 row markers")
        os.kill(workers[0].pid, signal.SIGKILL)
        killed.append(_solved_tiles(out))

    watcher = threading.Thread(target=kill_one_worker_mid_solve, daemon=True)
    watcher.start()
    summary = run(cfg)
    watcher.join(timeout=5)
    assert killed and killed[0] < N_TILES * N_BANDS, "the kill came too late to test anything"
    assert workers[0].wait(timeout=10) == -signal.SIGKILL
    assert summary.ok, summary.describe()
    assert summary.solved == N_TILES * N_BANDS
    assert_identical(outputs(out), reference)


def _run_and_kill(cfg: Path, out: Path, when: Callable[[], bool], what: str) -> None:
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
        _wait(lambda: when() or proc.poll() is not None, 180, what)
        assert proc.poll() is None, f"the run ended before the kill point ({what})"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=15)
    # Every process of the group is gone before the rerun starts.
    _wait(lambda: not _group_alive(proc.pid), 15, "the killed process group to exit")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kill9_whole_run_at_four_points_then_resume(
    geotiff_series: SimulatedProducts,
    tmp_path: Path,
    reference: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.yaml", config_dict(out, geotiff_series.paths))
    total = N_TILES * N_BANDS
    kill_points: list[tuple[str, Callable[[], bool]]] = [
        ("staging, after the first tile", lambda: len(_markers(out, "all-")) >= 1),
        ("solving, after 3 row tasks", lambda: len(_row_markers(out)) >= 3),
        ("blending, after 3 seams", lambda: len(_seam_markers(out)) >= 3),
        # Every band blended: the mask pass and the last products are under way (the bands'
        # COGs may be written already, in the solve batch).
        ("masking and writing products", lambda: len(_markers(out, "blended-")) == N_BANDS),
    ]
    history = []
    before: dict[str, int] = {}
    for what, when in kill_points:
        _run_and_kill(cfg, out, when, what)
        after = _markers(out)
        # No marker of an earlier attempt was rewritten: finished tiles were not recomputed.
        assert {k: after[k] for k in before} == before, what
        assert published(out) == [], what
        history.append((what, _solved_tiles(out)))
        before = after
    assert main(["status", str(cfg)]) == 0
    assert "stopped before finishing" in capsys.readouterr().out

    done_before = _solved_tiles(out)
    final = cli(cfg, "run")
    assert final.returncode == 0, final.stderr
    counts = re.search(r"solved (\d+) \(skipped (\d+)\)", final.stdout)
    assert counts is not None, final.stdout
    solved = int(counts.group(1))
    # Only unfinished tiles were recomputed, and each exactly once over all attempts.
    assert solved + done_before == total, (solved, done_before, history)
    assert {k: v for k, v in _markers(out).items() if k in before} == before
    assert published(out) == list(PUBLISHED)
    assert json.loads((out / "COMPLETE.json").read_text())["tiles"] == N_TILES
    assert not list(out.glob(".*old-*")) and not list(out.glob("*.partial"))
    assert_identical(outputs(out), reference)
    print(f"kill points (stage, tiles solved at kill): {history}; final run solved {solved}")
