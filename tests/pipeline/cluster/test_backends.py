"""Cluster back-ends.

``address`` runs end to end against a scheduler and a worker started as separate processes
with the ``dask scheduler`` / ``dask worker`` command lines. SLURM, PBS and Kubernetes are not
available here: the job scripts dask-jobqueue would submit and the DaskCluster resource the
operator would receive are generated and checked instead (skipped when the optional package is
not installed).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml
from distributed import Client

from pipeline.cluster.backends import (
    WORKER_ENV,
    jobqueue_kwargs,
    kubernetes_cluster_spec,
    make_cluster,
    open_cluster,
)
from pipeline.config import ClusterSpec, Config, parse
from pipeline.config.cluster import as_cluster_spec, parse_duration, worker_lifetime
from pipeline.errors import ConfigError
from pipeline.inputs.synthetic import make_gf4_series
from pipeline.run import run
from tests.pipeline.processes import dask_cli_cluster


@pytest.fixture(scope="module")
def external_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``dask scheduler`` and one ``dask worker`` as separate processes on 127.0.0.1."""
    with dask_cli_cluster(tmp_path_factory.mktemp("dask_logs"), n_workers=1) as address:
        yield address


def test_address_mode_runs_end_to_end(external_scheduler: str, tmp_path: Path) -> None:
    products = make_gf4_series(tmp_path / "products", n_dates=2, size=64, seed=21)
    cfg = parse(
        {
            "inputs": {"kind": "gf4", "paths": [str(p) for p in products.paths]},
            "output": {"path": str(tmp_path / "out")},
            "tiling": {"tile_size": 64, "overlap": 8},
            "solver": {"max_iter": 100},
            "cluster": {"kind": "address", "address": external_scheduler, "dashboard": False},
        },
        Config,
    )
    summary = run(cfg)
    assert summary.ok and summary.solved == summary.tiles * summary.bands > 0
    assert len(list((tmp_path / "out" / "cog").glob("*.tif"))) == 2 * (5 + 1)  # and masks
    with Client(external_scheduler) as client:
        # The work went through that scheduler, to a worker that is not this process.
        stages = client.run_on_scheduler(
            lambda dask_scheduler: sorted(
                {str(t[0]).split("-")[0] for t in dask_scheduler.transition_log}
            )
        )
        pids = client.run(lambda: __import__("os").getpid())
    assert {"stage", "solve", "blend", "products"} <= set(stages)
    assert len(pids) == 1 and sys.modules["os"].getpid() not in pids.values()
    # A rerun against the same scheduler resumes from the markers.
    assert run(cfg).solved == 0


def test_open_cluster_local_starts_and_stops() -> None:
    with open_cluster({"kind": "local", "n_workers": 1, "dashboard": False}) as address:
        with Client(address) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    with pytest.raises(OSError), Client(address, timeout="1s"):
        pass


def test_local_workers_get_the_worker_environment() -> None:
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 made tile tasks page memory in again and
    # again (pipeline.cluster.backends.WORKER_ENV); the workers must see our settings instead.
    import os

    from pipeline.cluster import connect
    from pipeline.config import ClusterSpec

    with connect(ClusterSpec(n_workers=1, dashboard=False)) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENV})
    assert list(seen.values()) == [WORKER_ENV]


def test_local_workers_move_one_zarr_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # pipeline.cluster.backends.WORKER_ENV: more codec threads than cores preempt the other
    # workers' solves; the user's own ZARR_ASYNC__CONCURRENCY still wins (slow storage).
    from pipeline.cluster import connect
    from pipeline.config import ClusterSpec

    def concurrency() -> int:
        import zarr

        return int(zarr.config.get("async.concurrency"))

    monkeypatch.delenv("ZARR_ASYNC__CONCURRENCY", raising=False)
    with connect(ClusterSpec(n_workers=1, dashboard=False)) as client:
        assert list(client.run(concurrency).values()) == [1]
    monkeypatch.setenv("ZARR_ASYNC__CONCURRENCY", "4")
    with connect(ClusterSpec(n_workers=1, dashboard=False)) as client:
        assert list(client.run(concurrency).values()) == [4]


def test_local_clusters_run_the_quiet_dask_timers() -> None:
    # pipeline.cluster.backends.CLUSTER_DASK_CONFIG: the timers that run whether or not a task
    # does take the GIL from the task thread; the workers and the scheduler must run with ours.
    from pipeline.cluster import connect
    from pipeline.config import ClusterSpec

    def timers(dask_worker: Any) -> dict[str, Any]:
        callbacks = dask_worker.periodic_callbacks
        return {
            "memory_ms": callbacks["memory_monitor"].callback_time,
            "system_ms": callbacks["monitor"].callback_time,
            "disk": dask_worker.monitor.monitor_disk_io,
            "profile": "profile" in callbacks,
        }

    with connect(ClusterSpec(n_workers=1, dashboard=False)) as client:
        (seen,) = client.run(timers).values()
        scheduler_system_ms = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.periodic_callbacks["monitor"].callback_time
        )
    assert seen == {"memory_ms": 1000, "system_ms": 1000, "disk": False, "profile": False}
    assert scheduler_system_ms == 1000


def test_address_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://scheduler.ns.svc:8786")
    spec = as_cluster_spec({"kind": "address", "address": "${DASK_SCHEDULER_ADDRESS}"})
    assert spec.address == "tcp://scheduler.ns.svc:8786"
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    with pytest.raises(ConfigError, match="unset environment variable"):
        as_cluster_spec({"kind": "address", "address": "${DASK_SCHEDULER_ADDRESS}"})
    # The run configuration's own section is accepted as it is.
    assert as_cluster_spec(ClusterSpec(kind="local", n_workers=2)).n_workers == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("01:00:00", 3600),
        ("1-02:00:00", 93600),
        ("30:00", 1800 * 60),
        ("55m", 3300),
        ("90s", 90),
        ("2h", 7200),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    # "30:00" is HH:MM, as SLURM and PBS read a two-part walltime.
    assert parse_duration(text) == seconds


def test_lifetime_is_shorter_than_walltime() -> None:
    spec = as_cluster_spec({"kind": "slurm", "jobqueue": {"walltime": "02:00:00"}})
    assert spec.jobqueue is not None
    lifetime, stagger = worker_lifetime(spec.jobqueue)
    assert (lifetime, stagger) == (7200 - 300 - 240, 240)
    assert lifetime + stagger < 7200
    with pytest.raises(ConfigError, match="walltime 00:08:00 leaves workers less than a minute"):
        as_cluster_spec({"kind": "slurm", "jobqueue": {"walltime": "00:08:00"}})


def _directives(script: str, prefix: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith(prefix)]


def _worker_command(script: str) -> str:
    return next(line for line in script.splitlines() if "distributed.cli.dask_worker" in line)


def _jobqueue_options() -> dict[str, Any]:
    return {
        "queue": "normal",
        "account": "rs-archive",
        "walltime": "02:00:00",
        "cores": 8,
        "processes": 4,
        "memory": "32GiB",
        "python": "/opt/cloudremoval/venv/bin/python",
        "job_script_prologue": ["source /opt/cloudremoval/venv/bin/activate"],
        "local_directory": "$TMPDIR",
    }


def test_slurm_job_script() -> None:
    pytest.importorskip("dask_jobqueue")
    spec = as_cluster_spec({"kind": "slurm", "jobqueue": _jobqueue_options(), "dashboard": False})
    cluster = make_cluster(spec, scale=False)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    sbatch = _directives(script, "#SBATCH")
    assert "#SBATCH -t 02:00:00" in sbatch
    assert "#SBATCH -p normal" in sbatch and "#SBATCH -A rs-archive" in sbatch
    assert "#SBATCH --cpus-per-task=8" in sbatch
    assert any(d.startswith("#SBATCH --mem=") for d in sbatch)
    assert "source /opt/cloudremoval/venv/bin/activate" in script
    # Settings the nanny hands to its workers (WORKER_ENV), before the user's prologue.
    assert script.index("export MALLOC_TRIM_THRESHOLD_=") < script.index("source /opt/")
    cmd = _worker_command(script)
    assert cmd.startswith("/opt/cloudremoval/venv/bin/python -m distributed.cli.dask_worker")
    # 4 single-job worker processes sharing the job's cores and memory.
    for arg in ("--nworkers 4", "--nthreads 2", "--memory-limit 8.00GiB"):
        assert arg in cmd
    assert "--lifetime 6660s --lifetime-stagger 240s" in cmd  # 2 h - 5 min - 4 min
    assert "--local-directory $TMPDIR" in cmd


def test_pbs_job_script() -> None:
    pytest.importorskip("dask_jobqueue")
    options = {**_jobqueue_options(), "resource_spec": "select=1:ncpus=8:mem=32gb"}
    cluster = make_cluster({"kind": "pbs", "jobqueue": options, "dashboard": False}, scale=False)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    pbs = _directives(script, "#PBS")
    assert "#PBS -l walltime=02:00:00" in pbs and "#PBS -q normal" in pbs
    assert "#PBS -A rs-archive" in pbs and "#PBS -l select=1:ncpus=8:mem=32gb" in pbs
    assert "--lifetime 6660s --lifetime-stagger 240s" in _worker_command(script)


def test_missing_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # makes the import fail
    with pytest.raises(
        ConfigError,
        match=r"cluster.kind 'slurm' needs dask-jobqueue: pip install 'cloudremoval\[slurm\]'",
    ):
        make_cluster({"kind": "slurm"})
    monkeypatch.setitem(sys.modules, "dask_kubernetes", None)
    monkeypatch.setitem(sys.modules, "dask_kubernetes.operator", None)
    with pytest.raises(ConfigError, match=r"pip install 'cloudremoval\[kubernetes\]'"):
        make_cluster({"kind": "kubernetes", "kubernetes": {"image": "x"}})
    with pytest.raises(ConfigError, match="nothing to start"):
        make_cluster({"kind": "address", "address": "tcp://h:8786"})


def test_kubernetes_cluster_spec() -> None:
    pytest.importorskip("dask_kubernetes")
    spec = as_cluster_spec(
        {
            "kind": "kubernetes",
            "kubernetes": {
                "image": "registry.example.org/cloudremoval:0.1.0",
                "workers": 3,
                "cpu": "2",
                "memory": "8Gi",
                "volumes": [{"claim": "gf4-data", "mount_path": "/data"}],
            },
        }
    )
    cluster = kubernetes_cluster_spec(spec)
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    assert cluster["kind"] == "DaskCluster"
    worker, scheduler = cluster["spec"]["worker"], cluster["spec"]["scheduler"]
    assert worker["replicas"] == 3
    for pod in (worker["spec"], scheduler["spec"]):
        assert pod["volumes"] == [
            {"name": "data-0", "persistentVolumeClaim": {"claimName": "gf4-data"}}
        ]
        container = pod["containers"][0]
        assert container["image"] == "registry.example.org/cloudremoval:0.1.0"
        assert {"name": "data-0", "mountPath": "/data", "readOnly": False} in container[
            "volumeMounts"
        ]
    assert worker["spec"]["containers"][0]["args"][:2] == ["dask", "worker"]
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    # Every one of the workers' settings, the malloc trim threshold among them.
    assert env["MALLOC_TRIM_THRESHOLD_"] == WORKER_ENV["MALLOC_TRIM_THRESHOLD_"]
    assert {k: env.get(k) for k in WORKER_ENV} == WORKER_ENV
    jsonschema = pytest.importorskip("jsonschema")
    # The Helm chart's copy of the CRD has its references resolved.
    chart = "deployment/helm/dask-kubernetes-operator/crds/daskcluster.yaml"
    crd = yaml.safe_load(files("dask_kubernetes.operator").joinpath(chart).read_text())
    jsonschema.validate(cluster, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    assert jobqueue_kwargs(ClusterSpec(kind="slurm"))["walltime"] == "01:00:00"
