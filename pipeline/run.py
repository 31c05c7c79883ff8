"""One pipeline run: inputs → target grid → stage → solve → blend → products, on a Dask cluster.

Every stage is one Dask task per tile (per band where the work is per band), keyed by the
tile's deterministic id. Tiles whose completion marker exists are skipped, so a rerun resumes
where a previous one stopped; a failed tile is reported at the end and the others still finish.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pipeline.blend import BlendJob, blend_tile
from pipeline.cluster import Task, connect, run_tasks, solver_threads
from pipeline.config import Config, InputsConfig
from pipeline.errors import InputError
from pipeline.outputs import (
    COMPONENTS,
    Layout,
    create_store,
    publish_dir,
    read_markers,
    write_cogs,
    write_diagnostics,
    write_quicklook,
)
from pipeline.solve import SolveJob, solve_tile
from pipeline.stage import StageJob, clear_work, prepare_input_store, stage_tile
from pipeline.tiling import TileGrid, tile_id

__all__ = ["RunSummary", "TileFailure", "code_version", "discover", "run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TileFailure:
    """A tile (or product) that failed in one stage."""

    stage: str
    key: str
    message: str


@dataclass(frozen=True)
class RunSummary:
    """What a run did; ``ok`` is False when any tile failed."""

    output: Path
    tiles: int
    bands: int
    staged: int
    stage_skipped: int
    solved: int
    solve_skipped: int
    blended: int
    seconds: float
    failures: tuple[TileFailure, ...] = ()
    products: tuple[str, ...] = field(default=())
    phase_seconds: tuple[tuple[str, float], ...] = ()  # (phase, wall seconds), in run order

    @property
    def ok(self) -> bool:
        return not self.failures

    def describe(self) -> str:
        """A short human-readable account for the terminal."""
        lines = [
            f"output: {self.output}",
            f"tiles: {self.tiles} x {self.bands} bands; staged {self.staged} "
            f"(skipped {self.stage_skipped}), solved {self.solved} (skipped {self.solve_skipped}), "
            f"blended {self.blended}; {self.seconds:.1f} s",
        ]
        if self.phase_seconds:
            lines.append("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.phase_seconds))
        lines += [f"FAILED {f.stage} {f.key}: {f.message}" for f in self.failures]
        return "\n".join(lines)


def code_version() -> str:
    """Package and solver versions: part of every tile id, so new code never reuses old results."""
    import cloudcore

    try:
        package = version("cloudremoval")
    except PackageNotFoundError:
        package = "unknown"
    return f"cloudremoval-{package}+cloudcore-{getattr(cloudcore, '__version__', 'unknown')}"


def _simulate(inputs: InputsConfig, layout: Layout) -> list[str]:
    """Simulate the demo series once; reuse it while the simulation settings are unchanged."""
    from pipeline.fixtures import make_gf4_series

    settings = {
        "n_dates": inputs.n_dates,
        "size": inputs.size,
        "seed": inputs.seed,
        "sensor": inputs.sensor,
        "cloud_style": inputs.cloud_style,
    }
    record_path = layout.products / "simulation.json"
    if record_path.exists():
        record = json.loads(record_path.read_text())
        if record.get("settings") == settings and all(Path(p).exists() for p in record["paths"]):
            return list(record["paths"])
        shutil.rmtree(layout.products)
    layout.products.mkdir(parents=True, exist_ok=True)
    log.info(
        "simulating %d GF-4-like dates of %d px into %s",
        inputs.n_dates,
        inputs.size,
        layout.products,
    )
    made = make_gf4_series(
        layout.products,
        n_dates=inputs.n_dates,
        size=inputs.size,
        seed=inputs.seed,
        sensor=inputs.sensor,
        cloud_style=inputs.cloud_style,
    )
    paths = [str(p) for p in made.paths]
    record = {"settings": settings, "paths": paths, "truth_path": str(made.truth_path)}
    record_path.write_text(json.dumps(record, indent=1))
    return paths


def discover(inputs: InputsConfig, layout: Layout) -> list[Any]:
    """The acquisitions described by the ``inputs`` section, in time order."""
    from pipeline.sources import discover_geotiffs, discover_gf4

    if inputs.kind == "geotiff":
        times = None
        if inputs.dates is not None:
            times = [datetime(d.year, d.month, d.day) for d in inputs.dates]
        return discover_geotiffs(
            list(inputs.paths),
            times=times,
            date_pattern=inputs.date_pattern,
            max_dn=inputs.max_dn,
            dn_rule=inputs.dn_rule,
        )
    paths = _simulate(inputs, layout) if inputs.kind == "simulated" else list(inputs.paths)
    extract_dir = inputs.extract_dir or layout.extract
    return discover_gf4(
        paths,
        sensor=inputs.sensor,
        extract_dir=extract_dir,
        max_dn=inputs.max_dn,
        dn_rule=inputs.dn_rule,
    )


def _identity(acq: Any) -> str:
    """Product id, DN scale and file identity: a product rewritten under the same id (a new
    simulation, a re-delivered scene) must not resume from the old one's tiles."""
    stat = Path(acq.path).stat()
    return f"{acq.id}@{acq.max_dn:g}:{stat.st_size}:{stat.st_mtime_ns}"


def _failures(stage: str, failed: dict[str, BaseException]) -> list[TileFailure]:
    return [
        TileFailure(stage, key, str(exc).splitlines()[0]) for key, exc in sorted(failed.items())
    ]


def _quicklook_bands(bands: tuple[str, ...]) -> list[int]:
    """Red, green, blue band indices of GF-4 PMS (B4, B3, B2) when present, else the first band."""
    rgb = ["B4", "B3", "B2"]
    return [bands.index(b) for b in rgb] if all(b in bands for b in rgb) else [0]


def run(config: Config, *, overwrite: bool = False) -> RunSummary:
    """Run the whole pipeline described by ``config``.

    Parameters
    ----------
    config
        The validated configuration.
    overwrite
        Redo every tile, ignoring completion markers of earlier runs.

    Returns
    -------
    RunSummary
        Counts of tiles done and skipped per stage and the failures, if any.

    Raises
    ------
    PipelineError
        Invalid inputs or configuration, or an unreachable cluster. Failures of single tiles do
        not raise; they are listed in the summary.
    """
    from pipeline.grid import derive_grid
    from pipeline.sources import check_series

    started = time.perf_counter()
    log.info("configuration:\n%s", config.to_yaml().rstrip())
    layout = Layout(Path(config.output.path))
    if overwrite:
        clear_work(layout)
    layout.work.mkdir(parents=True, exist_ok=True)

    acqs = discover(config.inputs, layout)
    for warning in check_series(acqs):
        log.warning("%s", warning)
    bounds = config.grid.bounds
    grid = derive_grid(acqs, crs=config.grid.crs, resolution=config.grid.resolution, bounds=bounds)
    tiles = TileGrid(grid.height, grid.width, config.tiling.tile_size, config.tiling.overlap)
    bands: tuple[str, ...] = tuple(acqs[0].bands)
    if not bands:
        raise InputError(f"{acqs[0].path}: no bands")
    log.info(
        "%d acquisitions, bands %s; grid %s %dx%d px; %d tiles of %d px (+%d overlap)",
        len(acqs),
        ",".join(bands),
        grid.crs,
        grid.width,
        grid.height,
        len(tiles),
        tiles.tile_size,
        tiles.overlap,
    )

    version_tag = code_version()
    input_ids = [_identity(a) for a in acqs]
    scene = {
        "grid": [grid.crs, list(grid.transform)[:6], grid.width, grid.height],
        "tiling": [tiles.tile_size, tiles.overlap],
        "bands": list(bands),
    }
    solve_settings = {**scene, "solver": config.solver.model_dump(mode="json")}

    def ids(band: str | None, settings: dict[str, Any]) -> dict[tuple[int, int], str]:
        return {
            (t.row, t.col): tile_id(
                input_ids=input_ids, tile=t, band=band, settings=settings, version=version_tag
            )
            for t in tiles
        }

    stage_ids = ids(None, scene)
    solve_ids = {b: ids(b, solve_settings) for b in bands}
    failures: list[TileFailure] = []
    phases: list[tuple[str, float]] = []
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases.append((name, now - mark))
        mark = now

    with connect(config.cluster) as client:
        lap("setup")
        # 1. Stage.
        prepare_input_store(
            layout,
            grid,
            tiles,
            acqs,
            token=tile_id(
                input_ids=input_ids,
                tile=tiles.tile(0, 0),
                band=None,
                settings={**scene, "store": "input"},
                version=version_tag,
            ),
        )
        todo = [t for t in tiles if not layout.marker(stage_ids[t.row, t.col]).exists()]
        stage_jobs = [
            Task(
                stage_ids[t.row, t.col],
                stage_tile,
                (StageJob(t, stage_ids[t.row, t.col], tuple(acqs), grid, layout),),
            )
            for t in todo
        ]
        staged, failed = run_tasks(client, stage_jobs, stage="stage")
        failures += _failures("stage", failed)
        lap("stage")
        unstaged = {key for key in failed}

        # 2. Solve (skip tiles whose marker and part exist, and tiles that could not be staged).
        threads = solver_threads(config.cluster)
        solve_jobs = []
        solve_skipped = 0
        for b, band in enumerate(bands):
            for t in tiles:
                sid = solve_ids[band][t.row, t.col]
                if layout.marker(sid).exists() and layout.part(sid).exists():
                    solve_skipped += 1
                elif stage_ids[t.row, t.col] not in unstaged:
                    job = SolveJob(t, b, band, sid, layout, config.solver, threads)
                    solve_jobs.append(Task(sid, solve_tile, (job,)))
        solved, failed = run_tasks(client, solve_jobs, stage="solve")
        failures += _failures("solve", failed)
        lap("solve")

        # 3. Blend into a cube built under a temporary name.
        cube_tmp = layout.cube_partial
        create_store(
            cube_tmp,
            grid,
            times=[a.time for a in acqs],
            bands=bands,
            variables=COMPONENTS,
            tile_size=tiles.tile_size,
            attrs={
                "acquisitions": [a.id for a in acqs],
                "code_version": version_tag,
                "solver": config.solver.model_dump(mode="json"),
                "tiling": {"tile_size": tiles.tile_size, "overlap": tiles.overlap},
            },
        )
        blend_jobs = []
        for b, band in enumerate(bands):
            for t in tiles:
                sources = tuple((o, solve_ids[band][o.row, o.col]) for o in tiles.neighbours(t))
                sid = solve_ids[band][t.row, t.col]
                blend = BlendJob(t, sid, b, tiles, sources, layout, str(cube_tmp))
                blend_jobs.append(Task(sid, blend_tile, (blend,)))
        blended, failed = run_tasks(client, blend_jobs, stage="blend")
        failures += _failures("blend", failed)

        lap("blend")
        records = read_markers(layout.marker(sid) for b in bands for sid in solve_ids[b].values())
        write_diagnostics(records, layout.diagnostics_csv, cube_tmp)
        if failures:
            # A cube with holes must never look like a result: keep it under its temporary name,
            # publish nothing, and let a rerun (which retries only the failed tiles) finish it.
            return _summary(
                layout,
                tiles,
                bands,
                staged,
                todo,
                solved,
                solve_skipped,
                blended,
                started,
                failures,
                {},
                phases,
            )
        publish_dir(cube_tmp, layout.cube)

        # 4. Per-date products from the published cube.
        max_dn = max(float(a.max_dn) for a in acqs)
        product_jobs = []
        days = [a.time.strftime("%Y%m%d") for a in acqs]
        for b, band in enumerate(bands):
            dsts = [layout.cog_dir / f"{day}_{band}.tif" for day in days]
            kwargs = {
                "band_index": b,
                "grid": grid,
                "dtype": config.output.cog_dtype,
                "max_dn": max_dn,
                "block": tiles.tile_size,
            }
            product_jobs.append(Task(f"cog-{band}", write_cogs, (layout.cube, dsts), kwargs))
        if config.output.quicklooks:
            for i, day in enumerate(days):
                dst = layout.quicklook_dir / f"{day}.png"
                kwargs = {"time_index": i, "bands": _quicklook_bands(bands)}
                product_jobs.append(
                    Task(
                        f"{day}-{i}",
                        write_quicklook,
                        (layout.input_store, layout.cube, dst),
                        kwargs,
                    )
                )
        written, failed = run_tasks(client, product_jobs, stage="products")
        failures += _failures("products", failed)
        lap("products")

    return _summary(
        layout,
        tiles,
        bands,
        staged,
        todo,
        solved,
        solve_skipped,
        blended,
        started,
        failures,
        written,
        phases,
    )


def _summary(
    layout: Layout,
    tiles: TileGrid,
    bands: tuple[str, ...],
    staged: dict[str, Any],
    todo: list[Any],
    solved: dict[str, Any],
    solve_skipped: int,
    blended: dict[str, Any],
    started: float,
    failures: list[TileFailure],
    written: dict[str, Any],
    phases: list[tuple[str, float]],
) -> RunSummary:
    summary = RunSummary(
        output=layout.root,
        tiles=len(tiles),
        bands=len(bands),
        staged=len(staged),
        stage_skipped=len(tiles) - len(todo),
        solved=len(solved),
        solve_skipped=solve_skipped,
        blended=len(blended),
        seconds=time.perf_counter() - started,
        failures=tuple(failures),
        products=tuple(sorted(_flatten(written.values()))),
        phase_seconds=tuple(phases),
    )
    log.info("%s", summary.describe())
    return summary


def _flatten(results: Any) -> list[str]:
    out: list[str] = []
    for item in results:
        out.extend(item if isinstance(item, list) else [item])
    return out
