"""The stored form of the clear ground in the uint16 COGs, and how the COGs are made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import Affine

from pipeline.outputs import products
from pipeline.outputs.products import encode_clear, write_cog_files


def test_uint16_is_rounded_dn_with_zero_kept_for_nodata() -> None:
    clear = np.array(
        [[np.nan, np.inf, -np.inf, -0.5, 0.0, 0.0004, 0.25, 0.75, 0.5, 1.0, 1.7]], np.float32
    )
    # max_dn 2: 0.25 → 0.5 and 0.75 → 1.5 round half to even (0 → 1, since 0 is no data; 2).
    dn = encode_clear(clear, "uint16", 2.0)
    assert dn.dtype == np.uint16
    assert dn.tolist() == [[0, 0, 0, 1, 1, 1, 1, 2, 1, 2, 2]]
    # The same rule at GF-4's 10 bits, against the formula.
    values = np.random.default_rng(0).uniform(-0.1, 1.1, (3, 64, 64)).astype(np.float32)
    expected = np.clip(np.rint(np.clip(values, 0, 1) * np.float32(1023)), 1, 1023)
    assert np.array_equal(encode_clear(values, "uint16", 1023.0), expected.astype(np.uint16))
    assert np.array_equal(encode_clear(values, "float32", 1023.0), values)  # stored as it is


@pytest.mark.parametrize(("dtype", "overviews"), [("uint16", "AVERAGE"), ("uint8", "MODE")])
def test_cog_config_changes_time_not_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, overviews: str
) -> None:
    """GDAL's faster setting for the COG driver's temporary overviews writes the same file, byte
    for byte, as GDAL's defaults: odd sizes (fractional overview windows), no data, 3 levels."""
    rng = np.random.default_rng(3)
    height, width = 2877, 2892  # the benchmark 2560² series grid
    smooth = np.cumsum(rng.normal(size=(height, width)), axis=1)
    values = (smooth - smooth.min()) / np.ptp(smooth) * (1000 if dtype == "uint16" else 3)
    image = np.rint(values).astype(dtype)
    image[:200, :300] = 0 if dtype == "uint16" else 255  # no data
    profile = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": 1,
        "dtype": dtype,
        "crs": "EPSG:32650",
        "transform": Affine(50.0, 0.0, 376400.0, 0.0, -50.0, 4489150.0),
        "nodata": 0 if dtype == "uint16" else 255,
        "tiled": True,
        "blockxsize": 256,
        "blockysize": 256,
    }

    def cog(name: str) -> bytes:
        dst = tmp_path / f"{name}.tif"
        write_cog_files(
            lambda rows, cols: image[None, rows, cols],
            lambda frame: frame,
            [tmp_path / f"{name}.scratch.tif"],
            [tmp_path / f"{name}.partial.tif"],
            [dst],
            profile,
            512,
            overviews,
        )
        with rasterio.open(dst) as written:
            assert len(written.overviews(1)) == 3
            assert np.array_equal(written.read(1), image)
        return dst.read_bytes()

    assert products.COG_GDAL_CONFIG  # the setting under test is in use
    ours = cog("ours")
    monkeypatch.setattr(products, "COG_GDAL_CONFIG", {})
    assert cog("gdal-defaults") == ours


_COG_UNDER_A_LIMIT = """
import resource, sys
import numpy as np
from pathlib import Path
from affine import Affine
from pipeline.grid.target import TargetGrid
from pipeline.outputs.products import scratch_profile, write_cogs_safely
from pipeline.store.durable import OutputError

out = Path(sys.argv[1])
grid = TargetGrid("EPSG:32650", Affine(50, 0, 0, 0, -50, 0), 1500, 1500)
rng = np.random.default_rng(0)
def read(rows, cols):
    return rng.integers(1, 60000, (2, rows.stop - rows.start, cols.stop - cols.start), np.uint16)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
try:
    write_cogs_safely([out / "a.tif", out / "b.tif"], scratch_profile(grid, "uint16", 0), read,
                      lambda frame: frame, 512, "AVERAGE", None)
except OutputError as exc:
    print("OutputError:", exc)
"""


@pytest.mark.parametrize("limit", [4_600_000, 4_700_000])
def test_cogs_cut_short_by_the_disk_are_the_users_one_line_error(
    tmp_path: Path, limit: int
) -> None:
    """A disk that fills while the COGs are written (here the process's file size limit, just
    under a band's 4.7 MB scratch GeoTIFF) gives the storage error, not GDAL's "IReadBlock
    failed" from reading back a scratch file cut short (a rasterio error class, not an
    OSError), and leaves no file behind."""
    import subprocess
    import sys

    out = tmp_path / "cog"
    out.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _COG_UNDER_A_LIMIT, str(out), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OutputError: output.path: cannot write "), proc.stdout
    assert "file size limit exceeded" in proc.stdout
    assert list(out.iterdir()) == []


def test_the_next_block_s_chunks_are_asked_for_before_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A band's COGs read the cube block by block; each block's chunk files were asked for
    while the block before it was encoded, the first at the start. The COGs hold the values."""
    from datetime import datetime

    import zarr

    from pipeline.grid.target import TargetGrid
    from pipeline.grid.tiling import TileGrid
    from pipeline.store.cube import chunk_files, create_store
    from tests.pipeline.reads import reads_asked_before, record_reads

    tiles = TileGrid(70, 150, 32, 8)  # 3 × 5 blocks, the last ones narrow
    grid = TargetGrid("EPSG:32650", Affine(50, 0, 440_000, 0, -50, 4_420_000), 150, 70)
    cube = tmp_path / "cube.zarr"
    times = [datetime(2020, 6, d + 1) for d in range(2)]
    create_store(
        cube, grid, times=times, bands=["B1", "B2"], variables=["clear"],
        tile_size=32, chunk_rows=tiles.cube_chunk_rows, attrs={},
    )  # fmt: skip
    clear = np.random.default_rng(1).uniform(0.01, 1, (2, 2, 70, 150)).astype(np.float32)
    zarr.open_array(store=str(cube), path="clear", mode="r+")[...] = clear
    events = record_reads(monkeypatch, "pipeline.outputs.products")
    dsts = [tmp_path / f"t{t}.tif" for t in range(2)]
    products.write_cogs(
        cube, dsts, band_index=1, grid=grid, dtype="uint16", max_dn=1023.0, block=32
    )

    band = chunk_files(cube, ["clear"], range(99), range(99), band=1)
    count, unasked = reads_asked_before(events, set(band))
    assert count == len(band) > 15 and not unasked
    for t, dst in enumerate(dsts):
        with rasterio.open(dst) as cog:
            assert np.array_equal(cog.read(1), encode_clear(clear[t, 1], "uint16", 1023.0))


def test_a_band_s_cogs_write_its_provenance_and_quicklook_samples(tmp_path: Path) -> None:
    """Without ``mask.keep_clear`` the band's COG task writes the band's provenance from the
    clear values it reads (filled, or no data where NaN), durably, and keeps their quicklook
    samples; it touches no other band."""
    from datetime import datetime

    import zarr

    from cloudcore.masks import NODATA
    from pipeline.grid.target import TargetGrid
    from pipeline.grid.tiling import TileGrid
    from pipeline.outputs.kept import FILLED
    from pipeline.store.cube import chunk_files, create_store
    from pipeline.store.layout import PROVENANCE
    from pipeline.store.previews import PreviewSpec

    tiles = TileGrid(70, 150, 32, 8)  # 3 × 5 cores, the last ones narrow
    grid = TargetGrid("EPSG:32650", Affine(50, 0, 440_000, 0, -50, 4_420_000), 150, 70)
    cube = tmp_path / "cube.zarr"
    times = [datetime(2020, 6, d + 1) for d in range(2)]
    create_store(
        cube, grid, times=times, bands=["B1", "B2"], variables=["clear"], codes=[PROVENANCE],
        tile_size=32, chunk_rows=tiles.cube_chunk_rows, attrs={},
    )  # fmt: skip
    clear = np.random.default_rng(2).uniform(0.01, 1, (2, 2, 70, 150)).astype(np.float32)
    clear[0, 1, :5, :40] = np.nan  # across a core border
    clear[1, 1, 64:, 96:] = np.nan  # a whole corner core
    zarr.open_array(store=str(cube), path="clear", mode="r+")[...] = clear
    spec = PreviewSpec((1,), 7, str(tmp_path / "previews"))
    dsts = [tmp_path / f"t{t}.tif" for t in range(2)]
    products.write_cogs(
        cube, dsts, band_index=1, grid=grid, dtype="uint16", max_dn=1023.0, block=32,
        tiles=tiles, provenance=True, preview=spec,
    )  # fmt: skip

    provenance = np.asarray(zarr.open_array(store=str(cube), path=PROVENANCE)[:, 1])
    expected = np.where(np.isfinite(clear[:, 1]), FILLED, NODATA).astype(np.uint8)
    assert np.array_equal(provenance, expected)
    assert set(np.unique(provenance)) == {FILLED, NODATA}
    assert chunk_files(cube, [PROVENANCE], range(99), range(99), band=0) == []
    every = slice(None, None, spec.step)
    for tile in tiles:
        kept = np.load(spec.path(tile, "clear", 1))
        rows, cols = spec.offsets(tile.core, tile.core)
        core = clear[:, 1, *tile.core.slices]
        assert np.array_equal(kept, core[:, rows, cols], equal_nan=True)
    assert not list((tmp_path / "previews").glob("*-b0.npy"))
    assert np.array_equal(
        np.concatenate([np.load(spec.path(t, "clear", 1)) for t in tiles if t.row == 0], axis=2),
        clear[:, 1, every, every][:, : -(-32 // 7)],
        equal_nan=True,
    )
