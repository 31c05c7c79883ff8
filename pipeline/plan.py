"""What a run will do, and how far one got: tile ids, ``plan`` (new/done/stale) and ``status``.

A run's work is fixed before any task starts: the acquisitions, the target grid, the tiling and
one deterministic id per staging tile and per (band, tile) solve (:func:`pipeline.tiling.tile_id`
hashes inputs, band, tile, settings and code version). Tiles are solved and blended a tile row
at a time (:mod:`pipeline.blend`): each (band, tile row) has a row id and each border between
two tile rows a seam id, both derived from the solve ids they cover, and it is their markers
under ``work/done/`` that exist. Comparing the ids with those markers says which tiles a rerun
skips (*done*: its row's marker exists), which it computes for the first time (*new*) and which
it redoes because settings or code changed since their marker was written (*stale*: a marker
for the same band and row, under another id).

``status`` needs no inputs: ``run`` records its ids in ``work/run.json`` when it starts, and
progress is the markers that exist among them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from pipeline.config import Config, InputsConfig
from pipeline.errors import InputError
from pipeline.outputs import Layout, write_json
from pipeline.tiling import TileGrid, tile_id

__all__ = [
    "RunPlan",
    "TileState",
    "code_version",
    "describe_plan",
    "describe_status",
    "discover",
    "make_plan",
    "tile_states",
]

log = logging.getLogger(__name__)

State = Literal["new", "done", "stale"]


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

    settings: dict[str, Any] = {
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
    made = make_gf4_series(layout.products, **settings)
    paths = [str(p) for p in made.paths]
    write_json(
        record_path, {"settings": settings, "paths": paths, "truth_path": str(made.truth_path)}
    )
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


#: Start of the ids of band markers (:meth:`RunPlan.blended_id`).
BLENDED_PREFIX = "blended-"


@dataclass(frozen=True)
class RunPlan:
    """Everything a run's work depends on, fixed before any task starts.

    Attributes
    ----------
    stage_ids
        Staging id per tile index ``(row, col)`` (all bands at once).
    solve_ids
        Solve id per band and tile index.
    row_ids
        Row-task id per band and tile row (:func:`pipeline.blend.solve_row`).
    seam_ids
        Seam-task id per band and tile row ``r ≥ 1``, for the border between rows r − 1 and r
        (:func:`pipeline.blend.blend_seam`); none without overlap.
    input_token
        Identity of ``work/input.zarr`` (inputs, grid, tiling, code version).
    """

    config: Config
    layout: Layout
    acquisitions: tuple[Any, ...]
    grid: Any
    tiles: TileGrid
    bands: tuple[str, ...]
    version: str
    stage_ids: dict[tuple[int, int], str]
    solve_ids: dict[str, dict[tuple[int, int], str]]
    row_ids: dict[str, dict[int, str]]
    seam_ids: dict[str, dict[int, str]]
    input_token: str

    def blended_id(self, band: str) -> str:
        """Marker id saying every tile of ``band`` is blended into the cube and durable.

        It names the band's solve ids (through their digest), so new settings or code never
        take an old band for done.
        """
        digest = hashlib.sha256("\n".join(sorted(self.solve_ids[band].values())).encode())
        return f"{BLENDED_PREFIX}{band}-{digest.hexdigest()[:16]}"

    @property
    def cube_token(self) -> str:
        """Identity of the cube a run builds: the blended ids of all its bands."""
        ids = "\n".join(self.blended_id(b) for b in self.bands)
        return hashlib.sha256(ids.encode()).hexdigest()[:16]


def make_plan(config: Config, layout: Layout | None = None) -> RunPlan:
    """Discover the inputs, derive the grid and compute every tile id of a run.

    Parameters
    ----------
    config
        The validated configuration.
    layout
        Output layout; default from ``config.output.path``.

    Returns
    -------
    RunPlan

    Raises
    ------
    PipelineError
        Invalid inputs or configuration (the same checks as ``run``).
    """
    from pipeline.grid import derive_grid
    from pipeline.sources import check_series

    layout = layout or Layout(Path(config.output.path))
    acqs = discover(config.inputs, layout)
    for warning in check_series(acqs):
        log.warning("%s", warning)
    grid = derive_grid(
        acqs, crs=config.grid.crs, resolution=config.grid.resolution, bounds=config.grid.bounds
    )
    tiles = TileGrid(grid.height, grid.width, config.tiling.tile_size, config.tiling.overlap)
    bands: tuple[str, ...] = tuple(acqs[0].bands)
    if not bands:
        raise InputError(f"{acqs[0].path}: no bands")
    version_tag = code_version()
    input_ids = [_identity(a) for a in acqs]
    scene = {
        "grid": [grid.crs, list(grid.transform)[:6], grid.width, grid.height],
        "tiling": [tiles.tile_size, tiles.overlap],
        "bands": list(bands),
        # The DEM changes the orthorectified pixels, so it is part of every staged tile's id.
        "dem": str(config.inputs.dem) if config.inputs.dem else None,
    }
    solve_settings = {**scene, "solver": config.solver.model_dump(mode="json")}

    def ids(band: str | None, settings: dict[str, Any]) -> dict[tuple[int, int], str]:
        return {
            (t.row, t.col): tile_id(
                input_ids=input_ids, tile=t, band=band, settings=settings, version=version_tag
            )
            for t in tiles
        }

    solve_ids = {b: ids(b, solve_settings) for b in bands}
    row_ids = {b: _row_ids(b, tiles, solve_ids[b]) for b in bands}
    seam_ids = {b: _seam_ids(b, tiles, row_ids[b]) for b in bands}
    token = tile_id(
        input_ids=input_ids,
        tile=tiles.tile(0, 0),
        band=None,
        settings={**scene, "store": "input"},
        version=version_tag,
    )
    return RunPlan(
        config=config,
        layout=layout,
        acquisitions=tuple(acqs),
        grid=grid,
        tiles=tiles,
        bands=bands,
        version=version_tag,
        stage_ids=ids(None, scene),
        solve_ids=solve_ids,
        row_ids=row_ids,
        seam_ids=seam_ids,
        input_token=token,
    )


def _digest(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def _row_ids(band: str, tiles: TileGrid, solve_ids: dict[tuple[int, int], str]) -> dict[int, str]:
    """``B2-r03-<hash of the row's solve ids>`` per tile row."""
    return {
        r: f"{band}-r{r:02d}-{_digest(solve_ids[r, c] for c in range(tiles.n_cols))}"
        for r in range(tiles.n_rows)
    }


def _seam_ids(band: str, tiles: TileGrid, row_ids: dict[int, str]) -> dict[int, str]:
    """``B2-s03-<hash of rows 2 and 3>`` per border between tile rows (none without overlap)."""
    if not tiles.overlap:
        return {}
    return {
        r: f"{band}-s{r:02d}-{_digest([row_ids[r - 1], row_ids[r]])}"
        for r in range(1, tiles.n_rows)
    }


@dataclass(frozen=True)
class TileState:
    """Where one tile of one stage stands: ``new``, ``done`` or ``stale``."""

    stage: Literal["stage", "solve"]
    band: str | None
    tile: str
    tile_id: str
    state: State


def _prefix(tid: str) -> str:
    """``B2-r01-<hash>`` → ``B2-r01-``: the same work (band and tile, or band and tile row)
    under any settings."""
    return tid.rsplit("-", 1)[0] + "-"


def tile_states(plan: RunPlan) -> list[TileState]:
    """Classify every staging tile and every (band, tile) solve of ``plan``.

    A solve counts as done when the marker of its row task exists (the row's tiles are
    solved, blended and written together). Staging markers are dropped with the staged store
    when its inputs, grid or code change, so a stale staging tile shows only before the next
    run starts.
    """
    layout = plan.layout
    names = layout.marker_ids()
    # The same work under any settings or code: the id without its hash.
    prefixes = {_prefix(n) for n in names}

    def state(tid: str, done: bool) -> State:
        if done:
            return "done"
        return "stale" if _prefix(tid) in prefixes else "new"

    out: list[TileState] = []
    for t in plan.tiles:
        sid = plan.stage_ids[t.row, t.col]
        out.append(TileState("stage", None, t.name, sid, state(sid, sid in names)))
    for band in plan.bands:
        for t in plan.tiles:
            row_id = plan.row_ids[band][t.row]
            tid = plan.solve_ids[band][t.row, t.col]
            out.append(TileState("solve", band, t.name, tid, state(row_id, row_id in names)))
    return out


def describe_plan(plan: RunPlan, states: Iterable[TileState]) -> str:
    """One line per tile (stage, band, tile, state, id), then the counts per stage."""
    states = list(states)
    lines = [
        f"output: {plan.layout.root}",
        f"{len(plan.acquisitions)} dates, bands {','.join(plan.bands)}; grid "
        f"{plan.grid.width}x{plan.grid.height} px; {len(plan.tiles)} tiles",
    ]
    lines += [
        f"{s.stage:<5} {s.band or 'all':<4} {s.tile} {s.state:<5} {s.tile_id}" for s in states
    ]
    for stage in ("stage", "solve"):
        counts = Counter(s.state for s in states if s.stage == stage)
        lines.append(
            f"{stage}: {counts['new']} new, {counts['done']} done, {counts['stale']} stale "
            f"(a run computes {counts['new'] + counts['stale']})"
        )
    return "\n".join(lines)


def write_run_record(plan: RunPlan) -> dict[str, Any]:
    """Record the ids of the run that starts now in ``work/run.json`` (for ``status``)."""
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
        "stage_ids": sorted(plan.stage_ids.values()),
        # Tiles are done a row at a time: the row ids with their number of tiles.
        "row_tiles": {
            rid: plan.tiles.n_cols for ids in plan.row_ids.values() for rid in ids.values()
        },
        "outcome": None,
    }
    write_json(plan.layout.run_record, record)
    return record


def finish_run_record(layout: Layout, record: dict[str, Any], outcome: str) -> None:
    """Mark the recorded run as finished with ``outcome`` (``complete`` or ``failed``)."""
    finished = datetime.now().astimezone().isoformat(timespec="seconds")
    write_json(layout.run_record, {**record, "outcome": outcome, "finished": finished})


def _alive(pid: int, host: str) -> bool:
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def describe_status(layout: Layout) -> str:
    """Progress of the run recorded under ``layout`` (running or stopped) and what is published.

    Reads only ``work/run.json``, the markers and the names of the published products, so it
    is cheap and safe while a run is writing.
    """
    lines = [f"output: {layout.root}"]
    try:
        record = json.loads(layout.run_record.read_text())
    except (OSError, ValueError):
        record = None
    if record is None:
        lines.append("run: none recorded (no work/run.json); start one with `run`")
    else:
        outcome = record.get("outcome")
        if outcome:
            state = f"{outcome} (finished {record.get('finished', '?')})"
        elif _alive(int(record.get("pid", -1)), str(record.get("host", ""))):
            state = f"running (pid {record['pid']} on {record['host']})"
        else:
            state = "stopped before finishing (interrupted); rerun `run` to resume"
        lines.append(f"run: {state}; started {record.get('started', '?')}")
        names = layout.marker_ids()
        stage_ids = record.get("stage_ids", [])
        lines.append(f"stage: {sum(t in names for t in stage_ids)}/{len(stage_ids)} tiles done")
        rows = record.get("row_tiles", {})
        solved = sum(n for rid, n in rows.items() if rid in names)
        lines.append(f"solve: {solved}/{sum(rows.values())} tiles done")
        if layout.cube_partial.exists():
            lines.append("blend: cube.zarr.partial exists (being built, or left by a stop)")
    cogs = len(list(layout.cog_dir.glob("*.tif"))) if layout.cog_dir.is_dir() else 0
    looks = len(list(layout.quicklook_dir.glob("*.png"))) if layout.quicklook_dir.is_dir() else 0
    lines.append(
        f"published: cube.zarr {'yes' if layout.cube.exists() else 'no'}, {cogs} COGs, "
        f"{looks} quicklooks, diagnostics.csv {'yes' if layout.diagnostics_csv.exists() else 'no'}"
    )
    if layout.complete.exists():
        try:
            done_at = json.loads(layout.complete.read_text()).get("completed", "?")
        except (OSError, ValueError):
            done_at = "?"
        lines.append(f"complete: yes (COMPLETE.json, {done_at})")
    else:
        lines.append("complete: no (no COMPLETE.json: do not use partial products)")
    return "\n".join(lines)
