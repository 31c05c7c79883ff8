"""Batch reprocessing end to end: a small synthetic archive, real Zarr/COGs, a real cluster.

The archive holds two areas far apart (A: three dates as .tar.gz, B: two dates as directories)
and, for A's area, one date two months later (a time gap: a series of its own, too short to
process). The batch runs three times: first everything, then nothing new (no work), then with
one more date of B (only B's series is recomputed).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.batch import (
    ArchiveConfig,
    BatchSummary,
    GroupingSection,
    Product,
    group_products,
    load_archive_config,
    run_batch,
    scan_archive,
    series_id,
)
from pipeline.config import parse
from pipeline.errors import ConfigError
from pipeline.geom import overlap_fraction
from pipeline.inputs.synthetic import make_gf4_series

SIZE, TILE = 64, 64
A, B = (116.4, 39.9), (100.0, 30.0)


def _shift_product(directory: Path, days: int) -> Path:
    """Move a product directory's date by ``days`` (name, file names and XML times)."""
    m = re.search(r"_(\d{8})_L1A", directory.name)
    assert m is not None
    old = m[1]
    new = (datetime.strptime(old, "%Y%m%d") + timedelta(days=days)).strftime("%Y%m%d")
    for f in directory.iterdir():
        if f.suffix == ".xml":
            text = f.read_text()
            for tag in ("StartTime", "EndTime", "CenterTime"):
                value = re.search(f"<{tag}>(.*?)</{tag}>", text)
                assert value is not None
                moved = datetime.strptime(value[1], "%Y-%m-%d %H:%M:%S") + timedelta(days=days)
                text = text.replace(value[0], f"<{tag}>{moved:%Y-%m-%d %H:%M:%S}</{tag}>")
            f.write_text(text)
        f.rename(f.with_name(f.name.replace(old, new)))
    target = directory.with_name(directory.name.replace(old, new))
    directory.rename(target)
    return target


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("archive")
    make_gf4_series(
        root / "2020" / "a",
        n_dates=3,
        size=SIZE,
        seed=1,
        center_lonlat=A,
        archive=True,
        cloud_style="moving",
    )
    make_gf4_series(
        root / "2020" / "b", n_dates=2, size=SIZE, seed=2, center_lonlat=B, cloud_style="moving"
    )
    late = make_gf4_series(root / "late", n_dates=1, size=SIZE, seed=3, center_lonlat=A)
    _shift_product(late.paths[0], 60)
    # Not products: a stray file and the simulation's truth images must be ignored.
    (root / "README.txt").write_text("not a product")
    return root


def _config(archive: Path, out: Path, cluster: dict[str, Any]) -> ArchiveConfig:
    return parse(
        {
            "archive": {"roots": [str(archive)], "sensors": "PMS"},
            "grouping": {"window_days": 16, "window_origin": "2020-05-25", "min_dates": 2},
            "output": {"path": str(out), "remove_superseded": True},
            "run": {"tiling": {"tile_size": TILE, "overlap": 8}, "solver": {"max_iter": 200}},
            "cluster": {"dashboard": False, **cluster},
        },
        ArchiveConfig,
    )


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def batches(
    archive: Path, scheduler: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Three batches over the same output: first, nothing new, one new date of B."""
    out = tmp_path_factory.mktemp("batch_out")
    address = {"kind": "address", "address": scheduler}
    first = run_batch(_config(archive, out, address))
    stac_after_first = _snapshot(out / "stac")
    # What the first batch left, before the third one supersedes part of it.
    after_first = {
        sid: {
            "manifest": json.loads((out / "series" / sid / "series.json").read_text()),
            "cogs": len(list((out / "series" / sid / "cog").glob("*.tif"))),
            "cube": (out / "series" / sid / "cube.zarr" / "zarr.json").exists(),
            "work": (out / "series" / sid / "work").exists(),
        }
        for sid in first.processed
    }
    # A "local" cluster here would start worker processes: the batch must not even do that.
    second = run_batch(_config(archive, out, {"kind": "local", "n_workers": 1}))
    stac_after_second = _snapshot(out / "stac")
    added = make_gf4_series(
        archive / "2020" / "b_new", n_dates=1, size=SIZE, seed=4, center_lonlat=B
    )
    third = run_batch(_config(archive, out, address))
    return {
        "out": out,
        "first": first,
        "after_first": after_first,
        "second": second,
        "third": third,
        "stac": (stac_after_first, stac_after_second),
        "added": added.paths[0],
    }


def _outcome(summary: BatchSummary, status: str) -> list[str]:
    return [o.series_id for o in summary.outcomes if o.status == status]


def test_scan_and_grouping(archive: Path, tmp_path: Path) -> None:
    scan = scan_archive([archive], ["PMS"], cache_path=tmp_path / "cache.json")
    assert scan.unreadable == ()
    assert len(scan.products) == 6
    assert all(p.time.tzinfo is UTC for p in scan.products)
    series = group_products(
        scan.products,
        GroupingSection(window_days=16, window_origin=datetime(2020, 5, 25).date(), min_dates=2),
    )
    by_size = sorted((len(s.products), s.products[0].footprint[0][0] > 110) for s in series)
    # A: 3 dates (lon 116); B: 2 dates (lon 100); A's area 60 days later: 1 date.
    assert by_size == [(1, True), (2, False), (3, True)]
    for s in series:
        assert s.id == series_id("PMS", [p.image_id for p in s.products])
        assert len({p.sensor for p in s.products}) == 1
    # The scan cache answers for archives without opening them.
    cached = json.loads((tmp_path / "cache.json").read_text())["entries"]
    assert sum(k.endswith(".tar.gz") for k in cached) == 3
    again = scan_archive([archive], ["PMS"], cache_path=tmp_path / "cache.json")
    assert again.products == scan.products


def _product(image_id: str, day: int, lon: float) -> Product:
    t = datetime(2020, 6, 1, tzinfo=UTC) + timedelta(days=day)
    square = ((lon, 40.0), (lon + 1, 40.0), (lon + 1, 39.0), (lon, 39.0))
    return Product(Path(image_id), "PMS", image_id, t, t, t, square, (0,))


def test_grouping_rules_on_records() -> None:
    rules = GroupingSection(window_days=10, window_origin=datetime(2020, 6, 1).date())
    products = [
        _product("a1", 0, 116.0),
        _product("a2", 3, 116.2),  # overlaps a1 by 80 %
        _product("far", 1, 100.0),  # no overlap
        _product("edge", 2, 116.8),  # overlaps a1 by 20 %: below min_overlap 0.5
        _product("a3", 12, 116.0),  # same place, next window
    ]
    groups = sorted(sorted(p.image_id for p in s.products) for s in group_products(products, rules))
    assert groups == [["a1", "a2"], ["a3"], ["edge"], ["far"]]
    assert overlap_fraction(products[0].footprint, products[1].footprint) == pytest.approx(0.8)
    # Order of discovery does not change ids.
    again = group_products(list(reversed(products)), rules)
    assert {s.id for s in again} == {s.id for s in group_products(products, rules)}


def test_first_batch_processes_every_series(batches: dict[str, Any]) -> None:
    first: BatchSummary = batches["first"]
    assert first.ok and first.cluster_started
    assert len(first.processed) == 2 and len(first.pending) == 1
    for sid, state in batches["after_first"].items():
        manifest = state["manifest"]
        assert manifest["status"] == "complete" and manifest["series_id"] == sid
        assert state["cube"]
        assert state["cogs"] == (5 + 1) * len(manifest["dates"])  # 5 bands and the mask
        assert not state["work"]  # keep_work: false
    assert sorted(len(s["manifest"]["dates"]) for s in batches["after_first"].values()) == [2, 3]
    outcome = {o.series_id: o for o in first.outcomes}
    assert all(outcome[s].solved > 0 for s in first.processed)


def test_second_batch_does_no_work(batches: dict[str, Any]) -> None:
    second: BatchSummary = batches["second"]
    assert second.ok
    assert second.processed == () and second.failed == ()
    assert len(second.skipped) == 2
    assert not second.cluster_started  # no staging, not even a cluster
    assert sum(o.solved for o in second.outcomes) == 0
    first_stac, second_stac = batches["stac"]
    assert first_stac == second_stac  # the catalog rewrite is byte-identical


def test_new_product_recomputes_only_its_series(batches: dict[str, Any]) -> None:
    first: BatchSummary = batches["first"]
    third: BatchSummary = batches["third"]
    assert third.ok
    assert len(third.processed) == 1 and len(third.skipped) == 1
    (new_b,) = third.processed
    assert new_b not in first.processed
    manifest = json.loads((batches["out"] / "series" / new_b / "series.json").read_text())
    assert len(manifest["dates"]) == 3
    assert any(Path(batches["added"]).name in p for p in manifest["paths"])
    # The old B series was superseded by the grown one and removed (remove_superseded).
    (old_b,) = set(first.processed) - set(third.skipped)
    assert third.removed == (old_b,)
    assert not (batches["out"] / "series" / old_b).exists()


def test_failed_series_does_not_stop_the_others(
    archive: Path, scheduler: str, tmp_path: Path
) -> None:
    bad = tmp_path / "archive"
    good = make_gf4_series(bad / "good", n_dates=2, size=SIZE, seed=6, center_lonlat=B)
    broken = make_gf4_series(bad / "broken", n_dates=2, size=SIZE, seed=7, center_lonlat=A)
    # A series whose image is unreadable fails in discovery, inside the run.
    for product in broken.paths:
        next(product.glob("*.tiff")).write_bytes(b"not a tiff")
    cfg = _config(bad, tmp_path / "out", {"kind": "address", "address": scheduler})
    summary = run_batch(cfg)
    assert len(summary.processed) == 1 and len(summary.failed) == 1
    failed = next(o for o in summary.outcomes if o.status == "failed")
    assert "not readable" in failed.message
    assert not summary.ok
    processed = next(o for o in summary.outcomes if o.status == "processed")
    assert str(good.paths[0].name) in json.dumps(
        json.loads((processed.output / "series.json").read_text())["paths"]
    )


def test_dry_run_processes_nothing(archive: Path, tmp_path: Path) -> None:
    summary = run_batch(_config(archive, tmp_path / "out", {"kind": "local"}), dry_run=True)
    assert summary.processed == () and not summary.cluster_started
    assert not (tmp_path / "out" / "series").exists()
    assert [o.status for o in summary.outcomes].count("planned") == 2
    assert "2 would be processed" in summary.describe()


def test_config_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key `grouping.window_day`: did you mean"):
        parse(
            {
                "archive": {"roots": [str(tmp_path)]},
                "output": {"path": "x"},
                "grouping": {"window_day": 3},
            },
            ArchiveConfig,
        )
    with pytest.raises(ConfigError, match="missing key `archive`"):
        parse({"output": {"path": "x"}}, ArchiveConfig)
    path = tmp_path / "a.yaml"
    path.write_text("archive: {roots: [/nonexistent]}\noutput: {path: out}\nrun:\n")
    cfg = load_archive_config(path)
    with pytest.raises(ConfigError, match=r"archive\.roots: /nonexistent is not a directory"):
        run_batch(
            cfg.model_copy(
                update={"output": cfg.output.model_copy(update={"path": tmp_path / "out"})}
            )
        )


def test_command_line_dry_run(
    archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    path = tmp_path / "archive.yaml"
    path.write_text(
        f"archive: {{roots: [{archive}]}}\n"
        f"output: {{path: {tmp_path / 'out'}}}\n"
        "grouping: {window_days: 16, window_origin: 2020-05-25, min_dates: 2}\n"
        "cluster: {kind: local}\n"
    )
    assert main(["batch", str(path), "--dry-run"]) == 0
    assert "2 would be processed" in capsys.readouterr().out
    assert not (tmp_path / "out" / "series").exists()


def test_example_config_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[3]
    cfg = load_archive_config(root / "configs" / "archive-example.yaml")
    assert cfg.archive.sensors and cfg.grouping.min_dates >= 2


def test_the_config_hash_names_the_floor_only_where_it_takes_effect(tmp_path: Path) -> None:
    """A batch from before ``solver.floor_ground`` and ``solver.shadow_free_fill`` existed
    keeps its hash (its series are not re-run for nothing), and one with a floor or the
    shadow-free fill gets another."""
    from pipeline.ids import json_digest

    base = {"archive": {"roots": [str(tmp_path)]}, "output": {"path": "x"}}
    plain = parse(base, ArchiveConfig)
    before = plain.run.model_dump(mode="json")
    del before["solver"]["floor_ground"]  # the template as it was dumped before the keys
    del before["solver"]["shadow_free_fill"]
    assert plain.config_hash() == json_digest(before, 16)
    assert parse({**base, "run": {"solver": {"floor_ground": 0}}}, ArchiveConfig).config_hash() == (
        plain.config_hash()
    )
    floored = parse({**base, "run": {"solver": {"floor_ground": 0.25}}}, ArchiveConfig)
    assert floored.config_hash() != plain.config_hash()
    filled = parse({**base, "run": {"solver": {"shadow_free_fill": True}}}, ArchiveConfig)
    assert filled.config_hash() != plain.config_hash()
