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
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.errors import ConfigError

#: Environment of worker processes: local workers always get it; job scripts and pods export it
#: before the user's own settings, which may override it.
#:
#: * glibc malloc: Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536, which also freezes glibc's
#:   mmap threshold at 128 KiB: every chunk buffer and strip of a tile task then came from a
#:   fresh mmap and was paged in again, and a run spent ~40 % of its CPU time in the kernel
#:   (blend 2.5x, solve 1.4x slower than with glibc's defaults). These are the values glibc's own
#:   dynamic threshold settles at (32 MiB), with the heap still trimmed once 64 MiB are free.
#: * GDAL_CACHEMAX (MB): GDAL's block cache defaults to 5 % of the machine's memory *per
#:   process*; filled by staging reads and COG writes it made each worker's memory grow with
#:   the scene. Tiles are read once, so a small cache costs nothing.
WORKER_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "33554432",
    "MALLOC_TRIM_THRESHOLD_": "67108864",
    "GDAL_CACHEMAX": "256",
}


__all__ = [
    "ClusterSpec",
    "ConfigSection",
    "JobqueueOptions",
    "KubernetesOptions",
    "PvcMount",
    "as_cluster_spec",
    "jobqueue_kwargs",
    "kubernetes_cluster_spec",
    "make_cluster",
    "open_cluster",
    "parse_duration",
    "worker_lifetime",
]

log = logging.getLogger(__name__)

#: The extra that provides each back-end, named in the error when it is missing.
EXTRAS = {"slurm": "slurm", "pbs": "pbs", "kubernetes": "kubernetes"}
_PACKAGES = {"slurm": "dask-jobqueue", "pbs": "dask-jobqueue", "kubernetes": "dask-kubernetes"}


class ConfigSection(BaseModel):
    """Base of every configuration section and file: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_yaml(self) -> str:
        """The fully resolved configuration (defaults filled in) as YAML, for the run log."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?\s*$")
_UNITS = {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds in a walltime or duration.

    Accepts ``[D-]HH:MM:SS``, ``HH:MM`` (SLURM and PBS walltimes) and ``90s``, ``55m``,
    ``2h``, ``1d``.

    Raises
    ------
    ValueError
        The text is neither form.
    """
    text = str(text).strip()
    if ":" in text:
        days = 0
        if "-" in text:
            d, text = text.split("-", 1)
            days = int(d)
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 2:
            parts.append(0)
        if len(parts) != 3:
            raise ValueError(f"{text!r} is not [D-]HH:MM:SS")
        h, m, s = parts
        return days * 86400 + h * 3600 + m * 60 + s
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 01:00:00, 55m or 2h")
    return int(float(match[1]) * _UNITS[match[2]])


class JobqueueOptions(ConfigSection):
    """Batch-system jobs that each run ``processes`` workers (``cluster.jobqueue``).

    Unset options fall back to dask-jobqueue's own configuration (``~/.config/dask/jobqueue.yaml``),
    so a site's existing defaults keep working.
    """

    queue: str | None = None
    account: str | None = None
    walltime: str = "01:00:00"
    cores: int = Field(default=4, ge=1)
    processes: int = Field(default=1, ge=1)
    memory: str = "16GiB"
    jobs: int = Field(default=1, ge=1)
    lifetime_margin: str = "5m"
    lifetime_stagger: str = "4m"
    python: str | None = None
    job_script_prologue: tuple[str, ...] = ()
    job_extra_directives: tuple[str, ...] = ()
    worker_extra_args: tuple[str, ...] = ()
    local_directory: str | None = None
    log_directory: str | None = None
    interface: str | None = None
    resource_spec: str | None = None  # PBS only, e.g. "select=1:ncpus=4:mem=16gb"

    @model_validator(mode="after")
    def _lifetime_fits(self) -> JobqueueOptions:
        try:
            worker_lifetime(self)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return self


class PvcMount(ConfigSection):
    """A PersistentVolumeClaim mounted into scheduler and worker pods."""

    claim: str
    mount_path: str
    read_only: bool = False


class KubernetesOptions(ConfigSection):
    """A Dask cluster created through the Dask Kubernetes operator (``cluster.kubernetes``)."""

    image: str
    name: str = "cloudremoval"
    namespace: str | None = None
    workers: int = Field(default=2, ge=1)
    cpu: str = "2"
    memory: str = "8Gi"
    env: dict[str, str] = Field(default_factory=dict)
    volumes: tuple[PvcMount, ...] = ()
    scheduler_service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"


class ClusterSpec(ConfigSection):
    """Which cluster runs the tasks: ``local``, ``address``, ``slurm``, ``pbs``, ``kubernetes``.

    ``address`` may name environment variables (``${DASK_SCHEDULER_ADDRESS}``, which the Dask
    operator sets in a DaskJob's runner pod).
    """

    kind: Literal["local", "address", "slurm", "pbs", "kubernetes"] = "local"
    address: str | None = None
    n_workers: int | None = Field(default=None, ge=1)
    threads_per_worker: int | None = Field(default=None, ge=1)
    solver_threads: int | None = Field(default=None, ge=1)
    dashboard: bool = True
    jobqueue: JobqueueOptions | None = None
    kubernetes: KubernetesOptions | None = None

    @field_validator("address")
    @classmethod
    def _expand(cls, value: str | None) -> str | None:
        if value is None:
            return None
        expanded = os.path.expandvars(value)
        if "$" in expanded:
            raise ValueError(
                f"cluster.address {value!r} names an unset environment variable: set it or "
                "write the address (tcp://host:8786)"
            )
        return expanded

    @model_validator(mode="after")
    def _options_needed(self) -> ClusterSpec:
        if self.kind == "address" and not self.address:
            raise ValueError("cluster.kind 'address' needs `cluster.address` (tcp://host:8786)")
        if self.kind == "kubernetes" and self.kubernetes is None:
            raise ValueError("cluster.kind 'kubernetes' needs `cluster.kubernetes.image`")
        return self


def as_cluster_spec(cfg: ClusterSpec | BaseModel | Mapping[str, Any]) -> ClusterSpec:
    """A :class:`ClusterSpec` from itself, a mapping, or :class:`pipeline.config.ClusterConfig`."""
    if isinstance(cfg, ClusterSpec):
        return cfg
    data = cfg.model_dump() if isinstance(cfg, BaseModel) else dict(cfg)
    try:
        return ClusterSpec.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise ConfigError(f"cluster: {' '.join(first[1:3]).strip()}") from None


def _need(kind: str) -> None:
    raise ConfigError(
        f"cluster.kind {kind!r} needs {_PACKAGES[kind]}: pip install 'cloudremoval[{EXTRAS[kind]}]'"
    )


def worker_lifetime(opts: JobqueueOptions) -> tuple[int, int]:
    """(lifetime, stagger) in seconds: a worker retires before its job's walltime.

    distributed draws each worker's lifetime from ``lifetime ± stagger``; the latest retirement,
    ``lifetime + stagger``, must leave ``lifetime_margin`` before the walltime for the worker to
    hand its data over.

    Raises
    ------
    ValueError
        The walltime is too short for the margin and stagger.
    """
    walltime = parse_duration(opts.walltime)
    margin = parse_duration(opts.lifetime_margin)
    stagger = parse_duration(opts.lifetime_stagger)
    lifetime = walltime - margin - stagger
    if lifetime - stagger < 60:
        raise ValueError(
            f"cluster.jobqueue.walltime {opts.walltime} leaves workers less than a minute after "
            f"lifetime_margin {opts.lifetime_margin} and lifetime_stagger "
            f"{opts.lifetime_stagger}: raise the walltime or lower those"
        )
    return lifetime, stagger


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
    # The nanny passes these to the worker it spawns (see WORKER_ENV);
    # the user's prologue comes after, so it can override them.
    exports = [f"export {k}={v}" for k, v in WORKER_ENV.items()]
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
            **WORKER_ENV,
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


def make_cluster(cfg: ClusterSpec | BaseModel | Mapping[str, Any], *, scale: bool = True) -> Any:
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
        with _spawn_environment(WORKER_ENV):
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
def _spawn_environment(env: dict[str, str]) -> Iterator[None]:
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
def open_cluster(cfg: ClusterSpec | BaseModel | Mapping[str, Any]) -> Iterator[str]:
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
