"""The tasks of the outputs: the mask pass and the products behind it (COGs, mask COGs,
quicklooks) and the diagnostics table, under temporary names next to their final ones
(:attr:`ProductTasks.finals`), published at the end (:mod:`pipeline.control.publish`)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cloudcore.catalog import writes_haze
from pipeline.cluster import Task
from pipeline.inputs.radiometry import value_meaning
from pipeline.outputs.mask_layer import MaskJob, mask_row, tile_records
from pipeline.outputs.products import (
    write_cogs,
    write_diagnostics,
    write_mask_cogs,
    write_quicklooks,
)
from pipeline.plan import BAND_COG_PRIORITY, MASK_PRIORITY, RunPlan

__all__ = ["ProductTasks"]

log = logging.getLogger(__name__)


class ProductTasks:
    """The output tasks of a run and where they write.

    The bands' COGs may join the solve batch (:meth:`with_solve`: a band's COGs wait only for
    its rows and seams, unless the mask pass changes ``clear``); whatever is not scheduled there
    comes with the mask pass (:meth:`after_solve`). Leftovers of an interrupted earlier run are
    removed when the object is made, before any product task of this run can write.

    Parameters
    ----------
    plan
        The run's plan.
    records
        The markers that hold the tiles' records (the solve scope's:
        :meth:`pipeline.solve.scopes.SolveScope.record_markers`): the diagnostics table, and
        each band's σ that the mask tasks read.
    """

    def __init__(self, plan: RunPlan, records: Sequence[Path]) -> None:
        layout = plan.layout
        self.plan = plan
        self.records = tuple(str(p) for p in records)
        # The mask pass writes ``clear`` and the provenance with it: the bands' COGs then wait.
        self.keep_clear = plan.config.mask.keep_clear
        # What the mask and COG tasks keep for the quicklooks (None: no quicklooks).
        self.preview = plan.samples if plan.config.output.quicklooks else None
        self.cog_tmp = layout.partial(layout.cog_dir)
        self.looks_tmp = layout.partial(layout.quicklook_dir)
        self._cogs_scheduled: set[str] = set()  # bands whose COG task is in a batch already
        for leftover in (self.cog_tmp, self.looks_tmp):
            shutil.rmtree(leftover, ignore_errors=True)

    @property
    def finals(self) -> list[Path]:
        """The final paths of the COGs and quicklooks."""
        layout = self.plan.layout
        cogs = [n for band in (*self.plan.bands, "mask") for n in self._cog_names(band)]
        looks = self._quicklook_names() if self.preview else []
        return [layout.cog_dir / n for n in cogs] + [layout.quicklook_dir / n for n in looks]

    def with_solve(
        self, cube: Path, cogs_after: dict[str, tuple[str, ...]], solving: tuple[str, ...] | None
    ) -> list[Task]:
        """The output tasks that join a solve batch.

        Parameters
        ----------
        cube
            The cube under construction.
        cogs_after
            Band → the keys of the solve tasks its COGs wait for (bands the batch completes).
            The COGs join only when the mask pass leaves ``clear`` as solved (no
            ``mask.keep_clear``).
        solving
            The keys of every solve task of the batch, when the batch completes every band: the
            mask pass and the products behind it join too, after them. None: they do not.

        Returns
        -------
        list of Task
            The bands' COG tasks (after every row that is ready: :data:`BAND_COG_PRIORITY`,
            so a worker with no row left writes them while the other still solves), then the
            mask tasks and the products behind them.
        """
        tasks = [] if self.keep_clear else self._band_cogs(cube, cogs_after)
        if solving is not None:
            tasks += self.after_solve(cube, after=solving)
        return tasks

    def after_solve(self, cube: Path, *, after: tuple[str, ...] = ()) -> list[Task]:
        """The mask pass and every output task not scheduled yet, each waiting for what it reads.

        One mask task per tile row, all bands (:mod:`pipeline.outputs.mask_layer`: the mask
        layer, and with ``mask.keep_clear`` the observations kept where the mask says clear and
        the provenance; each band's σ from its tiles' records in the markers), after the tasks
        ``after``. Then the bands' COGs not written yet (with ``mask.keep_clear`` after the mask
        tasks), the mask COGs and the quicklooks (from the samples the stage, mask and COG tasks
        keep, :mod:`pipeline.store.previews`: after the COGs of the quicklook bands too).

        Parameters
        ----------
        cube
            The cube under construction.
        after
            The keys of the tasks the mask tasks wait for (the solve batch's, when they share it).
        """
        masks = self._mask_tasks(cube, after)
        keys = tuple(t.key for t in masks)
        waits = keys if self.keep_clear else ()
        unscheduled = {b: waits for b in self.plan.bands if b not in self._cogs_scheduled}
        return masks + self._band_cogs(cube, unscheduled) + self._mask_products(cube, keys)

    def diagnostics(self, cube: Path) -> None:
        """Report what the tiles' records say (dates left out, empty tiles) and write the
        diagnostics table into the cube and as CSV."""
        layout = self.plan.layout
        records = tile_records(Path(p) for p in self.records)
        _report_dates_left_out(records, self.plan.time_labels)
        write_diagnostics(records, layout.partial(layout.diagnostics_csv), cube)
        _report_empty_tiles(records)

    def _cog_names(self, layer: str) -> list[str]:
        """The COG file names of a band (or of ``"mask"``), one per date in time order."""
        return [f"{label}_{layer}.tif" for label in self.plan.time_labels]

    def _quicklook_names(self) -> list[str]:
        return [f"{label}.png" for label in self.plan.time_labels]

    def _mask_tasks(self, cube: Path, after: tuple[str, ...]) -> list[Task]:
        plan = self.plan
        config, tiles = plan.config, plan.tiles
        method, refines = config.solver.method, config.solver.refines
        quality = config.quality
        neighbours = plan.date_neighbours  # once: every row's task reads the same
        jobs = (
            MaskJob(
                tiles=tuple(tiles.tile(r, c) for c in range(tiles.n_cols)),
                task_id=f"mask-r{r:02d}",
                height=plan.grid.height,
                width=plan.grid.width,
                input_store=str(plan.layout.input_store),
                cube=str(cube),
                layers=config.solver.layers,
                shadow_scored=not config.solver.shadow_free_fill,
                bands=tuple(plan.bands),
                records=self.records,
                rule=config.mask.rule(),
                keep_clear=self.keep_clear,
                preview=self.preview,
                haze=writes_haze(method, refines),
                keep_haze=config.mask.keep_haze,
                provider=quality.combine if quality is not None else None,
                offset=config.applied_offset,
                short_band=plan.short_band,
                neighbours=neighbours,
                times=plan.date_times,
            )
            for r in range(tiles.n_rows)
        )
        return [
            Task(
                job.task_id,
                mask_row,
                (job,),
                after=after,
                stage="mask",
                weight=tiles.n_cols,
                priority=MASK_PRIORITY,
            )
            for job in jobs
        ]

    def _band_cogs(self, cube: Path, after: dict[str, tuple[str, ...]]) -> list[Task]:
        """The COG tasks of the bands in ``after`` (band → keys of the tasks to wait for)."""
        plan = self.plan
        calibration, units, physical = value_meaning(plan.acquisitions)
        # Reflectance is stored as ρ·10000 in uint16 COGs (the Landsat/Sentinel-2 convention);
        # DN and radiance fractions as value·max_dn, the input's own resolution.
        if calibration == "reflectance":
            max_dn = 10000.0
        else:
            max_dn = max(float(a.max_dn) for a in plan.acquisitions)
        tasks: list[Task] = []
        for b, band in enumerate(plan.bands):
            if band not in after:
                continue
            self._cogs_scheduled.add(band)
            kwargs = {
                "band_index": b,
                "grid": plan.grid,
                "dtype": plan.config.output.cog_dtype,
                "max_dn": max_dn,
                "block": plan.tiles.tile_size,
                "calibration": calibration,
                "units": units,
                "physical_scale": physical[b],
                # From the clear values the task reads anyway: the band's provenance unless
                # the mask pass writes it (keep_clear), and the quicklooks' clear samples.
                "tiles": plan.tiles,
                "provenance": not self.keep_clear,
                "preview": self.preview,
            }
            args = (cube, [self.cog_tmp / n for n in self._cog_names(band)])
            tasks.append(
                Task(
                    _band_cog_key(band),
                    write_cogs,
                    args,
                    kwargs,
                    after=after[band],
                    stage="products",
                    weight=0,  # the progress bar counts tiles
                    priority=BAND_COG_PRIORITY,
                )
            )
        return tasks

    def _mask_products(self, cube: Path, masks: tuple[str, ...]) -> list[Task]:
        """The mask COGs and the quicklooks, after the ``masks`` tasks."""
        plan = self.plan
        mask_cogs = (cube, [self.cog_tmp / n for n in self._cog_names("mask")])
        tasks = [
            Task(
                "cog-mask",
                write_mask_cogs,
                mask_cogs,
                {"grid": plan.grid, "block": plan.tiles.tile_size},
                after=masks,
                stage="products",
                priority=MASK_PRIORITY,
            )
        ]
        spec = self.preview
        if spec is not None:
            # A task per date: the last tasks of a run are short, so both workers finish
            # together (the dates' images are independent, each stretched on its own).
            size = {"height": plan.grid.height, "width": plan.grid.width}
            cogs = tuple(_band_cog_key(plan.bands[b]) for b in spec.bands)
            tasks += [
                Task(
                    f"quicklook-{plan.time_labels[i]}",
                    write_quicklooks,
                    (spec, list(plan.tiles), [self.looks_tmp / name]),
                    {**size, "dates": (i,)},
                    after=masks + cogs,
                    stage="products",
                    priority=MASK_PRIORITY,
                )
                for i, name in enumerate(self._quicklook_names())
            ]
        return tasks


def _band_cog_key(band: str) -> str:
    """The key of the task writing ``band``'s COGs."""
    return f"cog-{band}"


def _report_empty_tiles(records: list[dict[str, Any]]) -> None:
    """Warn once per tile with no valid data on any date: its output is NaN (COG nodata)."""
    empty = sorted({f"r{r['row']:02d}c{r['col']:02d}" for r in records if r.get("empty")})
    if empty:
        log.warning(
            "%d tile(s) have no valid data on any date (%s): their output is NaN, nodata in "
            "the COGs; narrow grid.bounds to the inputs' footprint to avoid them",
            len(empty),
            ", ".join(empty),
        )


def _report_dates_left_out(records: list[dict[str, Any]], labels: Sequence[str]) -> None:
    """Name the dates left out of each tile (too little of them observed: NaN there) in its
    record, indices into the series → their ``;``-joined time labels for diagnostics.csv, and
    warn once per such date with the tiles concerned."""
    tiles: dict[str, set[str]] = {}
    for r in records:
        days = [labels[t] for t in r.get("dates_left_out", ())]
        r["dates_left_out"] = ";".join(days)
        for day in days:
            tiles.setdefault(day, set()).add(f"r{r['row']:02d}c{r['col']:02d}")
    for day, names in sorted(tiles.items()):
        log.warning(
            "date %s observes too little of %d tile(s) (%s) to be filled there: left out of "
            "their matrices, its output there is NaN (diagnostics.csv, dates_left_out)",
            day,
            len(names),
            ", ".join(sorted(names)),
        )
