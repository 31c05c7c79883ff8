"""The "existing Dask scheduler" recipe of deploy/README.md, step by step as a user runs it.

``dask scheduler`` and ``dask worker --nworkers 2 --nthreads 1`` are started with the ``dask``
command line, and ``python -m pipeline run`` with ``cluster.address: ${DASK_SCHEDULER_ADDRESS}``
runs against them in its own process. Nothing is mocked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from distributed import Client

from pipeline.inputs.synthetic import make_gf4_series
from tests.pipeline.processes import dask_cli_cluster
from tests.pipeline.runs import cli, write_config


@pytest.mark.slow
def test_run_on_a_scheduler_started_with_the_dask_cli(tmp_path: Path) -> None:
    products = make_gf4_series(tmp_path / "products", n_dates=2, size=64, seed=31)
    config = write_config(
        tmp_path / "run.yaml",
        {
            "inputs": {"kind": "gf4", "paths": [str(p) for p in products.paths]},
            "output": {"path": str(tmp_path / "out")},
            "tiling": {"tile_size": 64, "overlap": 8},
            "solver": {"max_iter": 100},
            "cluster": {"kind": "address", "address": "${DASK_SCHEDULER_ADDRESS}"},
        },
    )
    with dask_cli_cluster(tmp_path, n_workers=2) as address:
        env = {"DASK_SCHEDULER_ADDRESS": address}
        done = cli(config, "run", env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        solved = re.search(r"solved (\d+) \(skipped 0\)", done.stdout)
        assert solved is not None and int(solved[1]) > 0, done.stdout
        assert len(list((tmp_path / "out" / "cog").glob("*_B?.tif"))) == 2 * 5
        with Client(address) as client:
            # The tasks ran on the CLI-started workers, which are still there, both of them.
            assert len(client.scheduler_info()["workers"]) == 2
            stages = client.run_on_scheduler(
                lambda dask_scheduler: sorted(
                    {str(t[0]).split("-")[0] for t in dask_scheduler.transition_log}
                )
            )
        assert {"stage", "solve", "products"} <= set(stages)
        again = cli(config, "run", env=env, timeout=300)
        assert again.returncode == 0, again.stderr
        assert f"solved 0 (skipped {solved[1]})" in again.stdout, again.stdout  # resumed
