"""The STAC catalog of a batch: structure, assets, relative links, validation, atomic rewrite.

Validation is stac-validator's (core + the projection, EO and raster extensions the Items
declare), offline: the JSON schemas are vendored in ``tests/data/stac-schemas`` and mapped by
URL, and the network is cut off while it runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pystac
import pytest
import rasterio
from pystac.extensions.projection import ProjectionExtension

from pipeline.batch import ArchiveConfig, BatchSummary, read_manifest, run_batch
from pipeline.batch.stac import (
    EO_SCHEMA,
    GF4_BANDS,
    RASTER_SCHEMA,
    ZARR_MEDIA_TYPE,
    publish_catalog,
)
from pipeline.config import SolverConfig, parse
from pipeline.inputs.synthetic import make_gf4_series
from tests.pipeline.stac_checks import SCHEMAS, stac_validate


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory, scheduler: str
) -> Iterator[tuple[Path, BatchSummary]]:
    """One batch over two areas (2 dates each), 64 px, on a real LocalCluster."""
    root = tmp_path_factory.mktemp("stac_archive")
    make_gf4_series(
        root / "a", n_dates=2, size=64, seed=11, center_lonlat=(116.4, 39.9), archive=True
    )
    make_gf4_series(root / "b", n_dates=2, size=64, seed=12, center_lonlat=(-60.0, -10.0))
    out = tmp_path_factory.mktemp("stac_out")
    cfg = parse(
        {
            "archive": {"roots": [str(root)]},
            "grouping": {"min_dates": 2},
            "output": {"path": str(out)},
            "run": {
                "tiling": {"tile_size": 64, "overlap": 8},
                "solver": {"max_iter": 100, "lam": "star"},
            },
            "cluster": {"kind": "address", "address": scheduler, "dashboard": False},
        },
        ArchiveConfig,
    )
    summary = run_batch(cfg)
    assert summary.ok and len(summary.processed) == 2
    yield out, summary


def test_one_item_per_series_with_assets(published: tuple[Path, BatchSummary]) -> None:
    out, summary = published
    catalog = pystac.Catalog.from_file(str(out / "stac" / "catalog.json"))
    items = {item.id: item for item in catalog.get_items()}
    assert set(items) == set(summary.processed)
    for sid, item in items.items():
        manifest = read_manifest(out / "series" / sid)
        assert manifest is not None
        n = len(manifest["dates"])
        data = [k for k, a in item.assets.items() if a.roles == ["data"]]
        cogs = [k for k in data if item.assets[k].media_type == pystac.MediaType.COG]
        assert len(cogs) == (5 + 1) * n  # 5 bands and the mask
        masks = [k for k in cogs if k.endswith("_mask")]
        titles = [item.assets[k].title or "" for k in masks]
        assert len(masks) == n and all(title.startswith("cloud") for title in titles)
        assert all(item.assets[k].extra_fields["bands"][0]["nodata"] == 255 for k in masks)
        assert item.assets["cube"].media_type == ZARR_MEDIA_TYPE
        overviews = [k for k, a in item.assets.items() if a.roles == ["overview"]]
        assert len(overviews) == n
        assert item.assets["manifest"].roles == ["metadata"]
        # Every href is relative and resolves to a real file next to the outputs.
        for asset in item.assets.values():
            assert not os.path.isabs(asset.href) and not asset.href.startswith("file:")
            assert Path(asset.get_absolute_href() or "").exists()
        props = item.properties
        assert props["start_datetime"] < props["end_datetime"]
        assert item.datetime is None
        assert props["cloudremoval:config_hash"] == manifest["config_hash"]
        assert props["cloudremoval:code_version"] == manifest["code_version"]
        assert props["cloudremoval:solver"] == "aatm"  # the default method
        # The default: 1.4 × λ̂* (solver.lam_scale); a manifest without lam_scale was 1 ×.
        assert props["cloudremoval:lambda_rule"] == "1.4 x fitted lambda* per tile"
        assert props["cloudremoval:refined"] is False  # the default: not refined
        assert props["cloudremoval:ground_capped"] is SolverConfig().caps_ground
        assert props["cloudremoval:products"] == [pid for pid, _ in manifest["products"]]


def test_geometry_and_projection_match_the_cogs(published: tuple[Path, BatchSummary]) -> None:
    out, _ = published
    catalog = pystac.Catalog.from_file(str(out / "stac" / "catalog.json"))
    for item in catalog.get_items():
        cog = next(a for a in item.assets.values() if a.media_type == pystac.MediaType.COG)
        with rasterio.open(cog.get_absolute_href()) as src:
            crs, shape, transform = src.crs, [src.height, src.width], list(src.transform)[:6]
        proj = ProjectionExtension.ext(item)
        assert proj.code == f"EPSG:{crs.to_epsg()}"
        assert proj.shape == shape and proj.transform == pytest.approx(transform)
        assert item.bbox is not None and item.geometry is not None
        lon0, lat0, lon1, lat1 = item.bbox
        assert lon0 < lon1 and lat0 < lat1 and lon1 - lon0 < 0.2
        ring = item.geometry["coordinates"][0]
        assert ring[0] == ring[-1]
        assert all(lon0 <= x <= lon1 and lat0 <= y <= lat1 for x, y in ring)
    centres = sorted(round((i.bbox[0] + i.bbox[2]) / 2) for i in catalog.get_items() if i.bbox)
    assert centres == [-60, 116]


def test_catalog_passes_stac_validator(published: tuple[Path, BatchSummary], offline: None) -> None:
    out, summary = published
    messages = stac_validate(out / "stac" / "catalog.json")
    assert [m["valid_stac"] for m in messages] == [True] * (1 + len(summary.processed)), messages
    items = [m for m in messages if m["asset_type"] == "ITEM"]
    assert len(items) == len(summary.processed)
    for message in items:
        # Core and the three extensions, each validated against the local copy.
        used = sorted(Path(s).relative_to(SCHEMAS).as_posix() for s in message["schema"])
        assert used == [
            "schemas.stacspec.org/v1.1.0/item-spec/json-schema/item.json",
            "stac-extensions.github.io/eo/v2.0.0/schema.json",
            "stac-extensions.github.io/projection/v2.0.0/schema.json",
            "stac-extensions.github.io/raster/v2.0.0/schema.json",
        ], message


def test_validator_rejects_a_broken_item(
    published: tuple[Path, BatchSummary], offline: None, tmp_path: Path
) -> None:
    # The same validation catches wrong extension fields: it is not a formality.
    item_path = next((published[0] / "stac").glob("*/*.json"))
    good = json.loads(item_path.read_text())
    cog = next(k for k, a in good["assets"].items() if a["type"] == pystac.MediaType.COG)
    for field, value in [
        ("eo:common_name", "ultraviolet"),
        ("raster:spatial_resolution", "50 m"),
        ("data_type", "uint12"),
    ]:
        broken = json.loads(item_path.read_text())
        broken["assets"][cog]["bands"][0][field] = value
        path = tmp_path / f"{field.replace(':', '_')}.json"
        path.write_text(json.dumps(broken))
        [message] = stac_validate(path)
        assert message["valid_stac"] is False, (field, message)
    broken = json.loads(item_path.read_text())
    broken["properties"]["proj:shape"] = [1.5]
    path = tmp_path / "proj.json"
    path.write_text(json.dumps(broken))
    assert stac_validate(path)[0]["valid_stac"] is False


def test_cog_assets_describe_their_band(published: tuple[Path, BatchSummary]) -> None:
    out, _ = published
    catalog = pystac.Catalog.from_file(str(out / "stac" / "catalog.json"))
    for item in catalog.get_items():
        assert EO_SCHEMA in item.stac_extensions and RASTER_SCHEMA in item.stac_extensions
        cogs = {
            k: a
            for k, a in item.assets.items()
            if a.media_type == pystac.MediaType.COG and not k.endswith("_mask")
        }
        names = set()
        for asset in cogs.values():
            [band] = asset.extra_fields["bands"]
            with rasterio.open(asset.get_absolute_href()) as src:
                assert band["data_type"] == src.dtypes[0] == "uint16"
                assert band["nodata"] == src.nodata == 0
                assert band["raster:spatial_resolution"] == src.res[0]
            common, centre, width = GF4_BANDS[band["name"]]
            assert band.get("eo:common_name") == common
            assert band["eo:center_wavelength"] == centre
            assert band["eo:full_width_half_max"] == width
            names.add(band["name"])
        assert names == {"B1", "B2", "B3", "B4", "B5"}


def test_self_contained_and_atomic_rewrite(published: tuple[Path, BatchSummary]) -> None:
    out, summary = published
    stac = out / "stac"
    before = {p: p.read_bytes() for p in sorted(stac.rglob("*.json"))}
    root = json.loads((stac / "catalog.json").read_text())
    assert all(link["rel"] != "self" for link in root["links"])  # self-contained
    assert {link["href"][:2] for link in root["links"] if link["rel"] == "item"} == {"./"}
    manifests: list[tuple[Path, dict[str, Any]]] = []
    for sid in summary.processed:
        m = read_manifest(out / "series" / sid)
        assert m is not None
        manifests.append((out / "series" / sid, m))
    publish_catalog(out, manifests)
    after = {p: p.read_bytes() for p in sorted(stac.rglob("*.json"))}
    assert after == before  # idempotent: same manifests, same bytes
    # No temporary or displaced catalog directory is left beside it.
    assert [p.name for p in out.iterdir() if p.name.startswith(".stac")] == []
    # A catalog of one series replaces the whole directory, not just the changed files.
    publish_catalog(out, manifests[:1])
    assert len(list(pystac.Catalog.from_file(str(stac / "catalog.json")).get_items())) == 1
    assert len([p for p in stac.iterdir() if p.is_dir()]) == 1
    publish_catalog(out, manifests)


def test_refined_property_reads_the_manifest_solver() -> None:
    from pipeline.batch.stac import item_properties

    manifest = {
        "start": "2020-06-01T00:00:00Z",
        "end": "2020-06-02T00:00:00Z",
        "sensor": "PMS",
        "series_id": "s",
        "code_version": "v",
        "config_hash": "h",
        "dates": [],
        "products": [],
    }

    def refined(solver: dict[str, object]) -> object:
        return item_properties({**manifest, "run": {"solver": solver}})["cloudremoval:refined"]

    # Earlier manifests wrote refine: null for the scope's default of then (tile scope refined).
    assert refined({"method": "rpca", "lam": "auto", "refine": None}) is True  # tile scope
    assert refined({"method": "rpca", "lam": "auto", "refine": None, "scope": "scene"}) is False
    assert refined({"method": "rpca", "lam": "auto", "refine": False}) is False
    assert refined({"method": "aatm", "lam": "star"}) is False  # written before `refine` existed
    # Written before solver.cap_ground existed: not capped.
    old = item_properties({**manifest, "run": {"solver": {"method": "aatm", "lam": "star"}}})
    assert old["cloudremoval:ground_capped"] is False
