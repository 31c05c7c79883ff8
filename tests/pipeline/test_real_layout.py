"""GF-4 products as CRESDA delivers them, end to end (issue #13).

The fixtures follow real product metadata (PMS and IRS XML and RPB of 2021, 2022 and 2025
products; docs/CONVENTIONS.md §7): PMI archives holding both sensors, ``SensorID`` PMI,
Beijing-time stamps, 10 valid bits in 16, integration times in milliseconds, elevations under
the ``…Zenith`` tags, RPB headers ``satId = "XXX"`` with a height offset and real denominators.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import rioxarray  # noqa: F401
import xarray as xr
import yaml
from skimage.registration import phase_cross_correlation

from pipeline.cli import main
from pipeline.ids import time_label
from pipeline.inputs.synthetic import SimulatedProducts, make_gf4_series
from tests.pipeline.truth import truth_on

N_DATES = 5


@pytest.fixture(scope="module")
def morning(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """Five PMI archives of one morning, cloud-free (for geolocation), the first at 07:12
    Beijing time: on the previous UTC day."""
    return make_gf4_series(
        tmp_path_factory.mktemp("morning"),
        n_dates=N_DATES,
        size=160,
        seed=13,
        archive=True,
        cloud_style="none",
        step=timedelta(minutes=20),
    )


@pytest.fixture(scope="module")
def morning_run(
    morning: SimulatedProducts, scheduler: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("morning_run")
    config = out / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "inputs": {"kind": "gf4", "paths": [str(p) for p in morning.paths]},
                "output": {"path": str(out / "result")},
                "tiling": {"tile_size": 96, "overlap": 16},
                "cluster": {"kind": "address", "address": scheduler, "dashboard": False},
            }
        )
    )
    return out / "result", main(["-q", "run", str(config)])


def test_five_acquisitions_of_one_morning_all_come_out(
    morning: SimulatedProducts, morning_run: tuple[Path, int]
) -> None:
    out, code = morning_run
    assert code == 0
    # All within one morning, two UTC days: keyed by day, outputs would overwrite each other.
    assert morning.times[-1] - morning.times[0] < timedelta(hours=3)
    assert len({t.date() for t in morning.times}) == 2
    labels = [time_label(t) for t in morning.times]
    assert len(set(labels)) == N_DATES
    cogs = sorted(p.name for p in (out / "cog").glob("*.tif"))
    names = [f"{label}_{band}.tif" for label in labels for band in ("B1", "B2", "B3", "B4", "B5")]
    assert cogs == sorted(names + [f"{label}_mask.tif" for label in labels])
    looks = sorted(p.name for p in (out / "quicklooks").glob("*.png"))
    assert looks == sorted(f"{label}.png" for label in labels)


def test_cube_times_are_utc(morning: SimulatedProducts, morning_run: tuple[Path, int]) -> None:
    cube = xr.open_zarr(morning_run[0] / "cube.zarr", consolidated=False)
    expected = [t.astimezone(UTC).replace(tzinfo=None) for t in morning.times]
    assert [t.astype("datetime64[s]").item() for t in cube.time.values] == expected
    # The first acquisition, 07:12 Beijing time on 1 June, is 31 May in UTC.
    assert expected[0].date() == datetime(2020, 5, 31).date()


def test_ground_in_place_and_scaled_by_valid_bits(
    morning: SimulatedProducts, morning_run: tuple[Path, int]
) -> None:
    observed = xr.open_zarr(morning_run[0] / "work" / "input.zarr", consolidated=False).observed
    cube = xr.open_zarr(morning_run[0] / "cube.zarr", consolidated=False)
    truth = truth_on(morning.truth_path, cube.rio.transform(), cube.rio.crs, observed.shape[2:])
    truth = truth[2]  # B3
    for k in range(N_DATES):
        date = observed.isel(time=k).sel(band="B3").values
        both = np.isfinite(date) & np.isfinite(truth)
        assert both.mean() > 0.6  # frames are rotated: the grid is their union
        # Cloud-free frames: DN / (2^10 − 1) gives back the ground; a 12-bit scale would
        # give a quarter of it.
        ratio = float(np.median(date[both] / truth[both]))
        assert abs(ratio - 1.0) < 0.02, (k, ratio)
        mean = float(truth[both].mean())
        shift, _, _ = phase_cross_correlation(
            np.where(both, truth, mean), np.where(both, date, mean), upsample_factor=20
        )
        assert np.hypot(*shift) < 0.5, (k, shift)
