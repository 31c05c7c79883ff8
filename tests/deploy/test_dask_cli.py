"""The "existing Dask scheduler" recipe of deploy/README.md, step by step as a user runs it.

``dask scheduler`` and ``dask worker --nworkers 2 --nthreads 1`` are started with the ``dask``
command line, and ``python -m pipeline run`` with ``cluster.address: ${DASK_SCHEDULER_ADDRESS}``
runs against them in its own process. Nothing is mocked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from distributed import Client

from pipeline.inputs.synthetic import make_gf4_series
from tests.pipeline.processes import DASK, free_port, wait_for_workers


@pytest.fixture
def dask_cli(tmp_path: Path) -> Iterator[str]:
    """The recipe's two commands, each its own process; stopped at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    commands = {
        "scheduler": [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port)],
        "worker": [DASK, "worker", address, "--nworkers", "2", "--nthreads", "1"],
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in commands.items():
            with open(tmp_path / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [*command, "--no-dashboard"],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=tmp_path,
                    )
                )
        wait_for_workers(address, 2, procs)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def test_run_on_a_scheduler_started_with_the_dask_cli(dask_cli: str, tmp_path: Path) -> None:
    products = make_gf4_series(tmp_path / "products", n_dates=2, size=64, seed=31)
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "inputs": {"kind": "gf4", "paths": [str(p) for p in products.paths]},
                "output": {"path": str(tmp_path / "out")},
                "tiling": {"tile_size": 64, "overlap": 8},
                "solver": {"max_iter": 100},
                "cluster": {"kind": "address", "address": "${DASK_SCHEDULER_ADDRESS}"},
            }
        )
    )
    env = {**os.environ, "DASK_SCHEDULER_ADDRESS": dask_cli}

    def pipeline_run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline", "-q", "run", str(config)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    done = pipeline_run()
    assert done.returncode == 0, done.stdout + done.stderr
    solved = re.search(r"solved (\d+) \(skipped 0\)", done.stdout)
    assert solved is not None and int(solved[1]) > 0, done.stdout
    assert len(list((tmp_path / "out" / "cog").glob("*.tif"))) == 2 * 5
    with Client(dask_cli) as client:
        # The tasks ran on the CLI-started workers, which are still there, both of them.
        assert len(client.scheduler_info()["workers"]) == 2
        stages = client.run_on_scheduler(
            lambda dask_scheduler: sorted(
                {str(t[0]).split("-")[0] for t in dask_scheduler.transition_log}
            )
        )
    assert {"stage", "solve", "products"} <= set(stages)
    again = pipeline_run()
    assert again.returncode == 0, again.stderr
    assert f"solved 0 (skipped {solved[1]})" in again.stdout, again.stdout  # resumed
