"""Resume and idempotency: reruns skip finished tiles, a changed solver setting redoes exactly the
solves (not the staging), ``plan`` and ``status`` report it, and publication is all-or-nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed import LocalCluster

from pipeline.cli import main
from pipeline.config import parse_config
from pipeline.fixtures import SimulatedProducts
from pipeline.outputs import publish_dir, write_part
from pipeline.plan import make_plan, tile_states
from pipeline.run import run
from pipeline.solve import SolveJob, solve_tile
from tests.pipeline.test_faults import (
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


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """One 2-process cluster for the module: runs connect to it instead of starting their own."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


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
    address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    first_cfg = parse_config(_cfg(out, geotiff_series.paths, address))
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
    path = write_config(tmp_path / "beta.yaml", _cfg(out, geotiff_series.paths, address, beta=2.0))
    assert main(["-q", "plan", str(path)]) == 0
    printed = capsys.readouterr().out
    assert f"stage: 0 new, {N_TILES} done, 0 stale" in printed
    assert f"solve: 0 new, 0 done, {TOTAL} stale (a run computes {TOTAL})" in printed
    tile_lines = [line for line in printed.splitlines() if line.startswith("solve ")]
    assert len(tile_lines) == TOTAL and all(" stale " in line for line in tile_lines)
    beta = run(parse_config(_cfg(out, geotiff_series.paths, address, beta=2.0)))
    assert (beta.staged, beta.stage_skipped, beta.solved, beta.solve_skipped) == (
        0,
        N_TILES,
        TOTAL,
        0,
    )
    # The superseded markers were removed and no part is left to fill the disk: a band's parts
    # are deleted once it is blended.
    assert not list((out / "work" / "parts").glob("*.zarr"))
    assert len(list((out / "work" / "done").glob("B*.json"))) == TOTAL
    assert main(["-q", "plan", "--summary", str(path)]) == 0
    assert f"solve: 0 new, {TOTAL} done, 0 stale" in capsys.readouterr().out
    assert main(["-q", "status", str(path)]) == 0
    status = capsys.readouterr().out
    assert "run: complete" in status and f"solve: {TOTAL}/{TOTAL} tiles done" in status
    assert "complete: yes" in status


def test_part_without_marker_and_orphan_temp_are_redone(
    geotiff_series: SimulatedProducts, address: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    cfg = parse_config(_cfg(out, geotiff_series.paths, address))
    assert run(cfg).ok
    before = outputs(out)
    # A run stopped after solving band B2 but before blending it: B2's parts and markers are
    # on disk, its blended marker is not (parts are deleted only after that marker).
    plan = make_plan(cfg)
    layout = plan.layout
    layout.marker(plan.blended_id("B2")).unlink()
    b = plan.bands.index("B2")
    for t in plan.tiles:
        sid = plan.solve_ids["B2"][t.row, t.col]
        solve_tile(SolveJob(t, b, "B2", sid, layout, cfg.solver, 1, plan.tiles.inner_chunk))
    # The crash windows of one solve: data written but no marker yet; a temporary part left by a
    # write that was interrupted; and a marker whose part vanished.
    victims = sorted(layout.done.glob("B2-*.json"))[:3]
    victims[0].unlink()
    part = layout.part(victims[1].stem)
    shutil.copytree(part, part.with_name(f".{part.name}.deadbeef.tmp"))
    victims[1].unlink()
    shutil.rmtree(layout.part(victims[2].stem))
    summary = run(cfg)
    assert summary.ok and summary.solved == 3 and summary.solve_skipped == TOTAL - 3
    assert not list(layout.parts.glob("*"))  # B2 blended: its parts and the orphan are gone
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


def test_write_part_never_leaves_a_half_store(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "parts" / "B1-r00c00-0.zarr"

    # Values that cannot become float32: the write fails after the store was created.
    with pytest.raises((ValueError, TypeError)):
        write_part(path, np.full((3, 2, 4, 4), "not a number", dtype=object))
    assert not path.exists() and not list(path.parent.iterdir())
    write_part(path, np.ones((3, 2, 4, 4), dtype=np.float32))
    assert path.is_dir() and [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_dem_invalidates_the_staged_tiles(
    geotiff_series: SimulatedProducts, tmp_path: Path
) -> None:
    base = config_dict(tmp_path / "out", list(geotiff_series.paths))
    with_dem = {**base, "inputs": {**base["inputs"], "dem": str(tmp_path / "dem.tif")}}
    plain, dem = make_plan(parse_config(base)), make_plan(parse_config(with_dem))
    assert set(plain.stage_ids.values()).isdisjoint(dem.stage_ids.values())
