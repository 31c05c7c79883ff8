"""What a run will do: the inputs, grid and tiles, one id per piece of work, ``plan``.

A run's work is fixed before any task starts: the acquisitions, the target grid, the tiling and
one deterministic id per staging tile and per (band, tile) solve (:func:`pipeline.ids.tile_id`
hashes inputs, band, tile, settings and code version). Tiles are solved and blended a tile row
at a time (:mod:`pipeline.solve.rows`): each (band, tile row) has a row id and each border between
two tile rows a seam id, both derived from the solve ids they cover, and it is their markers
under ``work/done/`` that exist. Comparing the ids with those markers says which tiles a rerun
skips (*done*: its row's marker exists), which it computes for the first time (*new*) and which
it redoes because settings or code changed since their marker was written (*stale*: a marker
for the same band and row, under another id).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from cloudcore._growth import PAPER_RHO
from pipeline.config import Config, SolverConfig
from pipeline.config.solver import SCOPE_TRAITS
from pipeline.errors import ConfigError, InputError
from pipeline.grid.tiling import TileGrid
from pipeline.ids import as_utc, code_version, digest, file_signature, tile_id, time_label
from pipeline.inputs.discovery import discover
from pipeline.inputs.radiometry import PMS_BAND_EDGES_UM
from pipeline.store.layout import STAGED, Layout
from pipeline.store.previews import PreviewSpec, samples_spec

__all__ = [
    "BAND_COG_PRIORITY",
    "MASK_PRIORITY",
    "ROW_PRIORITY",
    "SEAM_PRIORITY",
    "RunPlan",
    "TileState",
    "describe_plan",
    "make_plan",
    "short_band",
    "solver_key",
    "tile_states",
]

log = logging.getLogger(__name__)

State = Literal["new", "done", "stale"]


def _identity(acq: Any) -> str:
    """Product id, DN scale (and calibration) and file identity: a product rewritten under the
    same id (a new simulation, a re-delivered scene) must not resume from the old one's tiles.
    The dn calibration adds nothing, so runs staged before calibration existed still resume."""
    if acq.stac is not None:
        return f"{acq.id}@{acq.max_dn:g}:stac:{acq.stac.signature}"
    size, mtime_ns = file_signature(acq.path)
    scale = "" if acq.scale is None else f":{acq.calibration}:{acq.scale}:{acq.offset}"
    return f"{acq.id}@{acq.max_dn:g}:{size}:{mtime_ns}{scale}"


#: Which ready task a worker takes first (Dask task priorities, higher first). A seam frees
#: its rows' strips. The mask tasks and the products behind them are the run's last chain:
#: once ready they go first. The bands' COGs go last: a worker with no row left writes them
#: while the other solves its last one (at the end of the solve batch one worker would
#: otherwise wait for the other's last row, up to a row task's length).
SEAM_PRIORITY, MASK_PRIORITY, ROW_PRIORITY, BAND_COG_PRIORITY = 3, 2, 1, 0

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
        Row-task id per band and tile row (:func:`pipeline.solve.rows.solve_row`).
    seam_ids
        Seam-task id per band and tile row ``r ≥ 1``, for the border between rows r − 1 and r
        (:func:`pipeline.solve.rows.blend_seam`); none without overlap.
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
    #: The index of the band the mask's whiteness test reads as the shortest (:func:`short_band`).
    short_band: int = 0

    @property
    def white_band(self) -> str | None:
        """The band the mask's whiteness test reads as the shortest, by name; None when the
        test is off (``mask.white`` and ``mask.white_cloud`` 0). What the cube's attributes and
        the Items record."""
        mask = self.config.mask
        return self.bands[self.short_band] if mask.white > 0 or mask.white_cloud > 0 else None

    def blended_id(self, band: str) -> str:
        """Marker id saying every tile of ``band`` is blended into the cube and durable.

        It names the band's solve ids (through their digest), so new settings or code never
        take an old band for done.
        """
        return f"{BLENDED_PREFIX}{band}-{digest(sorted(self.solve_ids[band].values()))}"

    @property
    def date_neighbours(self) -> tuple[tuple[int, int], ...] | None:
        """Each acquisition's nearest acquisitions of other days (at least 12 h before and
        after; -1: none), which the mask's ground that stays reads
        (:func:`cloudcore.masks.other_day_neighbours`); None when ``mask.persist`` is off or no
        acquisition has one (a series of one day: the rule would change nothing)."""
        if self.config.mask.persist <= 0:
            return None
        from cloudcore.masks import other_day_neighbours

        days = [as_utc(a.time).timestamp() / 86400.0 for a in self.acquisitions]
        found = other_day_neighbours(np.array(days))
        return tuple((int(b), int(a)) for b, a in found) if (found >= 0).any() else None

    @property
    def date_times(self) -> tuple[float, ...] | None:
        """Each acquisition's UTC time in seconds, which the pixel's own departure interpolated
        in time reads (``mask.interpolate``, :mod:`cloudcore.departure`); None where the mask
        pass does not apply it (:attr:`pipeline.config.Config.applied_interpolate`)."""
        if not self.config.applied_interpolate:
            return None
        return tuple(as_utc(a.time).timestamp() for a in self.acquisitions)

    @property
    def time_labels(self) -> list[str]:
        """Each acquisition's UTC time as output file names carry it (unique per series)."""
        return [time_label(a.time) for a in self.acquisitions]

    @property
    def cube_token(self) -> str:
        """Identity of the cube a run builds: the blended ids of all its bands, and the mask
        settings with ``mask.keep_clear`` (the mask pass writes the clear layer with them)."""
        # Spelt as before keep_clear moved into the mask section: earlier cubes still resume.
        mask = self.config.mask
        # The options that came later are in the dump only where on (MaskConfig.options_off);
        # those spelt below (grow, white) never are.
        named = {"keep_clear", "grow", "keep_haze", "offset", "white", "white_band", "interpolate"}
        settings = mask.model_dump_json(exclude=named | mask.options_off())
        settings += f"keep_clear={mask.keep_clear}" + (f"grow={mask.grow}" if mask.grow else "")
        settings += "keep_haze" if mask.keep_clear and mask.keep_haze else ""
        offset = self.config.applied_offset
        settings += f"offset={offset:g}" if offset is not None else ""
        # Only where the mask pass applies it (not with atm): cubes of earlier versions resume.
        settings += "interpolate" if self.config.applied_interpolate else ""
        # The whiteness test named only where it is on: a cube of earlier settings resumes with
        # `white: 0` (and `white_cloud: 0`, below); a default run's cube from before the test is
        # solved again (its mask changed).
        settings += f"white={mask.white:g}@{self.short_band}" if mask.white > 0 else ""
        # White clouds read the short band too.
        settings += f"short={self.short_band}" if mask.white_cloud > 0 else ""
        quality = self.config.quality
        settings += f"quality={quality.combine}" if quality is not None else ""
        return digest([*(self.blended_id(b) for b in self.bands), settings])

    @property
    def samples(self) -> PreviewSpec:
        """What the stage, mask and COG tasks keep for the quicklooks
        (:func:`pipeline.store.previews.samples_spec`)."""
        return samples_spec(self.grid.height, self.grid.width, self.bands, self.layout.previews)


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
    from pipeline.grid.target import derive_grid
    from pipeline.inputs import check_series

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
    solve_settings = {**scene, "solver": solver_key(config.solver)}

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
        settings={**scene, "store": "input", "staged": list(STAGED)},
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
        # What staging writes: a store of an earlier layout is staged again.
        stage_ids=ids(None, {**scene, "staged": list(STAGED)}),
        solve_ids=solve_ids,
        row_ids=row_ids,
        seam_ids=seam_ids,
        input_token=token,
        short_band=_short_band(config, bands),
    )


def short_band(bands: tuple[str, ...], named: str | None = None) -> int:
    """The band the mask's whiteness test reads as the shortest (``mask.white_band``).

    Parameters
    ----------
    bands
        The run's band names, in the cube's order.
    named
        ``mask.white_band``, or None: the band of shortest centre wavelength among GF-4 PMS's
        (B2 blue, 0.485 µm, before the pan band B1's 0.675), else the first band.

    Returns
    -------
    int
        Its index in ``bands``.

    Raises
    ------
    ConfigError
        ``named`` is not one of ``bands``.
    """
    if named is not None:
        if named not in bands:
            raise ConfigError(
                f"mask.white_band: {named!r} is not one of the run's bands ({', '.join(bands)})"
            )
        return bands.index(named)
    known = [b for b in bands if b in PMS_BAND_EDGES_UM]
    if not known:
        return 0
    return bands.index(min(known, key=lambda b: sum(PMS_BAND_EDGES_UM[b])))


def _short_band(config: Config, bands: tuple[str, ...]) -> int:
    """:func:`short_band` of ``mask.white_band``, saying which band the whiteness test reads as
    the shortest when nothing told it: the test on, several bands, none of a known wavelength,
    no ``mask.white_band``."""
    mask = config.mask
    index = short_band(bands, mask.white_band)
    guessed = mask.white_band is None and bands[index] not in PMS_BAND_EDGES_UM
    if (mask.white > 0 or mask.white_cloud > 0) and guessed and len(bands) > 1:
        log.warning(
            "mask.white: the bands' wavelengths are unknown, so the whiteness test reads the "
            "first band, %r, as the shortest; set mask.white_band to the bluest band (or "
            "mask.white: 0 and mask.white_cloud: 0)",
            bands[index],
        )
    return index


def solver_key(config: SolverConfig) -> dict[str, Any]:
    """The solver's settings as they enter every solved tile's id: as they take effect, and
    each setting added since the first cubes, at the value every solve had before it existed,
    spelt as then (left out), so that those cubes still resume."""
    solver = config.model_dump(mode="json")
    # The refinement as it takes effect: `refine` left out and `true` are the same tile-scope
    # work, left out and `false` the same scene-scope work.
    solver["refine"] = config.refines
    if not SCOPE_TRAITS[config.scope].named_in_ids:
        del solver["scope"]
    # The cap as it takes effect; off, spelt as before it existed.
    solver["cap_ground"] = config.caps_ground
    if not solver["cap_ground"]:
        del solver["cap_ground"]
    config.spell_options(solver)  # the same for the floor and the shadow-free fill
    if solver["rho"] == PAPER_RHO:  # the paper's growth of μ, every solve's before solver.rho
        del solver["rho"]
    return solver


def _row_ids(band: str, tiles: TileGrid, solve_ids: dict[tuple[int, int], str]) -> dict[int, str]:
    """``B2-r03-<hash of the row's solve ids>`` per tile row."""
    return {
        r: f"{band}-r{r:02d}-{digest(solve_ids[r, c] for c in range(tiles.n_cols))}"
        for r in range(tiles.n_rows)
    }


def _seam_ids(band: str, tiles: TileGrid, row_ids: dict[int, str]) -> dict[int, str]:
    """``B2-s03-<hash of rows 2 and 3>`` per border between tile rows (none without overlap)."""
    if not tiles.overlap:
        return {}
    return {
        r: f"{band}-s{r:02d}-{digest([row_ids[r - 1], row_ids[r]])}" for r in range(1, tiles.n_rows)
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
        # Scene scope marks whole bands only (the blended marker); tile scope marks rows.
        band_done = plan.blended_id(band) in names
        for t in plan.tiles:
            row_id = plan.row_ids[band][t.row]
            tid = plan.solve_ids[band][t.row, t.col]
            done = band_done or row_id in names
            out.append(TileState("solve", band, t.name, tid, state(row_id, done)))
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
