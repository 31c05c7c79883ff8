"""STAC inputs (``inputs.kind: stac``, #46): a static catalog, an ItemCollection file and a STAC
API search, read with odc-stac; provider masks (``inputs.quality``) as knowledge.

The series is real: eight 2019 dates of the bundled Sentinel-2 L2A site over Romania
(``cloudlab/data/real-clouds/s2_nrt_romania_10m.npz``; provenance and licence in
``cloudlab/data/SOURCES.md``), its DN, grid (EPSG:3035, 10 m) and Scene Classification (SCL)
unchanged, written by the test as a static catalog of COGs the way Planetary Computer lays out
Sentinel-2 (asset keys ``B02``…, ``eo:bands`` common names, an ``SCL`` asset).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
import zarr
from affine import Affine
from rasterio.windows import Window

from cloudcore.masks import CLOUD, SHADOW
from cloudlab.sites import SITES_DIR
from cloudlab.stac_site import write_cog, write_stac_series
from pipeline.config import Config, parse
from pipeline.errors import ConfigError, InputError
from pipeline.grid.target import derive_grid
from pipeline.inputs.stac import discover_stac
from pipeline.inputs.stac_source import QUALITY_RULES, provider_codes
from pipeline.outputs.kept import FILLED, FLAGGED, OBSERVED
from pipeline.run import run
from pipeline.stage.stac_read import read_stac_window
from pipeline.store.layout import PROVIDER_CLOUD, PROVIDER_SHADOW

ASSETS = ("B02", "B03", "B04", "B08")
BANDS = ("blue", "green", "red", "nir")
#: 2^14: the smallest power of two above the site's largest DN (bright clouds pass 10000).
MAX_DN = 16384


@pytest.fixture(scope="module")
def romania() -> dict[str, Any]:
    """Eight dates of 2019 with clouds, shadows and clear sky."""
    with np.load(SITES_DIR / "s2_nrt_romania_10m.npz") as z:
        dates = np.array([str(d)[:10] for d in z["dates"]])
        pick = np.flatnonzero(np.char.startswith(dates, "2019"))[:8]
        return {
            "values": z["values"][pick],
            "scl": z["reference_raw"][pick],
            "dates": list(dates[pick]),
            "crs": str(z["crs"]),
            "transform": tuple(float(v) for v in z["transform"]),
            "nodata": float(z["nodata"]),
        }


def _catalog(folder: Path, site: dict[str, Any]) -> Path:
    return write_stac_series(
        folder,
        values=site["values"],
        dates=site["dates"],
        bands=BANDS,
        assets=ASSETS,
        crs=site["crs"],
        transform=site["transform"],
        nodata=site["nodata"],
        scale=1e-4,
        quality=site["scl"],
        quality_name="SCL",
        name="romania",
    )


@pytest.fixture(scope="module")
def catalog(romania: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _catalog(tmp_path_factory.mktemp("stac"), romania)


def _config(out: Path, scheduler: str, **inputs: Any) -> Config:
    return parse(
        {
            "inputs": {"kind": "stac", "bands": list(BANDS), "max_dn": MAX_DN, **inputs},
            "output": {"path": str(out), "quicklooks": False},
            "tiling": {"tile_size": 32, "overlap": 8},
            "cluster": {"kind": "address", "address": scheduler},
        },
        Config,
    )


@pytest.fixture(scope="module")
def runs(
    catalog: Path, scheduler: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The catalog run blind and with its SCL as the provider's mask."""
    outs = {}
    scl = {"asset": "SCL", "rule": "scl"}
    for name, extra in (
        ("blind", {}),
        ("quality", {"quality": scl}),
        ("union", {"quality": {**scl, "combine": "union"}}),
    ):
        out = tmp_path_factory.mktemp(name)
        summary = run(_config(out, scheduler, catalog=str(catalog), **extra))
        assert summary.ok, summary
        outs[name] = out
    return outs


def test_a_static_catalog_runs_end_to_end_on_its_own_lattice(
    runs: dict[str, Path], romania: dict[str, Any]
) -> None:
    """Common names pick the assets, each date is one acquisition at its UTC time, the grid is
    the items' own (no resampling: the staged values are the COGs' DN / max_dn exactly)."""
    out = runs["blind"]
    staged = zarr.open_array(store=str(out / "work" / "input.zarr"), path="observed", mode="r")
    values = romania["values"]
    expected = values.astype(np.float32) / np.float32(MAX_DN)
    expected[np.broadcast_to((values == romania["nodata"]).any(1, keepdims=True), values.shape)] = (
        np.nan
    )
    h, w = values.shape[-2:]
    np.testing.assert_array_equal(np.asarray(staged)[..., :h, :w], expected)
    cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
    assert [str(b) for b in cube.band.values] == list(BANDS)
    assert [str(t)[:10] for t in cube.time.values] == romania["dates"]
    assert cube.sizes["y"] == h and cube.sizes["x"] == w
    assert float(cube.x[0]) == pytest.approx(romania["transform"][2] + 5.0)  # pixel centre
    assert float(cube.y[0]) == pytest.approx(romania["transform"][5] - 5.0)


def test_the_providers_mask_is_left_out_of_the_solve_filled_and_reported(
    runs: dict[str, Path], romania: dict[str, Any]
) -> None:
    """SCL cloud (8, 9, 10) and shadow (3) are seen but not observed: NaN in the staged cube,
    coded in ``seen``, cloud and shadow in the mask, filled (provenance FLAGGED) in every band
    where the date stays in its tiles' matrices; with ``combine: provider`` every pixel the
    provider calls clear keeps its observation and is clear in the mask."""
    out = runs["quality"]
    store = out / "work" / "input.zarr"
    seen = np.asarray(zarr.open_array(store=str(store), path="seen", mode="r"))
    observed = np.asarray(zarr.open_array(store=str(store), path="observed", mode="r"))
    scl = romania["scl"]
    valid = (romania["values"] != romania["nodata"]).all(1) & ~np.isin(scl, (0, 1))
    cloud = valid & np.isin(scl, (8, 9, 10))
    shadow = valid & (scl == 3) & ~cloud
    assert cloud.any() and shadow.any()
    for b in range(len(BANDS)):
        np.testing.assert_array_equal(seen[:, b] == PROVIDER_CLOUD, cloud)
        np.testing.assert_array_equal(seen[:, b] == PROVIDER_SHADOW, shadow)
        assert np.isnan(observed[:, b][cloud | shadow]).all()
    cube = xr.open_zarr(out / "cube.zarr", consolidated=False)
    mask = cube["mask"].values
    assert (mask[cloud] == CLOUD).all() and (mask[shadow] == SHADOW).all()
    provenance, clear = cube["provenance"].values, cube["clear"].values
    flagged = np.broadcast_to((cloud | shadow)[:, None], provenance.shape)
    filled = provenance == FLAGGED
    assert filled.any()
    assert (flagged[filled]).all() and np.isfinite(clear[filled]).all()
    kept = provenance == OBSERVED
    np.testing.assert_array_equal(clear[kept], observed[kept])
    # combine: provider (the default): what the provider calls clear is kept as observed.
    np.testing.assert_array_equal(kept, np.isfinite(observed))
    assert (mask[np.isfinite(observed).all(1)] == 0).all()
    # The blind run filled fewer of those pixels: its own mask missed some of the provider's.
    blind = xr.open_zarr(runs["blind"] / "cube.zarr", consolidated=False)
    assert (blind["provenance"].values[flagged] == OBSERVED).sum() > 0
    # combine: union: the provider's flags are filled too, and ours fill more (FILLED).
    union = xr.open_zarr(runs["union"] / "cube.zarr", consolidated=False)
    provenance = union["provenance"].values
    assert (provenance[flagged & np.isfinite(union["clear"].values)] == FLAGGED).all()
    assert (union["mask"].values[cloud] == CLOUD).all()
    assert ((provenance == FILLED) & ~flagged).any()


def test_the_tiles_of_one_overpass_are_one_date(romania: dict[str, Any], tmp_path: Path) -> None:
    """An ItemCollection whose first date is cut into two items (west and east halves, their own
    COGs and grids, sensed 5 s apart) gives that date once, whole, at the earlier time, as
    odc-stac fuses it; items without ``raster:bands`` take the data type from their files."""
    full = _catalog(tmp_path / "full", romania)
    items = list(pystac.read_file(str(full)).get_items(recursive=True))
    first = min(items, key=lambda i: i.datetime)
    values, t = romania["values"][0], Affine(*romania["transform"])
    halves = []
    for k, cols in enumerate((slice(0, 25), slice(25, None))):
        part = first.clone()
        part.id = f"{first.id}-{k}"
        # The east half sensed 5 s later, as the tiles of one pass are: one solar day.
        part.datetime = first.datetime + timedelta(seconds=5 * k)
        shift = t @ Affine.translation(cols.start, 0)
        for b, key in enumerate(ASSETS):
            href = tmp_path / f"half{k}_{key}.tif"
            write_cog(href, values[b][:, cols], romania["crs"], shift, romania["nodata"])
            part.assets[key].href = str(href)
        part.properties["proj:transform"] = list(shift)[:6]
        part.properties["proj:shape"] = [values.shape[1], values[0][:, cols].shape[1]]
        del part.assets["SCL"]
        halves.append(part)
    others = [i for i in items if i is not first]
    for item in [*halves, *others]:  # no raster:bands anywhere
        for asset in item.assets.values():
            asset.extra_fields.pop("raster:bands", None)
    for item in others:
        for asset in item.assets.values():
            asset.href = asset.get_absolute_href() or asset.href
    collection = pystac.ItemCollection([*halves, *others])
    path = tmp_path / "items.json"
    path.write_text(json.dumps(collection.to_dict(transform_hrefs=False)))
    inputs = _config(tmp_path / "out", "tcp://unused:1", catalog=str(path), max_dn=None).inputs
    acqs = discover_stac(inputs)
    assert len(acqs) == len(romania["dates"])
    assert len(acqs[0].stac.items) == 2  # type: ignore[union-attr]
    assert acqs[0].time == first.datetime
    assert acqs[0].max_dn == 65535 and acqs[0].nodata == 0  # uint16, nodata 0: the COGs' own
    grid = derive_grid(acqs)
    assert (grid.width, grid.height) == values.shape[:0:-1]
    frame = np.empty((len(BANDS), grid.height, grid.width), np.float32)
    read_stac_window(acqs[0], grid, Window(0, 0, grid.width, grid.height), out=frame)
    np.testing.assert_array_equal(frame, values.astype(np.float32) / np.float32(65535))


class _StacApi(BaseHTTPRequestHandler):
    """A STAC API of one landing page and ``/search`` (the items, filtered by date)."""

    items: ClassVar[list[dict[str, Any]]] = []

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        root = f"http://{self.headers['Host']}"
        self._send(
            {
                "type": "Catalog",
                "stac_version": "1.0.0",
                "id": "test-api",
                "description": "a STAC API for one test",
                "conformsTo": [
                    "https://api.stacspec.org/v1.0.0/core",
                    "https://api.stacspec.org/v1.0.0/item-search",
                ],
                "links": [
                    {"rel": "self", "href": f"{root}/"},
                    {"rel": "root", "href": f"{root}/"},
                    {
                        "rel": "search",
                        "href": f"{root}/search",
                        "type": "application/geo+json",
                        "method": "POST",
                    },
                ],
            }
        )

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        start, end = body["datetime"].split("/")
        found = [i for i in self.items if start <= i["properties"]["datetime"] <= end]
        self._send({"type": "FeatureCollection", "features": found, "links": []})

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def stac_api(catalog: Path) -> Iterator[str]:
    items = list(pystac.read_file(str(catalog)).get_items(recursive=True))
    for item in items:
        for asset in item.assets.values():
            asset.href = asset.get_absolute_href() or asset.href
    _StacApi.items = [i.to_dict(transform_hrefs=False) for i in items]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StacApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_a_stac_api_search_finds_the_dates_asked_for(
    stac_api: str, romania: dict[str, Any], tmp_path: Path
) -> None:
    """``inputs.search`` (pystac-client against a local STAC API): the dates in the window."""
    window = f"{romania['dates'][2]}T00:00:00Z/{romania['dates'][5]}T23:59:59Z"
    inputs = _config(
        tmp_path, "tcp://unused:1", search={"url": stac_api, "datetime": window}
    ).inputs
    acqs = discover_stac(inputs)
    assert [a.time.date().isoformat() for a in acqs] == romania["dates"][2:6]


def test_bad_stac_inputs_say_what_to_change(catalog: Path, tmp_path: Path) -> None:
    def inputs(**keys: Any) -> Any:
        return _config(tmp_path, "tcp://unused:1", **keys).inputs

    with pytest.raises(InputError, match=r"no asset or common name 'swir16'.*fix inputs\.bands"):
        discover_stac(inputs(catalog=str(catalog), bands=["blue", "swir16"]))
    with pytest.raises(InputError, match=r"inputs\.catalog: cannot read .*missing\.json"):
        discover_stac(inputs(catalog=str(tmp_path / "missing.json")))
    with pytest.raises(InputError, match=r"inputs\.quality\.asset"):
        discover_stac(inputs(catalog=str(catalog), quality={"asset": "QA", "rule": "scl"}))
    with pytest.raises(ConfigError, match=r"exactly one of `inputs\.catalog` and `inputs\.search`"):
        inputs()
    with pytest.raises(ConfigError, match="rule 'classes' needs"):
        discover_stac(inputs(catalog=str(catalog), quality={"asset": "SCL", "rule": "classes"}))


def test_the_quality_rules_read_the_providers_definitions() -> None:
    """SCL classes (ESA), Landsat Collection 2 QA_PIXEL bits (USGS), Fmask codes."""
    scl = np.arange(12)
    codes = provider_codes(scl, QUALITY_RULES["scl"])
    assert codes.tolist() == [255, 255, 1, PROVIDER_SHADOW, 1, 1, 1, 1, *[PROVIDER_CLOUD] * 3, 1]
    # QA_PIXEL: bit 0 fill, 1 dilated cloud, 2 cirrus, 3 cloud, 4 cloud shadow, 6 clear.
    qa = np.array([1, 1 << 6, 1 << 1, 1 << 2, 1 << 3, 1 << 4, (1 << 3) | (1 << 4)])
    codes = provider_codes(qa, QUALITY_RULES["landsat-c2"])
    assert codes.tolist() == [255, 1, *[PROVIDER_CLOUD] * 3, PROVIDER_SHADOW, PROVIDER_CLOUD]
    fmask = np.array([0, 1, 2, 3, 4, 255])
    codes = provider_codes(fmask, QUALITY_RULES["fmask"])
    assert codes.tolist() == [1, 1, PROVIDER_SHADOW, 1, PROVIDER_CLOUD, 255]
    assert provider_codes(np.array([np.nan]), QUALITY_RULES["fmask"]).tolist() == [255]


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({"bands": ["blue", "swir16"]}, "no asset or common name 'swir16'"),
        ({"catalog": "missing.json"}, "inputs.catalog: cannot read"),
        ({"max_dn": 1000}, "exceeds max_dn 1000"),
    ],
    ids=["stac-band-missing", "stac-catalog-unreadable", "stac-dn-above-max"],
)
def test_bad_stac_input_is_one_line_exit_2_nothing_published(
    keys: dict[str, Any],
    expected: str,
    catalog: Path,
    scheduler: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The rows of docs/BAD_INPUT.md for STAC inputs, through the CLI."""
    from pipeline.cli import main
    from tests.pipeline.runs import published, write_config

    out = tmp_path / "out"
    inputs = {"kind": "stac", "catalog": str(catalog), "bands": list(BANDS), "max_dn": MAX_DN}
    inputs.update(keys)
    if keys.get("catalog"):
        inputs["catalog"] = str(tmp_path / keys["catalog"])
    data = {
        "inputs": inputs,
        "output": {"path": str(out)},
        "tiling": {"tile_size": 32, "overlap": 8},
        "cluster": {"kind": "address", "address": scheduler},
    }
    code = main(["-q", "run", str(write_config(tmp_path / "c.yaml", data))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and expected in err, err
    assert published(out) == []


def test_a_stac_runs_items_are_valid_and_link_their_sources(
    runs: dict[str, Path], catalog: Path, offline: None
) -> None:
    """The run's own STAC Items (#46 item 4) validate offline, name the provider's mask used
    and link the input Items they are derived from."""
    from tests.pipeline.stac_checks import stac_validate

    path = runs["quality"] / "stac" / "catalog.json"
    messages = stac_validate(path)
    assert all(m["valid_stac"] for m in messages), messages
    sources = {
        str(i.get_self_href()) for i in pystac.read_file(str(catalog)).get_items(recursive=True)
    }
    items = list(pystac.Catalog.from_file(str(path)).get_items())
    assert len(items) == len(sources)
    derived = set()
    for item in items:
        assert item.properties["cloudremoval:quality"]["rule"] == "scl"
        links = [ln for ln in item.links if ln.rel == "derived_from"]
        assert len(links) == 1
        derived.add(links[0].get_absolute_href())
    assert derived == sources


def test_an_item_in_another_crs_is_gridded_as_a_geotiff_would_be(
    romania: dict[str, Any], tmp_path: Path
) -> None:
    """A date delivered in UTM 35N among dates in EPSG:3035: the grid is the one the same two
    dates as GeoTIFFs get (:func:`derive_grid`: no shared lattice, so 10 m multiples in the
    first date's CRS), and odc-stac's warp of each date agrees with the GeoTIFF path's."""
    from rasterio.warp import Resampling, calculate_default_transform, reproject

    from pipeline.inputs.geotiff import discover_geotiffs
    from pipeline.stage.warp import read_window

    full = _catalog(tmp_path / "full", romania)
    items = sorted(pystac.read_file(str(full)).get_items(recursive=True), key=lambda i: i.datetime)
    items = items[:2]
    src_t, crs = Affine(*romania["transform"]), romania["crs"]
    values = romania["values"][:2]
    h, w = values.shape[-2:]
    bounds = (src_t.c, src_t.f + h * src_t.e, src_t.c + w * src_t.a, src_t.f)
    dst_t, dw, dh = calculate_default_transform(crs, "EPSG:32635", w, h, *bounds)
    moved = np.zeros((len(ASSETS), dh, dw), np.uint16)
    for b in range(len(ASSETS)):
        reproject(
            values[1, b],
            moved[b],
            src_transform=src_t,
            src_crs=crs,
            dst_transform=dst_t,
            dst_crs="EPSG:32635",
            src_nodata=0,
            dst_nodata=0,
            resampling=Resampling.nearest,
        )
        href = tmp_path / f"utm_{ASSETS[b]}.tif"
        write_cog(href, moved[b], "EPSG:32635", dst_t, 0)
        items[1].assets[ASSETS[b]].href = str(href)
    items[1].properties["proj:code"] = "EPSG:32635"
    items[1].properties["proj:transform"] = list(dst_t)[:6]
    items[1].properties["proj:shape"] = [dh, dw]
    for item in items:
        for asset in item.assets.values():
            asset.href = asset.get_absolute_href() or asset.href
    path = tmp_path / "items.json"
    path.write_text(json.dumps(pystac.ItemCollection(items).to_dict(transform_hrefs=False)))
    acqs = discover_stac(_config(tmp_path / "out", "tcp://unused:1", catalog=str(path)).inputs)
    tifs = []
    for k, (data, t, c) in enumerate(((values[0], src_t, crs), (moved, dst_t, "EPSG:32635"))):
        tif = tmp_path / f"scene_{romania['dates'][k].replace('-', '')}.tif"
        profile = {"driver": "GTiff", "count": data.shape[0], "dtype": "uint16", "nodata": 0}
        profile.update(width=data.shape[2], height=data.shape[1], crs=c, transform=t)
        with rasterio.open(tif, "w", **profile) as dst:
            dst.write(data)
        tifs.append(tif)
    as_geotiffs = discover_geotiffs(tifs, max_dn=MAX_DN)
    grid = derive_grid(acqs)
    assert grid == derive_grid(as_geotiffs)
    assert grid.crs == crs and not grid.transform.almost_equals(src_t)  # 10 m multiples
    window = Window(0, 0, grid.width, grid.height)
    for stac_acq, tif_acq in zip(acqs, as_geotiffs, strict=True):
        ours = np.empty((len(BANDS), grid.height, grid.width), np.float32)
        read_stac_window(stac_acq, grid, window, out=ours)
        theirs = read_window(tif_acq, grid, window)
        both = np.isfinite(ours) & np.isfinite(theirs)
        # Where data is: the same pixels but for the footprint's rim.
        assert both.sum() > 0.95 * max(np.isfinite(ours).sum(), np.isfinite(theirs).sum())
        # Two implementations of GDAL's bilinear warp: equal to well under a DN step of 16384.
        assert np.abs(ours - theirs)[both].max() < 0.02
        assert np.median(np.abs(ours - theirs)[both]) < 1e-4
