"""The ``cluster`` section: which cluster runs the tasks, and the options of each back-end.

One model for run, batch and experiment configurations. The back-ends that interpret it are in
:mod:`pipeline.cluster.backends`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import ConfigSection, parse

__all__ = [
    "ClusterSpec",
    "JobqueueOptions",
    "KubernetesOptions",
    "PvcMount",
    "as_cluster_spec",
    "parse_duration",
    "worker_lifetime",
]

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


def as_cluster_spec(cfg: ClusterSpec | Mapping[str, Any]) -> ClusterSpec:
    """A :class:`ClusterSpec` from itself or from a mapping (validated like any ``cluster``
    section: one-line :class:`~pipeline.errors.ConfigError` on bad keys or values)."""
    if isinstance(cfg, ClusterSpec):
        return cfg
    return parse(dict(cfg), ClusterSpec, source="cluster")


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
