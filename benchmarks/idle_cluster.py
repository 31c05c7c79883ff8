"""What an idle local cluster costs: the CPU of its processes with Dask's defaults and with
this package's settings (:data:`pipeline.cluster.backends.CLUSTER_DASK_CONFIG`).

A cluster's timers (heartbeats, memory and system monitors, the scheduler's watchdog) run
whether or not a task does; on a 2-core machine with a worker per core every CPU second they
take is one the solver waits for. Each round starts a 2-worker local cluster with one setting,
lets it settle, and reads the CPU seconds of this process (client, scheduler, nannies) and of
the workers over ``--seconds``; the settings alternate, round after round, so that a machine
shared with others affects both alike.

Usage::

    python benchmarks/idle_cluster.py [--rounds 2] [--seconds 20]
"""

from __future__ import annotations

import argparse
import time

import dask
import psutil
from distributed import Client, LocalCluster

from pipeline.cluster.backends import CLUSTER_DASK_CONFIG


def _cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = times.user + times.system
    return out


def idle_share(settings: dict[str, object], seconds: float) -> tuple[float, float]:
    """Per cent of a core used by an idle 2-worker local cluster with ``settings``: this
    process (client, scheduler, nannies), and the two workers together."""
    with (
        dask.config.set(settings),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        client.submit(sum, [1]).result()
        time.sleep(3)  # start-up and the first task's traffic settle
        me = psutil.Process()
        procs = [me, *me.children(recursive=True)]
        before = _cpu_seconds(procs)
        time.sleep(seconds)
        after = _cpu_seconds(procs)
    used = {pid: after[pid] - before[pid] for pid in after if pid in before}
    driver = used.pop(me.pid, 0.0)
    return 100 * driver / seconds, 100 * sum(used.values()) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    cases = {"Dask's defaults": {}, "CLUSTER_DASK_CONFIG": dict(CLUSTER_DASK_CONFIG)}
    print("% of a core, idle: driver (client, scheduler, nannies) + workers = all")
    for _ in range(args.rounds):
        for name, settings in cases.items():
            driver, workers = idle_share(settings, args.seconds)
            print(f"  {name:20s} {driver:5.2f} + {workers:5.2f} = {driver + workers:5.2f}")


if __name__ == "__main__":
    main()
