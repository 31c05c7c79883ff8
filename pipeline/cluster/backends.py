"""Cluster back-ends beyond a local cluster: SLURM and PBS through dask-jobqueue, Kubernetes
through the Dask operator (dask-kubernetes), and an existing scheduler by address.

The back-end libraries are optional: only the kind that needs one imports it, and a missing one
is a :class:`ConfigError` naming the extra to install. Every back-end gives a scheduler address;
:func:`open_cluster` yields it, so a batch starts its cluster once and every series run
connects to it (``cluster.kind: address`` in the per-series configuration).

Batch systems kill a job at its walltime, whatever the worker is doing. Workers are therefore
told to retire earlier (``--lifetime``, staggered so that not all retire at once) and the cluster
is kept at its size adaptively, so retired workers are replaced by fresh jobs and tasks move
off gracefully instead of being lost with a killed job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dask

from pipeline.config.cluster import ClusterSpec, JobqueueOptions, as_cluster_spec, worker_lifetime
from pipeline.errors import ConfigError

#: Environment of worker processes: local workers get it (:func:`local_worker_env`), job scripts
#: and pods export it before the user's own settings; the user's own values win in both.
#:
#: * glibc malloc: Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536, which also freezes glibc's
#:   mmap threshold at 128 KiB: every chunk buffer and strip of a tile task then came from a
#:   fresh mmap and was paged in again, and a run spent ~40 % of its CPU time in the kernel
#:   (blend 2.5x, solve 1.4x slower than with glibc's defaults).
#:   A worker solves tile after tile of the same size, so it keeps what it frees for the next
#:   one: arrays up to 256 MiB come from the heap (a 1280² × 7 tile's float32 layers are 44 MiB,
#:   its float64 refit 88 MiB; glibc's own dynamic threshold stops at 32 MiB, so each of them
#:   was mapped afresh and zeroed by the kernel, tile after tile), the heap is trimmed only
#:   once 1 GiB of it is free, and all free pages go back between tasks
#:   (:mod:`pipeline.cluster.heap`). One malloc arena: a task thread's arena other than the
#:   main one grows in heaps of 64 MiB and maps anything larger afresh. At 2560² (two runs
#:   each, alternated, 2026-11-26) the solving threads took 22-30 k page faults for the
#:   sampled tiles against 96-141 k with 32 MiB, two arenas and a 64 MiB trim threshold, and
#:   their CPU was 0.94-0.95 of the bare solve's against 1.06-1.10; the run's peak rose
#:   0.2 GiB (docs/PERFORMANCE.md). zarr's codec threads, which each kept an arena of freed
#:   chunk buffers under the default of 8 per core, share it too.
#: * GDAL_CACHEMAX (MB): GDAL's block cache defaults to 5 % of the machine's memory *per
#:   process*; filled by staging reads and COG writes it made each worker's memory grow with
#:   the scene. Tiles are read once, so a small cache costs nothing.
#: * ZARR_ASYNC__CONCURRENCY: how many chunks one Zarr read or write encodes, decodes and moves
#:   at once (Zarr's default 10). A worker per core already keeps every core busy, so more
#:   codec threads than that only preempt the other workers' solves. With 1, a 2560² run on
#:   two workers (4 runs alternated, ``benchmarks/pipeline_run.py --sizes 2560 --scopes tile``)
#:   took 97.3 and 99.1 s against 99.6 and 100.9 s, 183.9 and 188.1 CPU s against 188.1 and
#:   190.3, and its solving threads were preempted 24-39 % less often. On storage with long
#:   latencies (an object store, a busy parallel file system) a higher value may pay: set it.
WORKER_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "268435456",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
    "MALLOC_ARENA_MAX": "1",
    "GDAL_CACHEMAX": "256",
    "ZARR_ASYNC__CONCURRENCY": "1",
}

#: Dask settings of the clusters this package starts, unless the environment sets them
#: (``DASK_…`` variables). Each is a timer that runs whether or not a task does, in the
#: scheduler, the nannies (in the driver's process on a local cluster) or the workers, and
#: takes the GIL from the task thread while it runs; a run's tasks last seconds to minutes.
#: On an idle 2-worker local cluster (``python benchmarks/idle_cluster.py``, Dask's defaults
#: against these, alternated) all its processes together used 7.9-8.8 % of a core with Dask's
#: defaults, 1.2 % with these (3.5-3.9 % with the first three alone); on two cores that is CPU
#: the solver gets back, though in a run the timers' share is smaller than idle
#: (docs/PERFORMANCE.md).
#:
#: * the workers' statistical profiler samples every thread's stack 100 times a second; it
#:   only feeds the dashboard's Profile page (task stream, progress and memory stay);
#: * the event-loop watchdog's tick (20 ms) and work stealing's balancing (100 ms) run on the
#:   scheduler: once a second is plenty;
#: * the memory monitor of every worker and nanny (100 ms): its pause and terminate
#:   thresholds are checked once a second (a row task grows by about a tile's state, 0.2 GiB,
#:   in a second, against limits of gigabytes; the kernel's OOM killer stays the last resort);
#: * the system monitor's samples for the dashboard's System page (500 ms), once a second, and
#:   without the host's disk counters (``psutil.disk_io_counters`` reads every block device's
#:   statistics; that plot is dropped).
CLUSTER_DASK_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.scheduler.work-stealing-interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "1s",
    "distributed.admin.system-monitor.disk": False,
}


def dask_env_name(key: str) -> str:
    """The environment variable that sets Dask's configuration ``key``."""
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


def cluster_dask_config() -> dict[str, Any]:
    """:data:`CLUSTER_DASK_CONFIG` less the keys the environment sets."""
    return {k: v for k, v in CLUSTER_DASK_CONFIG.items() if dask_env_name(k) not in os.environ}


def local_worker_env() -> dict[str, str]:
    """:data:`WORKER_ENV` for the workers of a local cluster, where, as in job scripts and pods,
    a variable of the user's own environment wins, except those that Dask's nanny puts into
    the environment itself (``distributed.nanny.pre-spawn-environ``): an earlier cluster of
    this process leaves them behind (:func:`spawn_environment`), so they are not the user's."""
    dasks_own = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    users = {k: os.environ[k] for k in WORKER_ENV if k in os.environ and k not in dasks_own}
    return {**WORKER_ENV, **users}


def remote_worker_env() -> dict[str, str]:
    """What job scripts and pods export for their workers: :data:`WORKER_ENV` and
    :data:`CLUSTER_DASK_CONFIG` as ``DASK_…`` variables (those workers read their own
    environment, not this process's configuration)."""
    dask_vars = {dask_env_name(k): str(v) for k, v in CLUSTER_DASK_CONFIG.items()}
    return {**WORKER_ENV, **dask_vars}


__all__ = [
    "CLUSTER_DASK_CONFIG",
    "WORKER_ENV",
    "cluster_dask_config",
    "dask_env_name",
    "jobqueue_kwargs",
    "kubernetes_cluster_spec",
    "local_worker_env",
    "make_cluster",
    "open_cluster",
    "remote_worker_env",
]

log = logging.getLogger(__name__)

#: The extra that provides each back-end, named in the error when it is missing.
EXTRAS = {"slurm": "slurm", "pbs": "pbs", "kubernetes": "kubernetes"}
_PACKAGES = {"slurm": "dask-jobqueue", "pbs": "dask-jobqueue", "kubernetes": "dask-kubernetes"}


def _need(kind: str) -> None:
    raise ConfigError(
        f"cluster.kind {kind!r} needs {_PACKAGES[kind]}: pip install 'cloudremoval[{EXTRAS[kind]}]'"
    )


def jobqueue_kwargs(spec: ClusterSpec) -> dict[str, Any]:
    """Keyword arguments of ``SLURMCluster``/``PBSCluster`` for ``spec`` (no import needed)."""
    opts = spec.jobqueue or JobqueueOptions()
    lifetime, stagger = worker_lifetime(opts)
    kwargs: dict[str, Any] = {
        "cores": opts.cores,
        "processes": opts.processes,
        "memory": opts.memory,
        "walltime": opts.walltime,
        "worker_extra_args": [
            "--lifetime",
            f"{lifetime}s",
            "--lifetime-stagger",
            f"{stagger}s",
            *opts.worker_extra_args,
        ],
        "job_name": "cloudremoval",
        # The scheduler runs in the batch process: a free dashboard port never clashes with
        # another user's scheduler on a shared login node.
        "scheduler_options": {"dashboard_address": ":0"},
    }
    optional = {
        "queue": opts.queue,
        "account": opts.account,
        "python": opts.python,
        "local_directory": opts.local_directory,
        "log_directory": opts.log_directory,
        "interface": opts.interface,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    # The nanny passes these to the worker it spawns (see remote_worker_env);
    # the user's prologue comes after, so it can override them.
    exports = [f"export {k}={v}" for k, v in remote_worker_env().items()]
    kwargs["job_script_prologue"] = [*exports, *opts.job_script_prologue]
    if opts.job_extra_directives:
        kwargs["job_extra_directives"] = list(opts.job_extra_directives)
    if spec.kind == "pbs" and opts.resource_spec:
        kwargs["resource_spec"] = opts.resource_spec
    return kwargs


def kubernetes_cluster_spec(spec: ClusterSpec) -> dict[str, Any]:
    """The ``DaskCluster`` resource for ``spec``: the operator's default plus PVC mounts.

    Scheduler and workers must see the archive and output paths the batch process sees, so each
    :class:`PvcMount` is mounted into both at the same path.
    """
    try:
        from dask_kubernetes.operator import make_cluster_spec
    except ImportError:
        _need("kubernetes")
    opts = spec.kubernetes
    assert opts is not None  # ensured by ClusterSpec
    threads = spec.threads_per_worker or 1
    cluster = make_cluster_spec(
        name=opts.name,
        image=opts.image,
        n_workers=opts.workers,
        resources={
            "requests": {"cpu": opts.cpu, "memory": opts.memory},
            "limits": {"cpu": opts.cpu, "memory": opts.memory},
        },
        env={
            "OMP_NUM_THREADS": "1",
            "NUMBA_NUM_THREADS": str(threads),
            **remote_worker_env(),
            **opts.env,
        },
        worker_command=["dask", "worker", "--nthreads", str(threads)],
        scheduler_service_type=opts.scheduler_service_type,
    )
    volumes = [
        {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": v.claim}}
        for i, v in enumerate(opts.volumes)
    ]
    mounts = [
        {"name": f"data-{i}", "mountPath": v.mount_path, "readOnly": v.read_only}
        for i, v in enumerate(opts.volumes)
    ]
    for role in ("scheduler", "worker"):
        pod = cluster["spec"][role]["spec"]
        if volumes:
            pod.setdefault("volumes", []).extend(volumes)
            for container in pod["containers"]:
                container.setdefault("volumeMounts", []).extend(mounts)
    return dict(cluster)


def make_cluster(cfg: ClusterSpec | Mapping[str, Any], *, scale: bool = True) -> Any:
    """Start the cluster ``cfg`` describes and return it (a ``distributed`` cluster object).

    Parameters
    ----------
    cfg
        A :class:`ClusterSpec`, the ``cluster`` section of a run configuration, or a mapping.
        Kinds: ``local`` (worker processes on this machine), ``slurm`` and ``pbs`` (jobs of
        ``cluster.jobqueue.cores`` cores through dask-jobqueue, kept at ``jobs`` jobs),
        ``kubernetes`` (a DaskCluster through the Dask operator).
    scale
        For ``slurm``/``pbs``: submit the jobs (adaptively kept at ``jobs``). False creates
        the cluster object only, e.g. to inspect ``cluster.job_script()``.

    Returns
    -------
    distributed.deploy.Cluster
        Close it (or use it as a context manager) to stop it.

    Raises
    ------
    ConfigError
        ``kind`` is ``address`` (nothing to start), or the back-end's package is missing.
    """
    spec = as_cluster_spec(cfg)
    if spec.kind == "address":
        raise ConfigError(
            "cluster.kind 'address' connects to a running scheduler: nothing to start"
        )
    if spec.kind == "local":
        from distributed import LocalCluster

        # One single-threaded worker process per core unless told: the solver holds the GIL
        # in places and numba threads are per process.
        cores = os.cpu_count() or 1
        threads = spec.threads_per_worker or 1
        # Nannies hand this process's Dask configuration to the workers they spawn.
        with dask.config.set(cluster_dask_config()), spawn_environment(local_worker_env()):
            return LocalCluster(
                n_workers=spec.n_workers or max(cores // threads, 1),
                threads_per_worker=threads,
                processes=True,
                silence_logs=logging.WARNING,
                dashboard_address=":0",  # a free port: never clash with another cluster on 8787
            )
    if spec.kind in ("slurm", "pbs"):
        try:
            from dask_jobqueue import PBSCluster, SLURMCluster
        except ImportError:
            _need(spec.kind)
        cls = SLURMCluster if spec.kind == "slurm" else PBSCluster
        opts = spec.jobqueue or JobqueueOptions()
        with dask.config.set(cluster_dask_config()):  # the scheduler runs in this process
            cluster = cls(**jobqueue_kwargs(spec))
        if not scale:
            return cluster
        # Adaptive with a fixed size: workers retiring at their lifetime are replaced by new
        # jobs; plain scale() would let the cluster shrink to nothing after one walltime.
        cluster.adapt(minimum_jobs=opts.jobs, maximum_jobs=opts.jobs)
        return cluster
    try:
        from dask_kubernetes.operator import KubeCluster
    except ImportError:
        _need("kubernetes")
    assert spec.kubernetes is not None
    return KubeCluster(
        custom_cluster_spec=kubernetes_cluster_spec(spec),
        namespace=spec.kubernetes.namespace,
        shutdown_on_close=True,
    )


@contextmanager
def spawn_environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in this process while local workers are spawned, then restore it.

    Nannies copy the spawning process's environment to their workers, and for variables that
    are read at process start (glibc's MALLOC_*) that is the only way in. Dask's own setting
    (``distributed.nanny.pre-spawn-environ``) yields to a variable already in the environment,
    and an earlier cluster of this process leaves MALLOC_TRIM_THRESHOLD_=65536 there.
    """
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def open_cluster(cfg: ClusterSpec | Mapping[str, Any]) -> Iterator[str]:
    """Start (or, for ``address``, just name) the cluster and yield its scheduler address.

    Parameters
    ----------
    cfg
        As for :func:`make_cluster`.

    Yields
    ------
    str
        The scheduler address; a started cluster is closed on exit.
    """
    spec = as_cluster_spec(cfg)
    if spec.kind == "address":
        assert spec.address is not None
        yield spec.address
        return
    cluster = make_cluster(spec)
    with cluster:
        log.info("%s cluster started: %s", spec.kind, cluster.scheduler_address)
        if spec.dashboard and getattr(cluster, "dashboard_link", None):
            print(f"Dask dashboard: {cluster.dashboard_link}", flush=True)
        yield cluster.scheduler_address
