"""Shared inputs for the cloudcore tests: golden files and small paper-style cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cloudcore.simulate import SimulatedSeries, paper_case

SHARED = Path(__file__).resolve().parents[3] / "shared"
GOLDEN = sorted((SHARED / "golden").glob("*.npz"))
BUNDLED_RGB = Path(__file__).resolve().parents[2] / "pipeline" / "data" / "tyrol-w1_1k_rgb.tif"

REFERENCE_METHOD = {
    "rpca4atm": "aatm",
    "inexact_alm_rpca": "rpca",
    "inexact_alm_r1pca_YG": "nnrpca",
}


@pytest.fixture(scope="session")
def tyrol_rgb() -> np.ndarray:
    """The paper's test image (bundled copy, RGB channel-last uint8)."""
    import warnings

    import rasterio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(BUNDLED_RGB) as src:
            return np.moveaxis(src.read(), 0, -1)


@pytest.fixture(scope="session")
def case_64x7(tyrol_rgb: np.ndarray) -> SimulatedSeries:
    return paper_case(tyrol_rgb, 7, size=64, rng=np.random.default_rng(7))


@pytest.fixture(scope="session")
def case_128x15(tyrol_rgb: np.ndarray) -> SimulatedSeries:
    return paper_case(tyrol_rgb, 15, size=128, rng=np.random.default_rng(2))
