"""The STAC catalog of a batch: structure, assets, relative links, validation, atomic rewrite.

pystac validates the core STAC schemas from copies it ships, so they are checked offline (with
jsonschema installed). Extension schemas (projection) are fetched over the network, which
tests must not need: their fields are checked here by hand and the validator is given a
permissive stand-in for that one schema.
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
from pipeline.batch.stac import ZARR_MEDIA_TYPE, publish_catalog
from pipeline.config import parse
from pipeline.inputs.synthetic import make_gf4_series


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
        assert len(cogs) == 5 * n
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
        assert props["cloudremoval:solver"] == "aatm"
        assert props["cloudremoval:lambda_rule"] == "fitted lambda* per tile"
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


def test_catalog_validates(published: tuple[Path, BatchSummary]) -> None:
    pytest.importorskip("jsonschema")
    from pystac.validation import JsonSchemaSTACValidator, set_validator

    validator = JsonSchemaSTACValidator()
    # Offline: extension schemas would be downloaded; the projection fields are checked above.
    uri = ProjectionExtension.get_schema_uri()
    validator.schema_cache[uri] = {"$schema": "http://json-schema.org/draft-07/schema#"}
    set_validator(validator)
    try:
        catalog = pystac.Catalog.from_file(str(published[0] / "stac" / "catalog.json"))
        assert catalog.validate_all() == len(list(catalog.get_items()))
    finally:
        set_validator(JsonSchemaSTACValidator())


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
