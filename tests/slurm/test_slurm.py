"""The ``slurm`` back-end on a live SLURM: worker processes are real SLURM jobs.

Needs a running SLURM whose jobs run on this machine (``deploy/slurm/local-cluster.sh up`` as
root gives one) and the ``slurm`` marker: ``python -m pytest -q -m slurm tests/slurm``. The
default suite deselects these tests (``addopts`` in pyproject.toml); without ``sinfo`` or an
idle node they are skipped, saying why (they fail instead with ``CLOUDREMOVAL_REQUIRE_SLURM=1``,
as in ``.ci/run``).

Nothing is mocked: ``python -m pipeline run`` / ``batch`` run in their own processes and start
their workers through dask-jobqueue's ``sbatch``; the jobs are watched with ``squeue`` and the
submitted scripts read back with ``scontrol``. The demo configuration is shrunk (256 px, 5
dates, 128 px tiles) so that each run takes seconds, not minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.inputs.synthetic import make_gf4_series
from tests.pipeline.runs import ROW_MARKER, assert_identical, cli, outputs, write_config

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
JOB_NAME = "cloudremoval"  # pipeline.cluster.backends.jobqueue_kwargs
#: Tiles of the shrunk demo: 256 px frames land on a ~300 px grid, 3 × 3 tiles of 128 px.
SIZE, DATES, TILE, OVERLAP = 256, 5, 128, 32


def _slurm_ready() -> str | None:
    """Why the SLURM tests cannot run here, or None."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no SLURM client commands (sinfo, sbatch) on PATH"
    try:
        state = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 20 s (is slurmctld running?)"
    states = state.stdout.split()
    if state.returncode != 0 or not any(s.startswith(("idle", "mixed")) for s in states):
        return f"no idle SLURM node (sinfo: {state.stdout.strip() or state.stderr.strip()})"
    return None


@pytest.fixture(scope="module", autouse=True)
def slurm() -> None:
    reason = _slurm_ready()
    if reason and os.environ.get("CLOUDREMOVAL_REQUIRE_SLURM"):  # .ci/run, once SLURM is up
        pytest.fail(f"SLURM not available: {reason}")
    if reason:
        pytest.skip(f"SLURM not available: {reason} (deploy/slurm/local-cluster.sh up)")


# --- configurations ------------------------------------------------------------------------------


def jobqueue(logs: Path, jobs: int = 2) -> dict[str, Any]:
    """Single-core worker jobs; ``python`` left unset: dask-jobqueue takes this interpreter."""
    return {
        "cores": 1,
        "processes": 1,
        "memory": "3GiB",
        "jobs": jobs,
        "walltime": "00:30:00",
        "log_directory": str(logs),
    }


def demo_config(out: Path, cluster: dict[str, Any]) -> dict[str, Any]:
    """``configs/demo.yaml``, shrunk, writing to ``out`` on ``cluster``."""
    cfg = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    cfg["inputs"].update(size=SIZE, n_dates=DATES)
    cfg["tiling"] = {"tile_size": TILE, "overlap": OVERLAP}
    cfg["solver"]["max_iter"] = 200
    cfg["output"]["path"] = str(out)
    cfg["cluster"] = {"dashboard": False, **cluster}
    return cfg


#: Seconds for one ``python -m pipeline`` command (worker jobs start in seconds on an idle node).
TIMEOUT = 420


# --- watching the worker jobs ---------------------------------------------------------------------


@dataclass
class Jobs:
    """The ``cloudremoval`` jobs ``squeue`` showed while a run went on."""

    seen: dict[str, set[str]] = field(default_factory=dict)  # job id -> states seen
    lines: list[str] = field(default_factory=list)  # squeue lines, for the record
    scripts: dict[str, str] = field(default_factory=dict)  # job id -> its batch script

    @property
    def ran(self) -> list[str]:
        return sorted(j for j, states in self.seen.items() if "RUNNING" in states)


def squeue() -> list[list[str]]:
    """Our worker jobs: [id, name, state, user, cpus, memory, node or reason]."""
    res = subprocess.run(
        ["squeue", "-h", "-n", JOB_NAME, "-o", "%i|%j|%T|%u|%C|%m|%R"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [line.split("|") for line in res.stdout.splitlines() if line]


def batch_script(job: str) -> str:
    res = subprocess.run(
        ["scontrol", "write", "batch_script", job, "-"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return res.stdout


class Watcher:
    """Polls ``squeue`` in a thread; ``on_running(jobs)`` may act once jobs run (a fault)."""

    def __init__(self, before: set[str], act: Callable[[Jobs], bool] | None = None) -> None:
        self.jobs = Jobs()
        self._before = before
        self._act = act
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Jobs:
        self._thread.start()
        return self.jobs

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _poll(self) -> None:
        acted = False
        while not self._stop.is_set():
            for row in squeue():
                job, state = row[0], row[2]
                if job in self._before:
                    continue
                states = self.jobs.seen.setdefault(job, set())
                if state not in states:  # one line per job and state, for the record
                    self.jobs.lines.append(" ".join(row))
                states.add(state)
                if job not in self.jobs.scripts:
                    self.jobs.scripts[job] = batch_script(job)
            if self._act is not None and not acted:
                acted = self._act(self.jobs)
            self._stop.wait(0.5)


def queued() -> set[str]:
    return {row[0] for row in squeue()}


def wait_gone(jobs: list[str], timeout: float = 90) -> None:
    """Block until none of ``jobs`` is in ``squeue`` any more (the run cancelled them)."""
    deadline = time.monotonic() + timeout
    while set(jobs) & queued():
        assert time.monotonic() < deadline, f"jobs {jobs} still queued after the run"
        time.sleep(1)


def assert_venv_workers(jobs: Jobs) -> None:
    """Every worker job ran ``distributed.cli.dask_worker`` with this interpreter (the venv's)."""
    assert jobs.ran, f"no worker job reached RUNNING: {jobs.lines}"
    for job in jobs.ran:
        script = jobs.scripts[job]
        assert f"#SBATCH -J {JOB_NAME}" in script, script
        assert f"{sys.executable} -m distributed.cli.dask_worker" in script, script


def row_markers(out: Path) -> dict[str, int]:
    done = out / "work" / "done"
    if not done.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in done.iterdir() if ROW_MARKER.fullmatch(p.name)}


def tiles_in(out: Path, markers: set[str]) -> int:
    """Tiles solved by the row tasks whose markers are ``markers`` (a row lists its tiles)."""
    done = out / "work" / "done"
    return sum(len(json.loads((done / m).read_text())["tiles"]) for m in markers)


def record(name: str, text: str) -> None:
    """Keep what SLURM showed, for the closing note (``SLURM_TEST_RECORD`` names a folder)."""
    folder = os.environ.get("SLURM_TEST_RECORD")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.txt").write_text(text)


# --- tests ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shrunk demo on a LocalCluster (2 worker processes), through the CLI."""
    out = tmp_path_factory.mktemp("local") / "out"
    cfg = write_config(
        out.parent / "demo.yaml", demo_config(out, {"kind": "local", "n_workers": 2})
    )
    done = cli(cfg, "run", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return outputs(out)


def test_demo_on_slurm_equals_local_cluster(tmp_path: Path, reference: dict[str, Any]) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    cfg = write_config(
        tmp_path / "demo.yaml", demo_config(out, {"kind": "slurm", "jobqueue": jobqueue(logs)})
    )
    started = time.monotonic()
    with Watcher(queued()) as jobs:
        done = cli(cfg, "run", timeout=TIMEOUT)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert_venv_workers(jobs)
    assert len(jobs.ran) >= 2  # jobs: 2
    # Each worker job wrote its log where the config said, and the worker there registered
    # with the run's scheduler.
    for job in jobs.ran:
        log = (logs / f"{JOB_NAME}-{job}.err").read_text()
        assert "Registered to:" in log, log
    wait_gone(jobs.ran)  # the run cancels its jobs when it ends
    assert_identical(outputs(out), reference)
    # A rerun resumes: nothing is recomputed.
    again = cli(cfg, "run", timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert re.search(r"solved 0 \(skipped [1-9]\d*\)", again.stdout), again.stdout
    record(
        "demo",
        f"wall {seconds:.1f} s\nsqueue during the run:\n"
        + "\n".join(jobs.lines)
        + f"\n\nbatch script of job {jobs.ran[0]}:\n{jobs.scripts[jobs.ran[0]]}",
    )


def test_scancel_of_a_worker_job_mid_run(tmp_path: Path, reference: dict[str, Any]) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    cfg = write_config(
        tmp_path / "demo.yaml", demo_config(out, {"kind": "slurm", "jobqueue": jobqueue(logs)})
    )
    cancelled: list[tuple[str, int]] = []

    def cancel_one_mid_solve(jobs: Jobs) -> bool:
        running = [row[0] for row in squeue() if row[2] == "RUNNING" and row[0] in jobs.seen]
        if len(row_markers(out)) < 2 or not running:
            return False
        subprocess.run(["scancel", running[0]], check=True, timeout=30)
        cancelled.append((running[0], len(row_markers(out))))
        return True

    # Slow every tile a little (sbatch exports this environment to the worker jobs), so the
    # cancel lands while row tasks remain.
    with Watcher(queued(), cancel_one_mid_solve) as jobs:
        first = cli(cfg, "run", env={"CLOUDREMOVAL_TASK_DELAY": "0.5"}, timeout=TIMEOUT)
    assert cancelled, f"no worker job was cancelled: {jobs.lines}\n{first.stdout}{first.stderr}"
    victim, rows_at_cancel = cancelled[0]
    total_rows = len(row_markers(out)) if first.returncode == 0 else None
    assert total_rows is None or rows_at_cancel < total_rows, "the cancel came too late"
    # SLURM itself says the job was cancelled (scontrol keeps finished jobs for MinJobAge).
    shown = subprocess.run(
        ["scontrol", "show", "job", victim], capture_output=True, text=True, timeout=30
    )
    assert "JobState=CANCELLED" in shown.stdout, shown.stdout + shown.stderr
    # dask-jobqueue kept the cluster at 2 jobs: a replacement job was submitted and ran.
    assert len(jobs.ran) >= 3, jobs.lines
    assert_venv_workers(jobs)
    if first.returncode == 3:  # tasks lost with the job beyond their retries: listed, rerun
        assert "FAILED" in first.stdout, first.stdout
        assert not (out / "COMPLETE.json").exists()
    else:
        assert first.returncode == 0, first.stdout + first.stderr
    before = row_markers(out)
    # The rerun recomputes nothing that was done: every marker of the first run is untouched,
    # and it solves exactly the rows without one.
    rerun = cli(cfg, "run", timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    after = row_markers(out)
    assert {k: after[k] for k in before} == before
    counts = re.search(r"solved (\d+) \(skipped (\d+)\)", rerun.stdout)
    assert counts is not None, rerun.stdout
    assert int(counts[1]) == tiles_in(out, set(after) - set(before))
    assert_identical(outputs(out), reference)
    record(
        "scancel",
        f"cancelled job {victim} after {rows_at_cancel} row markers; first run exit "
        f"{first.returncode}; rerun: {counts[0]}\nsqueue:\n" + "\n".join(jobs.lines),
    )


def test_batch_on_slurm(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    make_gf4_series(archive / "a", n_dates=2, size=64, seed=11, center_lonlat=(116.4, 39.9))
    make_gf4_series(
        archive / "b", n_dates=2, size=64, seed=12, center_lonlat=(-60.0, -10.0), archive=True
    )

    def batch_config(out: Path, cluster: dict[str, Any]) -> Path:
        return write_config(
            out.parent / f"{out.name}.yaml",
            {
                "archive": {"roots": [str(archive)]},
                "grouping": {"min_dates": 2},
                "output": {"path": str(out)},
                "run": {
                    "tiling": {"tile_size": 64, "overlap": 8},
                    "solver": {"max_iter": 100},
                },
                "cluster": {"dashboard": False, **cluster},
            },
        )

    slurm_out, local_out = tmp_path / "slurm", tmp_path / "local"
    slurm_cfg = batch_config(
        slurm_out, {"kind": "slurm", "jobqueue": jobqueue(tmp_path / "logs", jobs=1)}
    )
    with Watcher(queued()) as jobs:
        done = cli(slurm_cfg, "batch", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_venv_workers(jobs)
    catalog = json.loads((slurm_out / "stac" / "catalog.json").read_text())
    items = [link for link in catalog["links"] if link["rel"] == "item"]
    assert len(items) == 2
    series = sorted(p.name for p in (slurm_out / "series").iterdir())
    assert len(series) == 2
    # The same batch on a local cluster gives the same series, bit for bit.
    local = cli(
        batch_config(local_out, {"kind": "local", "n_workers": 2}), "batch", timeout=TIMEOUT
    )
    assert local.returncode == 0, local.stderr
    assert sorted(p.name for p in (local_out / "series").iterdir()) == series
    for sid in series:
        assert_identical(outputs(slurm_out / "series" / sid), outputs(local_out / "series" / sid))
    # Nothing new: no job is submitted at all.
    with Watcher(queued()) as idle:
        nothing = cli(slurm_cfg, "batch", timeout=TIMEOUT)
    assert nothing.returncode == 0, nothing.stderr
    assert idle.seen == {}, idle.lines
    record("batch", "squeue during the batch:\n" + "\n".join(jobs.lines))
