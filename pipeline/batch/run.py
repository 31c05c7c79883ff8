"""Running a batch: plan which series need work, run them one after another on one cluster,
report superseded series and publish the catalog.

A failed series is reported and the others go on; a series runs through :func:`pipeline.run.run`
like any single run, connected by address to the cluster the batch started once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.batch.config import ArchiveConfig
from pipeline.batch.manifest import (
    MANIFEST_NAME,
    completed_manifest,
    expected_manifest,
    is_done,
    read_manifest,
)
from pipeline.batch.scan import scan_archive
from pipeline.batch.series import Series, group_products
from pipeline.batch.summary import BatchSummary, SeriesOutcome, Status
from pipeline.cluster.backends import open_cluster
from pipeline.config import Config, parse
from pipeline.errors import PipelineError
from pipeline.ids import code_version
from pipeline.store.durable import write_json
from pipeline.store.layout import Layout

__all__ = ["Plan", "plan_batch", "run_batch", "series_config"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """The series of a batch and what each needs."""

    series: tuple[Series, ...]
    todo: tuple[Series, ...]
    done: tuple[Series, ...]
    pending: tuple[Series, ...]
    unreadable: tuple[tuple[str, str], ...]
    config_hash: str
    code_version: str


def plan_batch(cfg: ArchiveConfig, *, force: bool = False) -> Plan:
    """Scan, group and compare with the manifests: which series need work.

    Parameters
    ----------
    cfg
        The batch configuration.
    force
        Treat every series with enough dates as needing work.

    Returns
    -------
    Plan
        The series in order, split into to do, already done and pending (too few dates).

    Raises
    ------
    ConfigError
        An archive root is not a directory.
    """
    skip = [cfg.output.path] + ([cfg.output.extract_dir] if cfg.output.extract_dir else [])
    scan = scan_archive(
        cfg.archive.roots,
        cfg.archive.sensors,
        cache_path=cfg.state_dir / "scan-cache.json",
        skip=skip,
    )
    series = group_products(scan.products, cfg.grouping)
    version, chash = code_version(), cfg.config_hash()
    todo, done, pending = [], [], []
    for s in series:
        if len(s.products) < cfg.grouping.min_dates:
            pending.append(s)
            continue
        manifest = read_manifest(cfg.series_root / s.id)
        if not force and is_done(manifest, expected_manifest(s, chash, version)):
            done.append(s)
        else:
            todo.append(s)
    return Plan(
        tuple(series), tuple(todo), tuple(done), tuple(pending), scan.unreadable, chash, version
    )


def series_config(cfg: ArchiveConfig, series: Series, address: str) -> Config:
    """The single-run configuration of one series, on the batch's cluster.

    Parameters
    ----------
    cfg
        The batch configuration (its ``run`` template applies to every series).
    series
        The series.
    address
        Address of the batch's Dask scheduler.

    Returns
    -------
    pipeline.config.Config
        Inputs: the series' products; output: ``OUTPUT/series/<id>/``; cluster: ``address``.
    """
    out = cfg.series_root / series.id
    extract = cfg.output.extract_dir or Layout(out).extract
    run = cfg.run
    data = {
        "inputs": {
            "kind": "gf4",
            "paths": [str(p.path) for p in series.products],
            "sensor": series.sensor,
            "extract_dir": str(extract),
            **run.inputs.model_dump(mode="json"),
        },
        "output": {"path": str(out), **run.output.model_dump(mode="json")},
        "grid": run.grid.model_dump(mode="json"),
        "tiling": run.tiling.model_dump(mode="json"),
        "solver": run.solver.model_dump(mode="json"),
        # The batch owns the cluster; each run only connects to it (and the batch already
        # printed the dashboard link once).
        "cluster": {
            "kind": "address",
            "address": address,
            "solver_threads": cfg.cluster.solver_threads,
            "dashboard": False,
        },
    }
    return parse(data, Config, source=f"series {series.id}")


def _outcome(
    cfg: ArchiveConfig, series: Series, status: Status, message: str = "", solved: int = 0
) -> SeriesOutcome:
    """The outcome of one series, with its output folder."""
    out = cfg.series_root / series.id
    return SeriesOutcome(series.id, status, len(series.products), out, message, solved)


def _process(
    cfg: ArchiveConfig, plan: Plan, series: Series, address: str, force: bool
) -> SeriesOutcome:
    """Run one series and write its manifest; any failure becomes a ``failed`` outcome."""
    from pipeline.run import run

    out = cfg.series_root / series.id
    out.mkdir(parents=True, exist_ok=True)
    # An old manifest must not outlive a run that starts rewriting the outputs it describes.
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    log.info("series %s: %d dates -> %s", series.id, len(series.products), out)
    try:
        summary = run(series_config(cfg, series, address), overwrite=force)
    except PipelineError as exc:
        return _outcome(cfg, series, "failed", str(exc))
    except Exception as exc:  # a broken series must not stop the archive
        log.exception("series %s failed", series.id)
        return _outcome(cfg, series, "failed", f"internal error: {type(exc).__name__}: {exc}")
    log.info("series %s:\n%s", series.id, summary.describe())
    if not summary.ok:
        msg = f"{len(summary.failures)} tile task(s) failed; the next batch retries only those"
        return _outcome(cfg, series, "failed", msg, summary.solved)
    manifest = completed_manifest(
        series,
        plan.config_hash,
        plan.code_version,
        run=cfg.run.model_dump(mode="json"),
        solved=summary.solved,
        skipped=summary.solve_skipped,
    )
    if not cfg.output.keep_work:
        # Staged inputs and extracted products are several times the size of the results; the
        # manifest, not the markers, is what makes the next batch skip.
        shutil.rmtree(Layout(out).work, ignore_errors=True)
    write_json(out / MANIFEST_NAME, manifest)
    return _outcome(cfg, series, "processed", solved=summary.solved)


def _superseded(cfg: ArchiveConfig, plan: Plan, finished: set[str]) -> tuple[list[str], list[str]]:
    """Series folders not in the plan, and those of them removed.

    A folder is removed, when ``output.remove_superseded`` is set, if a finished series now
    holds all of its products and more (a series that grew).
    """
    root = cfg.series_root
    if not root.is_dir():
        return [], []
    current = {s.id for s in plan.series}
    grown = [{p.image_id for p in s.products} for s in plan.series if s.id in finished]
    stale, removed = [], []
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name in current or d.name.startswith("."):
            continue
        stale.append(d.name)
        manifest = read_manifest(d)
        ids = {pid for pid, _ in manifest["products"]} if manifest else None
        if cfg.output.remove_superseded and ids and any(ids < g for g in grown):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return stale, removed


@contextlib.contextmanager
def _batch_lock(cfg: ArchiveConfig) -> Iterator[None]:
    """Keep two batches on one output apart (a cron overlap); released if the process dies."""
    path = cfg.state_dir / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise PipelineError(
                f"another batch is running on output.path {cfg.output.path} (lock {path}); "
                "wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _publish(cfg: ArchiveConfig, plan: Plan, finished: set[str]) -> Path:
    """Rewrite the STAC catalog from the manifests of every finished series."""
    from pipeline.batch.stac import publish_catalog

    manifests: list[tuple[Path, dict[str, Any]]] = []
    for s in plan.series:
        series_dir = cfg.series_root / s.id
        if s.id in finished and (manifest := read_manifest(series_dir)) is not None:
            manifests.append((series_dir, manifest))
    return publish_catalog(cfg.output.path, manifests, title=cfg.output.catalog_title)


def run_batch(cfg: ArchiveConfig, *, force: bool = False, dry_run: bool = False) -> BatchSummary:
    """Process every series of the archive that is new or changed, then publish the catalog.

    Parameters
    ----------
    cfg
        The validated batch configuration.
    force
        Reprocess every series, ignoring manifests and tile markers.
    dry_run
        Scan, group and report what would run; process and publish nothing.

    Returns
    -------
    BatchSummary
        Processed, skipped (up to date), failed and pending series; ``ok`` is False when any
        failed. A failed series never stops the others.

    Raises
    ------
    PipelineError
        An archive root is missing, the cluster cannot be started or reached, or another batch
        holds the lock on the output.
    """
    started = time.perf_counter()
    cfg.output.path.mkdir(parents=True, exist_ok=True)
    with _batch_lock(cfg):
        plan = plan_batch(cfg, force=force)
        log.info(
            "%d series: %d to process, %d up to date, %d waiting for more than %s dates",
            len(plan.series),
            len(plan.todo),
            len(plan.done),
            len(plan.pending),
            cfg.grouping.min_dates - 1,
        )
        outcomes = {s.id: _outcome(cfg, s, "skipped") for s in plan.done}
        for s in plan.pending:
            msg = f"{len(s.products)} of {cfg.grouping.min_dates} dates (grouping.min_dates)"
            outcomes[s.id] = _outcome(cfg, s, "pending", msg)
        started_cluster = False
        if dry_run:
            outcomes.update(
                {s.id: _outcome(cfg, s, "planned", "would be processed") for s in plan.todo}
            )
        elif plan.todo:
            # Only now start the cluster: a batch with nothing new must not queue jobs.
            with open_cluster(cfg.cluster) as address:
                started_cluster = True
                for s in plan.todo:
                    outcomes[s.id] = _process(cfg, plan, s, address, force)
        finished = {o.series_id for o in outcomes.values() if o.status in ("processed", "skipped")}
        stale, removed = ([], []) if dry_run else _superseded(cfg, plan, finished)
        catalog = None if dry_run else _publish(cfg, plan, finished)
    summary = BatchSummary(
        outcomes=tuple(outcomes[s.id] for s in plan.series),
        unreadable=plan.unreadable,
        superseded=tuple(stale),
        removed=tuple(removed),
        catalog=catalog,
        cluster_started=started_cluster,
        seconds=time.perf_counter() - started,
    )
    log.info("%s", summary.describe())
    return summary
