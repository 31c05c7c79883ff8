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
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.config import Config, parse
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.run import run
from tests.pipeline.processes import (
    free_port,
    kill,
    start_scheduler,
    start_worker,
    wait_for_workers,
)
from tests.pipeline.runs import (
    N_BANDS,
    N_TILES,
    PUBLISHED,
    assert_identical,
    cli,
    config_dict,
    markers,
    outputs,
    published,
    row_markers,
    run_and_kill,
    seam_markers,
    solved_tiles,
    wait,
    write_config,
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
        workers = [start_worker(address, logs, f"w{i}", delay) for i in range(2)]
        procs += workers
        wait_for_workers(address, 2, procs)
        yield address, workers
    finally:
        for proc in reversed(procs):
            kill(proc)


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


@pytest.mark.slow
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
    assert solved_tiles(out) == N_TILES // 2 * N_BANDS
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


@pytest.mark.slow
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
        wait(lambda: len(row_markers(out)) >= 3, 120, "3 row markers")
        os.kill(workers[0].pid, signal.SIGKILL)
        killed.append(solved_tiles(out))

    watcher = threading.Thread(target=kill_one_worker_mid_solve, daemon=True)
    watcher.start()
    summary = run(cfg)
    watcher.join(timeout=5)
    assert killed and killed[0] < N_TILES * N_BANDS, "the kill came too late to test anything"
    assert workers[0].wait(timeout=10) == -signal.SIGKILL
    assert summary.ok, summary.describe()
    assert summary.solved == N_TILES * N_BANDS
    assert_identical(outputs(out), reference)


@pytest.mark.slow
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
        ("staging, after the first tile", lambda: len(markers(out, "all-")) >= 1),
        ("solving, after 3 row tasks", lambda: len(row_markers(out)) >= 3),
        ("blending, after 3 seams", lambda: len(seam_markers(out)) >= 3),
        # Every band blended: the mask pass and the last products are under way (the bands'
        # COGs may be written already, in the solve batch).
        ("masking and writing products", lambda: len(markers(out, "blended-")) == N_BANDS),
    ]
    history = []
    before: dict[str, int] = {}
    for what, when in kill_points:
        run_and_kill(cfg, out, when, what)
        after = markers(out)
        # No marker of an earlier attempt was rewritten: finished tiles were not recomputed.
        assert {k: after[k] for k in before} == before, what
        assert published(out) == [], what
        history.append((what, solved_tiles(out)))
        before = after
    assert main(["status", str(cfg)]) == 0
    assert "stopped before finishing" in capsys.readouterr().out

    done_before = solved_tiles(out)
    final = cli(cfg, "run")
    assert final.returncode == 0, final.stderr
    counts = re.search(r"solved (\d+) \(skipped (\d+)\)", final.stdout)
    assert counts is not None, final.stdout
    solved = int(counts.group(1))
    # Only unfinished tiles were recomputed, and each exactly once over all attempts.
    assert solved + done_before == total, (solved, done_before, history)
    assert {k: v for k, v in markers(out).items() if k in before} == before
    assert published(out) == list(PUBLISHED)
    assert json.loads((out / "COMPLETE.json").read_text())["tiles"] == N_TILES
    assert not list(out.glob(".*old-*")) and not list(out.glob("*.partial"))
    assert_identical(outputs(out), reference)
    print(f"kill points (stage, tiles solved at kill): {history}; final run solved {solved}")
