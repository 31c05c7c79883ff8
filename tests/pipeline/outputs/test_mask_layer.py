"""The mask pass (one task per tile row, sweeping its cores) gives the whole-scene classification.

Real Zarr stores on disk, made and chunked as a run makes them; the expected codes come from
:func:`cloudcore.masks.classify` over the whole scene at once, so tile borders, the narrow last
tile column and the opening's reach across cores are all checked against one reference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import zarr
from affine import Affine
from scipy import ndimage

from cloudcore.kept import keep_clear
from cloudcore.masks import CLEAR, NODATA, MaskRule, classify, other_day_neighbours
from pipeline.errors import TileError
from pipeline.grid.target import TargetGrid
from pipeline.grid.tiling import TileGrid
from pipeline.outputs.kept import FILLED, OBSERVED
from pipeline.outputs.mask_layer import MaskJob, mask_row
from pipeline.store.cube import chunk_files, create_store
from pipeline.store.durable import write_marker
from pipeline.store.layout import INPUT_OBSERVED, INPUT_SEEN, MASK, PROVENANCE
from tests.pipeline.reads import reads_asked_before, record_reads

N_DATES, N_BANDS, TILE, OVERLAP = 3, 2, 32, 8


def _scene(height: int, width: int, seed: int) -> dict[str, np.ndarray]:
    """Observations with gaps and solved layers with cloud, haze and shadow blobs."""
    rng = np.random.default_rng(seed)
    shape = (N_DATES, N_BANDS, height, width)
    observed = rng.uniform(0.05, 0.4, shape).astype(np.float32)
    observed[0, :, :10, :] = np.nan  # a date that missed the top of the scene, every band
    observed[1, 1, :, -7:] = np.nan  # one band missing a strip
    cloud = np.abs(rng.normal(0, 0.004, shape)).astype(np.float32)
    shadow = np.abs(rng.normal(0, 0.004, shape)).astype(np.float32)
    haze = np.zeros(shape, np.float32)
    for _ in range(30):  # blobs of a few pixels, some across core borders, some single pixels
        t = rng.integers(N_DATES)
        r, c = rng.integers(height), rng.integers(width)
        h, w = rng.integers(1, 9, 2)
        layer = (cloud, shadow, haze)[rng.integers(3)]
        layer[t, :, r : r + h, c : c + w] += rng.uniform(0.05, 0.3)
    unseen = ~np.isfinite(observed)
    for layer in (cloud, shadow, haze):
        layer[unseen] = 0.0  # the solver's layers are 0 where a band did not observe
    clear = rng.uniform(0.05, 0.4, shape).astype(np.float32)
    clear[:, :, :, :2] = np.nan  # pixels observed on no date are NaN in the cube
    observed[:, :, :, :2] = np.nan
    return {"observed": observed, "cloud": cloud, "haze": haze, "shadow": shadow, "clear": clear}


def _stores(tmp_path: Path, scene: dict[str, np.ndarray], grid: TileGrid) -> tuple[Path, Path]:
    """input.zarr and cube.zarr laid out as a run lays them out (:func:`create_store` with the
    run's chunking), holding ``scene``."""
    origin = Affine(50, 0, 440_000, 0, -50, 4_420_000)
    target = TargetGrid("EPSG:32650", origin, grid.width, grid.height)
    common = {
        "times": [datetime(2020, 6, d + 1) for d in range(N_DATES)],
        "bands": [f"B{b + 1}" for b in range(N_BANDS)],
        "tile_size": grid.tile_size,
        "attrs": {},
    }
    source, cube = tmp_path / "input.zarr", tmp_path / "cube.zarr"
    create_store(
        source,
        target,
        variables=[INPUT_OBSERVED],
        codes=[INPUT_SEEN],
        inner_chunk=grid.inner_chunk,
        **common,
    )
    create_store(
        cube,
        target,
        variables=["clear", "cloud", "haze", "shadow"],
        codes=(PROVENANCE,),
        date_codes=(MASK,),
        chunk_rows=grid.cube_chunk_rows,
        **common,
    )
    zarr.open_array(store=str(source), path=INPUT_OBSERVED, mode="r+")[...] = scene["observed"]
    seen = np.isfinite(scene["observed"]).astype(np.uint8)  # as staging writes it
    zarr.open_array(store=str(source), path=INPUT_SEEN, mode="r+")[...] = seen
    group = zarr.open_group(store=str(cube), mode="r+")
    for name in ("clear", "cloud", "haze", "shadow"):
        group[name][...] = scene[name]
    return source, cube


def _mask_all_rows(
    grid: TileGrid,
    source: Path,
    cube: Path,
    records: Sequence[Path],
    rule: MaskRule,
    *,
    keep_clear: bool,
    haze: bool = True,
    offset: float | None = None,
    short_band: int = 0,
    neighbours: tuple[tuple[int, int], ...] | None = None,
    times: tuple[float, ...] | None = None,
) -> None:
    """Run the mask task of every tile row, as a run does."""
    for row in range(grid.n_rows):
        mask_row(
            MaskJob(
                tiles=tuple(grid.tile(row, c) for c in range(grid.n_cols)),
                task_id=f"mask-r{row:02d}",
                height=grid.height,
                width=grid.width,
                input_store=str(source),
                cube=str(cube),
                layers=("clear", "cloud", "haze", "shadow"),
                bands=tuple(f"B{b + 1}" for b in range(N_BANDS)),
                records=tuple(str(r) for r in records),
                rule=rule,
                keep_clear=keep_clear,
                haze=haze,
                offset=offset,
                short_band=short_band,
                neighbours=neighbours,
                times=times,
            )
        )


@pytest.mark.parametrize(
    ("width", "radius", "white", "edge", "near", "level", "persist", "flat"),
    # last tile column 22 px wide; 1 px wide, narrower than the opening; a whiteness test whose
    # shortest band is the second; shadows extended into their edges (mask.shadow_edge);
    # shadows beside their clouds, 12 px away at most, farther than a tile's overlap
    # (mask.shadow_near); with them, a date's brightening level over 10 px (mask.bright_level);
    # with them, ground that stays (mask.persist) across a core border; with them, shadows dark
    # in every band within 20 px of a cloud (mask.shadow_flat: the observations read too)
    [
        (150, 1, 0.0, 0.0, 0.0, 0, 0.0, 0.0),
        (129, 2, 0.0, 0.0, 0.0, 0, 0.0, 0.0),
        (150, 1, 0.5, 0.0, 0.0, 0, 0.0, 0.0),
        (129, 1, 0.0, 1.0, 0.0, 0, 0.0, 0.0),
        (129, 1, 0.0, 0.0, 1.25, 0, 0.0, 0.0),
        (129, 1, 0.0, 0.0, 1.25, 10, 0.0, 0.0),
        (129, 1, 0.0, 0.0, 1.25, 0, 0.3, 0.0),
        (129, 1, 0.0, 0.0, 1.25, 0, 0.0, 3.0),
    ],
)
def test_row_sweep_equals_the_whole_scene_classification(
    tmp_path: Path,
    width: int,
    radius: int,
    white: float,
    edge: float,
    near: float,
    level: int,
    persist: float,
    flat: float,
) -> None:
    height = 70  # tile rows of 32, 32 and 6
    grid = TileGrid(height, width, TILE, OVERLAP)
    scene = _scene(height, width, seed=width)
    if white:  # brightenings of the first band alone, which the test calls clear
        scene["cloud"][1, 0, 20:40, 40:60] += 0.2
        scene["cloud"][2, 0, 60:70, 100:140] += 0.2
        scene["cloud"][np.isnan(scene["observed"])] = 0.0
    if edge:  # dimmer rims 4 px wide around the shadows, one more than the edge's reach
        blobs = scene["shadow"] > 0.04
        rims = ndimage.binary_dilation(blobs, np.ones((1, 1, 3, 3), bool), iterations=4)
        scene["shadow"][rims & ~blobs & np.isfinite(scene["observed"])] += 0.015
    if near:  # rings 6 px wide around the clouds darkened by 2.25σ (the bands' mean)
        blobs = scene["cloud"] > 0.04
        rings = ndimage.binary_dilation(blobs, np.ones((1, 1, 3, 3), bool), iterations=6)
        scene["shadow"][rings & ~blobs & np.isfinite(scene["observed"])] += 0.03
    if persist:  # a bright field on every date, across a core border: ground that stays
        scene["cloud"][:, :, 40:48, 26:40] += 0.1
        scene["cloud"][np.isnan(scene["observed"])] = 0.0
    if level:  # the last date brightened by 5σ across its left half (haze or cloud without)
        scene["cloud"][2, :, :, : width // 2] += np.array([0.05, 0.1])[:, None, None]
        scene["cloud"][np.isnan(scene["observed"])] = 0.0
    source, cube = _stores(tmp_path, scene, grid)
    # Every class can occur.
    rule = MaskRule(
        cloud=6,
        haze=4,
        shadow=3,
        radius=radius,
        white=white,
        shadow_edge=edge,
        shadow_near=near,
        near_reach=12,
        bright_level=level,
        level_below=5.5,
        persist=persist,
        shadow_flat=flat,
        flat_reach=20,
    )
    days = other_day_neighbours(np.arange(N_DATES, dtype=float))
    scales = (0.01, 0.02)
    # Each band's σ is the median of its tiles' records, read from the row markers: here one
    # marker per band with three tiles (one empty, whose σ 0 does not count).
    bands = tuple(f"B{b + 1}" for b in range(N_BANDS))
    markers = []
    for band, sigma in zip(bands, scales, strict=True):
        tiles = [{"band": band, "anomaly_scale": v} for v in (0.0, sigma, sigma * 3)]
        tiles.append({"band": band, "anomaly_scale": sigma / 2})
        markers.append(tmp_path / f"{band}-r00.json")
        write_marker(markers[-1], {"tiles": tiles})
    records = (*markers, tmp_path / "not-written.json")
    neighbours = tuple((int(b), int(a)) for b, a in days) if persist else None
    _mask_all_rows(
        grid, source, cube, records, rule, keep_clear=True, short_band=1, neighbours=neighbours
    )

    unseen = ~np.isfinite(scene["observed"])
    bright = np.where(unseen, np.nan, scene["cloud"] + scene["haze"]).transpose(1, 0, 2, 3)
    dark = np.where(unseen, np.nan, scene["shadow"]).transpose(1, 0, 2, 3)
    seen = (~unseen).any(axis=1)
    # The shadow dark in every band reads D and the residual the layers give, C + N − S.
    observations = np.where(unseen, np.nan, scene["observed"]).transpose(1, 0, 2, 3)
    residuals = (scene["cloud"] + scene["haze"] - scene["shadow"]).transpose(1, 0, 2, 3)
    shade = {"observations": observations, "residuals": residuals}
    expected = classify(
        bright, dark, np.array(scales), seen, rule, short_band=1, neighbours=days, **shade
    )
    group = zarr.open_group(store=str(cube), mode="r")
    codes = np.asarray(group["mask"][:])
    assert np.array_equal(codes, expected)
    # Every class occurs, and the opening changed codes (it reaches across cores here).
    assert set(np.unique(codes)) >= {0, 1, 2, 3, NODATA}
    unopened = classify(
        bright, dark, np.array(scales), seen, replace(rule, radius=0), 1, days, **shade
    )
    assert not np.array_equal(codes, unopened)
    if edge:  # the shadows grew into their edges
        plain = classify(
            bright, dark, np.array(scales), seen, replace(rule, shadow_edge=0.0), 1, days, **shade
        )
        assert ((codes == 3) & (plain == 0)).any() and not ((plain == 3) & (codes != 3)).any()
    if near:  # the darkened entries near clouds became shadow, those far from any did not
        plain = classify(
            bright, dark, np.array(scales), seen, replace(rule, shadow_near=0.0), 1, days, **shade
        )
        added = (codes == 3) & (plain == 0)
        assert added.any() and ((plain == 0) & (codes == 0)).any()
        clouds = ndimage.binary_dilation(codes == 2, np.ones((1, 25, 25), bool))
        assert not (added & ~clouds).any()
    if level:  # the brightened half is no brighter than around it (but near its edge)
        plain = classify(
            bright, dark, np.array(scales), seen, replace(rule, bright_level=0), 1, days, **shade
        )
        assert ((plain[2] != 0) & (codes[2] == 0)).sum() > 1000
    if persist:  # the field is ground where it stays (clear), cloud without the rule
        plain = classify(
            bright, dark, np.array(scales), seen, replace(rule, persist=0.0), 1, days, **shade
        )
        field = codes[:, 41:47, 27:39]  # clear, or shadow where a blob darkened it
        assert (plain[:, 41:47, 27:39] == 2).all() and not (field == 2).any()
        assert (field == 0).mean() > 0.8
    if white:  # the first band's own brightening is not cloud: the test removed it
        untested = classify(
            bright, dark, np.array(scales), seen, replace(rule, white=0.0), 1, days, **shade
        )
        assert (untested[1, 22:38, 42:58] == 2).all() and (codes[1, 22:38, 42:58] == 0).all()
    if flat:  # clear entries dark in every band near clouds became shadow, none far from one
        plain = classify(
            bright, dark, np.array(scales), seen, replace(rule, shadow_flat=0.0), 1, days
        )
        added = (codes == 3) & (plain != 3)
        assert added.any() and not (added & (plain != 0)).any()
        clouds = ndimage.binary_dilation(codes == 2, np.ones((1, 41, 41), bool))
        assert not (added & ~clouds).any() and ((codes == 0) & clouds).any()

    clear_mask = (codes == CLEAR)[:, None]
    kept_clear, kept = keep_clear(scene["clear"], scene["observed"], clear_mask)
    kept_clear[~np.isfinite(scene["observed"])] = np.nan  # a date is no data where it saw nothing
    assert np.array_equal(np.asarray(group["clear"][:]), kept_clear, equal_nan=True)
    provenance = np.where(kept, OBSERVED, FILLED).astype(np.uint8)
    provenance[~np.isfinite(kept_clear)] = NODATA
    assert np.array_equal(np.asarray(group["provenance"][:]), provenance)


#: The dates' times (s) with ``mask.interpolate``: out of order, unevenly apart.
TIMES = (86_400.0 * 9, 3_600.0, 86_400.0 * 2)


# 36: cores not on the offset's 8 px blocks; 16: cores narrower than the offset's margin, so a
# core's context takes columns from two cores on each side (the scores' residual edges); with
# the pixel's own departure interpolated in time (mask.interpolate), with the offset or alone
@pytest.mark.parametrize(
    ("tile", "scale", "times"),
    [
        (TILE, 4.0, None),
        (36, 4.0, None),
        # The 16 px cores take a run of 40 tiles each (about 24 s on 2 cores): slow suite.
        pytest.param(16, 4.0, None, marks=pytest.mark.slow),
        (TILE, 4.0, TIMES),
        pytest.param(16, 4.0, TIMES, marks=pytest.mark.slow),
        (36, None, TIMES),
    ],
)
def test_offset_equals_the_whole_scene_s_and_a_rerun_writes_the_same(
    tmp_path: Path, tile: int, scale: float | None, times: tuple[float, ...] | None
) -> None:
    """With ``mask.offset`` an observed entry the mask does not keep is written as D − R plus
    :func:`cloudcore.offset.clear_offset` of the residual R = C + N − S where kept, computed
    over the whole scene at once: the cores' margins reach across tile borders (tiles of 32 or
    36 px, the offset's 24). With ``mask.interpolate`` R is first less the pixel's own
    departure on its other kept dates (:func:`cloudcore.departure.interpolated_departure`).
    A second pass over the cube it wrote (a rerun) writes the same bytes."""
    from cloudcore.departure import interpolated_departure
    from cloudcore.offset import clear_offset, offset_margin

    height, width = 70, 150
    # So neighbours' cores are read, not only halos (16 px cores: past them, into the next).
    assert tile == 16 or offset_margin(scale=scale or 4.0) < tile
    grid = TileGrid(height, width, tile, min(OVERLAP, tile // 2))
    scene = _scene(height, width, seed=21)
    # A departure from the ground that varies across the scene, the same in the clear entries
    # and under the clouds: what the offset is for.
    ramp = np.linspace(-0.05, 0.05, width, dtype=np.float32)
    scene["cloud"] += np.where(np.isfinite(scene["observed"]), np.abs(ramp), 0.0).astype(np.float32)
    # A band's layers NaN where the date did observe (a date the tiles there left out), under a
    # cloud the other band sees: neither evidence nor written from, no data there. Every solved
    # layer is NaN there in a run's cube, the ground too (tests/pipeline/test_footprints.py).
    scene["cloud"][1, 0, 30:50, 40:90] += 0.5
    for layer in ("clear", "cloud", "haze", "shadow"):
        scene[layer][1, 1, 30:50, 40:90] = np.nan
    source, cube = _stores(tmp_path, scene, grid)
    marker = tmp_path / "r00.json"
    write_marker(marker, {"tiles": [{"band": f"B{b + 1}", "anomaly_scale": 0.05} for b in (0, 1)]})
    rule = MaskRule(cloud=4, haze=4, shadow=3)
    group = zarr.open_group(store=str(cube), mode="r")
    written = []
    for _ in range(2):
        _mask_all_rows(
            grid, source, cube, (marker,), rule, keep_clear=True, offset=scale, times=times
        )
        written.append(np.asarray(group["clear"][:]))
    assert np.array_equal(written[0], written[1], equal_nan=True)

    codes = np.asarray(group["mask"][:])
    observed = scene["observed"]
    seen = np.isfinite(observed)
    residual = scene["cloud"] + scene["haze"] - scene["shadow"]
    kept = (codes == CLEAR)[:, None] & seen
    if times is not None:
        departure = interpolated_departure(residual, kept, np.array(times))
        assert np.abs(departure[seen & ~kept]).max() > 0.01  # not idle where filled
        residual = residual - departure
    shift = np.zeros_like(residual) if scale is None else clear_offset(residual, kept, scale=scale)
    filled = seen & ~kept
    expected = np.where(kept, observed, scene["clear"]).astype(np.float32)
    shifted = observed - residual + shift
    moved = filled & np.isfinite(shifted)
    expected[moved] = np.clip(shifted[moved], 0.0, 1.0)
    expected[~seen] = np.nan
    assert np.isfinite(shift).all()  # the left-out date's NaN residual is no evidence
    assert (filled & ~moved).sum() > 100  # where the solve's layers are NaN
    assert moved.sum() > 100
    # The offset is not idle (with the interpolation the ramp, the same on every date, is in
    # the pixel's own departure: what is left for the offset is small).
    if scale is not None and times is None:
        assert np.abs(shift[moved]).max() > 0.01
    assert np.array_equal(written[0], expected, equal_nan=True)


@pytest.mark.parametrize("refine", [False, True])
@pytest.mark.parametrize("method", ["aatm", "aatm-shadow", "rpca", "nnrpca", "atm"])
def test_haze_is_zero_where_observed_unless_writes_haze(method: str, refine: bool) -> None:
    """The mask reads no haze when :func:`cloudcore.catalog.writes_haze` says a run cannot write
    one on an observed entry: the tile's solve (every method, refined or not) must then leave N at 0
    wherever the pixel is observed (NaN only on pixels observed on no date)."""
    from cloudcore.catalog import HAZE_METHODS, writes_haze
    from pipeline.config import SolverConfig
    from pipeline.solve.tile import solve_matrix

    # tests/cloudcore/test_catalog.py checks the catalog's content: this checks the claim.
    rng = np.random.default_rng(3)
    h, w, n = 24, 20, 6
    ground = rng.uniform(0.1, 0.3, (h * w, 1)) * rng.uniform(0.8, 1.2, (1, n))
    D = (ground + np.abs(rng.normal(0, 0.002, (h * w, n)))).astype(np.float32)
    D[:60, 2] += 0.4  # a cloud
    D[100:130, 4] -= 0.1  # a shadow
    mask = rng.random((h * w, n)) > 0.15
    mask[:20] = False  # pixels observed on no date
    D[~mask] = 0.0
    solver = SolverConfig(method=method, refine=refine)
    result = solve_matrix(D, mask, solver, (h, w), lam=1 / np.sqrt(h * w), threads=1)
    N = np.asarray(result.N)
    if not writes_haze(method, refine):
        assert np.all(N[mask] == 0.0)
    elif method in HAZE_METHODS:
        assert np.any(N[mask] != 0.0)  # the claim above is not vacuous: these do write haze


def test_mask_without_reading_haze_is_the_same(tmp_path: Path) -> None:
    """``MaskJob.haze`` False (a haze layer that is 0 wherever observed) gives the codes read
    with it."""
    height, width = 70, 75
    grid = TileGrid(height, width, TILE, OVERLAP)
    scene = _scene(height, width, seed=11)
    scene["haze"][np.isfinite(scene["observed"])] = 0.0
    scene["haze"][:, :, :, :2] = np.nan  # as the refinement leaves pixels observed on no date
    scene["cloud"][0, 0, 5, 5:9] = -0.0  # whose sum with +0 haze would be +0
    codes = {}
    for haze in (True, False):
        source, cube = _stores(tmp_path / str(haze), scene, grid)
        marker = tmp_path / f"{haze}-r00.json"
        tiles = [{"band": f"B{b + 1}", "anomaly_scale": 0.01} for b in range(N_BANDS)]
        write_marker(marker, {"tiles": tiles})
        _mask_all_rows(grid, source, cube, (marker,), MaskRule(), keep_clear=False, haze=haze)
        codes[haze] = np.asarray(zarr.open_group(store=str(cube), mode="r")["mask"][:])
    assert set(np.unique(codes[True])) >= {0, 2, 3, NODATA}
    assert np.array_equal(codes[True], codes[False])


def test_each_core_s_files_are_asked_for_before_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mask task asks the kernel for a core's chunk files (every layer it reads, every band,
    and the input's `seen` chunks of the core and of the cores above and below it) before it
    reads them, the next core's while it works on this one."""
    height, width = 70, 150
    grid = TileGrid(height, width, TILE, OVERLAP)
    source, cube = _stores(tmp_path, _scene(height, width, seed=5), grid)
    marker = tmp_path / "r00.json"
    write_marker(marker, {"tiles": [{"band": f"B{b + 1}", "anomaly_scale": 0.01} for b in (0, 1)]})
    events = record_reads(monkeypatch, "pipeline.outputs.mask_layer")
    rule = MaskRule(radius=1, shadow_flat=0.0)
    _mask_all_rows(grid, source, cube, (marker,), rule, keep_clear=False)

    layers = chunk_files(cube, ["clear", "cloud", "haze", "shadow"], range(99), range(99))
    count, unasked = reads_asked_before(events, set(layers))
    assert count >= len(layers) and not unasked
    shards = {p for k, p in events if k == "asked" and p.is_relative_to(source)}
    assert len(shards) == grid.n_rows * grid.n_cols * N_BANDS  # every core's `seen`, no more
    # With a shadow dark in every band the scores read the observations too: asked first.
    events.clear()
    _mask_all_rows(grid, source, cube, (marker,), replace(rule, shadow_flat=3.0), keep_clear=False)
    observations = chunk_files(source, [INPUT_OBSERVED], range(99), range(99))
    count, unasked = reads_asked_before(events, set(observations))
    assert count >= grid.n_rows * grid.n_cols and not unasked


@pytest.mark.parametrize("keep_clear", [False, True])
def test_a_lost_chunk_of_a_solved_layer_fails_its_core_in_one_line(
    tmp_path: Path, keep_clear: bool
) -> None:
    """A chunk file of a solved layer that has gone from the cube (Zarr would read it as NaN,
    and the pass would write no data there without a word) fails the mask task of the core
    that reads it, with a message naming the core, the file and what to do; nothing of that
    core's mask is written."""
    height, width = 70, 75
    grid = TileGrid(height, width, TILE, OVERLAP)
    source, cube = _stores(tmp_path, _scene(height, width, seed=3), grid)
    marker = tmp_path / "r00.json"
    write_marker(marker, {"tiles": [{"band": f"B{b + 1}", "anomaly_scale": 0.01} for b in (0, 1)]})
    # The haze of band B2 in the chunk row holding row 40 and the last core column's chunk.
    tile = grid.tile(1, grid.n_cols - 1)
    lost = cube / "haze" / "c" / "0" / "1" / str(40 // grid.cube_chunk_rows) / str(tile.col)
    assert lost.is_file()
    lost.unlink()
    with pytest.raises(TileError) as failed:
        _mask_all_rows(grid, source, cube, (marker,), MaskRule(), keep_clear=keep_clear)
    message = str(failed.value)
    assert "\n" not in message
    # The first core whose reads reach the chunk: of the last column, its own tile row or the
    # one above (whose scores read rows below its core).
    core = re.search(r"mask-r(\d\d)c(\d\d)", message)
    assert core is not None and int(core[2]) == tile.col and int(core[1]) in (0, 1)
    assert str(lost.relative_to(cube)) in message
    assert "--overwrite" in message
    failed_core = grid.tile(int(core[1]), tile.col).core
    mask = zarr.open_group(store=str(cube), mode="r")[MASK]
    assert np.all(np.asarray(mask[(slice(None), *failed_core.slices)]) == NODATA)  # not written
