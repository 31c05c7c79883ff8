"""Resume and idempotency: reruns skip finished tiles, a changed solver setting redoes exactly the
solves (not the staging), ``plan`` and ``status`` report it, and publication is all-or-nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.config import Config, parse
from pipeline.inputs.synthetic import SimulatedProducts
from pipeline.plan import make_plan, tile_states
from pipeline.run import run
from pipeline.solve.rows import RowJob, solve_row, strip_ids
from pipeline.store.durable import durable_store, publish_dir
from tests.pipeline.runs import (
    N_BANDS,
    N_TILES,
    PUBLISHED,
    assert_identical,
    config_dict,
    outputs,
    published,
    write_config,
)

TOTAL = N_TILES * N_BANDS


def _cfg(out: Path, paths: list[Path], address: str, **solver: Any) -> dict[str, Any]:
    data = config_dict(out, paths, kind="address", address=address)
    data["solver"].update(solver)
    return data


def _counts(states: list[Any], stage: str) -> dict[str, int]:
    found = {"new": 0, "done": 0, "stale": 0}
    for s in states:
        if s.stage == stage:
            found[s.state] += 1
    return found


def test_rerun_and_changed_setting_redo_exactly_the_affected_tiles(
    geotiff_series: SimulatedProducts,
    scheduler: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    first_cfg = parse(_cfg(out, geotiff_series.paths, scheduler), Config)
    states = tile_states(make_plan(first_cfg))
    assert _counts(states, "stage") == {"new": N_TILES, "done": 0, "stale": 0}
    assert _counts(states, "solve") == {"new": TOTAL, "done": 0, "stale": 0}

    first = run(first_cfg)
    assert first.ok and (first.staged, first.solved) == (N_TILES, TOTAL)
    assert published(out) == list(PUBLISHED)
    before = outputs(out)

    # Change nothing: nothing is redone, the products come out bit for bit the same.
    again = run(first_cfg)
    assert (again.staged, again.stage_skipped, again.solved, again.solve_skipped) == (
        0,
        N_TILES,
        0,
        TOTAL,
    )
    assert_identical(outputs(out), before)

    # Change solver.beta: every solve is stale, staging is still done.
    path = write_config(
        tmp_path / "beta.yaml", _cfg(out, geotiff_series.paths, scheduler, beta=2.0)
    )
    assert main(["-q", "plan", str(path)]) == 0
    printed = capsys.readouterr().out
    assert f"stage: 0 new, {N_TILES} done, 0 stale" in printed
    assert f"solve: 0 new, 0 done, {TOTAL} stale (a run computes {TOTAL})" in printed
    tile_lines = [line for line in printed.splitlines() if line.startswith("solve ")]
    assert len(tile_lines) == TOTAL and all(" stale " in line for line in tile_lines)
    beta = run(parse(_cfg(out, geotiff_series.paths, scheduler, beta=2.0), Config))
    assert (beta.staged, beta.stage_skipped, beta.solved, beta.solve_skipped) == (
        0,
        N_TILES,
        TOTAL,
        0,
    )
    # The superseded markers were removed with the old cube, and no strip is left to fill the
    # disk: each is deleted once its seam is blended.
    assert not list((out / "work" / "strips").iterdir())
    plan = make_plan(parse(_cfg(out, geotiff_series.paths, scheduler, beta=2.0), Config))
    expected = {
        i for b in plan.bands for i in [*plan.row_ids[b].values(), *plan.seam_ids[b].values()]
    }
    assert {p.stem for p in (out / "work" / "done").glob("B*.json")} == expected
    assert main(["-q", "plan", "--summary", str(path)]) == 0
    assert f"solve: 0 new, {TOTAL} done, 0 stale" in capsys.readouterr().out
    assert main(["-q", "status", str(path)]) == 0
    status = capsys.readouterr().out
    assert "run: complete" in status and f"solve: {TOTAL}/{TOTAL} tiles done" in status
    assert "complete: yes" in status


def _stopped_before_b2_seam(cfg: Config, ground: bool) -> tuple[Any, dict[str, Any]]:
    """Run ``cfg`` whole, then leave its output as a run stopped after band B2's two row tasks,
    before its seam: the rows' data and markers on disk (the rows written again, with
    ``ground`` as :attr:`RowJob.ground`), the seam's and the band's markers not (strips go
    only after the seam). Returns the plan and the whole run's :func:`outputs`."""
    assert run(cfg).ok
    before = outputs(cfg.output.path)
    plan = make_plan(cfg)
    layout, tiles = plan.layout, plan.tiles
    layout.marker(plan.blended_id("B2")).unlink()
    layout.marker(plan.seam_ids["B2"][1]).unlink()
    b = plan.bands.index("B2")
    for r, row_id in plan.row_ids["B2"].items():
        ids = tuple(plan.solve_ids["B2"][r, c] for c in range(tiles.n_cols))
        cube = str(layout.cube)
        solve_row(RowJob(tiles, r, b, "B2", row_id, ids, layout, cube, cfg.solver, 1, ground))
    return plan, before


def test_crash_windows_of_row_and_seam_tasks_are_redone(
    geotiff_series: SimulatedProducts, scheduler: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    cfg = parse(_cfg(out, geotiff_series.paths, scheduler), Config)
    plan, before = _stopped_before_b2_seam(cfg, cfg.rows_write_ground)
    layout = plan.layout
    # The crash windows of a row: its data written but no marker yet (row 1); a strip lost
    # although the marker exists (row 0's bottom strip); and a temporary strip left by a write
    # that was interrupted.
    layout.marker(plan.row_ids["B2"][1]).unlink()
    ground = plan.config.rows_write_ground
    bottom = layout.strip(strip_ids(plan.row_ids["B2"][0], ground)[1])
    shutil.rmtree(bottom)
    with pytest.raises(RuntimeError), durable_store(bottom) as tmp:
        shutil.copytree(layout.strip(strip_ids(plan.row_ids["B2"][1], ground)[0]), tmp)
        orphan = tmp.with_name(tmp.name.replace(".tmp", "-orphan.tmp"))
        shutil.copytree(tmp, orphan)  # a kill -9 would leave this one behind
        raise RuntimeError("killed")
    assert orphan.exists() and not bottom.exists()
    summary = run(cfg)
    # Both rows of B2 are redone (2 tiles each), its seam blended; nothing else.
    assert summary.ok and (summary.solved, summary.blended) == (4, 1), summary.describe()
    assert summary.solve_skipped == TOTAL - 4
    assert not list(layout.strips.iterdir())  # the strips and the orphan are gone
    assert_identical(outputs(out), before)


def test_strips_that_hold_the_ground_are_not_read_where_the_rows_leave_it(
    geotiff_series: SimulatedProducts, scheduler: str, tmp_path: Path
) -> None:
    """A run stopped after band B2's rows, before its seam, by a version whose rows wrote the
    ground (strips of three layers, named without a suffix; ``RowJob.ground``). This version's
    rows leave the ground to the mask pass and name their strips apart: it reads none of
    those, redoes B2's rows, and publishes what a whole run does."""
    out = tmp_path / "out"
    cfg = parse(_cfg(out, geotiff_series.paths, scheduler), Config)
    assert not cfg.rows_write_ground
    plan, before = _stopped_before_b2_seam(cfg, ground=True)
    layout = plan.layout
    assert layout.strip(strip_ids(plan.row_ids["B2"][0], True)[1]).exists()
    summary = run(cfg)
    assert summary.ok and (summary.solved, summary.blended) == (4, 1), summary.describe()
    assert not list(layout.strips.iterdir())
    assert_identical(outputs(out), before)


def test_publish_replaces_a_directory_whole(tmp_path: Path) -> None:
    final, partial = tmp_path / "cube.zarr", tmp_path / "cube.zarr.partial"
    final.mkdir()
    (final / "old").write_text("old")
    tmp_path.joinpath(".cube.zarr.old-12345678").mkdir()  # left by an interrupted publication
    partial.mkdir()
    (partial / "new").write_text("new")
    publish_dir(partial, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.zarr"]
    assert [p.name for p in final.iterdir()] == ["new"]


def test_durable_store_never_leaves_a_half_store(tmp_path: Path) -> None:
    import numpy as np
    import zarr

    path = tmp_path / "strips" / "B1-r00-0-top.zarr"

    def write(values: np.ndarray) -> None:
        with durable_store(path) as tmp:
            array = zarr.create_array(store=str(tmp), shape=values.shape, dtype="float32")
            array[...] = values

    # Values that cannot become float32: the write fails after the store was created.
    with pytest.raises((ValueError, TypeError)):
        write(np.full((3, 2, 4, 4), "not a number", dtype=object))
    assert not path.exists() and not list(path.parent.iterdir())
    write(np.ones((3, 2, 4, 4), dtype=np.float32))
    assert path.is_dir() and [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_dem_invalidates_the_staged_tiles(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    base = config_dict(tmp_path / "out", list(geotiff_series.paths))
    with_dem = {**base, "inputs": {**base["inputs"], "dem": str(tmp_path / "dem.tif")}}
    plain, dem = make_plan(parse(base, Config)), make_plan(parse(with_dem, Config))
    assert set(plain.stage_ids.values()).isdisjoint(dem.stage_ids.values())


def test_the_refinement_as_it_takes_effect_keys_the_tiles(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    base = config_dict(tmp_path / "out", list(geotiff_series.paths))

    def solve_ids(**solver: object) -> set[str]:
        plan = make_plan(parse({**base, "solver": solver}, Config))
        return {i for ids in plan.solve_ids.values() for i in ids.values()}

    default = solve_ids()
    assert solve_ids(refine=False) == default  # left out = off: the same work
    assert solve_ids(refine=True).isdisjoint(default)
    assert solve_ids(refine=None) == default  # null in a config: the default


def test_a_row_asks_for_the_next_tile_s_input_before_reading_it(
    geotiff_series: SimulatedProducts,
    scheduler: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row task asks the kernel for the next tile's input shard while it solves this one."""
    from pipeline.store.cube import chunk_files
    from tests.pipeline.reads import reads_asked_before, record_reads

    out = tmp_path / "out"
    cfg = parse(_cfg(out, geotiff_series.paths, scheduler), Config)
    assert run(cfg).ok
    plan = make_plan(cfg)
    layout, tiles = plan.layout, plan.tiles
    b = plan.bands.index("B2")
    ids = tuple(plan.solve_ids["B2"][0, c] for c in range(tiles.n_cols))
    events = record_reads(monkeypatch, "pipeline.solve.rows")
    row_id = plan.row_ids["B2"][0]
    solve_row(RowJob(tiles, 0, b, "B2", row_id, ids, layout, str(layout.cube), cfg.solver, 1))
    ahead = chunk_files(layout.input_store, ["observed"], [0], range(1, tiles.n_cols), b)
    count, unasked = reads_asked_before(events, set(ahead))
    assert tiles.n_cols >= 2 and count >= len(ahead) and not unasked


def test_ground_that_stays_reads_the_acquisitions_of_other_days_and_keys_the_cube(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    """With ``mask.persist`` the plan gives the mask pass each acquisition's nearest
    acquisitions at least 12 h before and after, from their UTC times; the cube's identity
    changes with it (the mask does) and not the solves'. Off, there are none."""
    import dataclasses
    from datetime import UTC, timedelta

    from cloudcore.masks import other_day_neighbours

    base = config_dict(tmp_path / "out", list(geotiff_series.paths))
    plain = make_plan(parse(base, Config))
    stays = make_plan(parse({**base, "mask": {"persist": 0.3}}, Config))
    off = make_plan(parse({**base, "mask": {"persist": 0}}, Config))
    assert off.date_neighbours is None and off.cube_token != stays.cube_token
    assert stays.solve_ids == plain.solve_ids
    times = [a.time for a in stays.acquisitions]
    days = [(t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp() / 86400 for t in times]
    expected = [tuple(int(i) for i in row) for row in other_day_neighbours(days)]
    assert stays.date_neighbours is not None and list(stays.date_neighbours) == expected
    assert len(expected) == len(times) and any(b >= 0 or a >= 0 for b, a in expected)
    # A series of one day (GF-4 staring): no neighbours, nothing for the mask pass to read.
    one_day = dataclasses.replace(
        stays,
        acquisitions=tuple(
            dataclasses.replace(acq, time=times[0] + timedelta(minutes=20 * k))
            for k, acq in enumerate(stays.acquisitions)
        ),
    )
    assert one_day.date_neighbours is None
