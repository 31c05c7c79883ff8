"""Shared inputs and helpers for the cloudcore tests: data files, small paper-style cases, RNGs.

The data files live in ``tests/data`` (provenance and checksums in ``tests/data/SOURCES.md``), so
every test runs in a fresh clone; none is skipped for want of a file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from cloudcore.simulate import SimulatedSeries, paper_case

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = sorted((DATA / "golden").glob("*.npz"))
TYROL = DATA / "tyrol-w1_1k.tif"
BUNDLED_RGB = Path(__file__).resolve().parents[2] / "pipeline" / "data" / "tyrol-w1_1k_rgb.tif"

REFERENCE_METHOD = {
    "rpca4atm": "aatm",
    "inexact_alm_rpca": "rpca",
    "inexact_alm_r1pca_YG": "nnrpca",
}

# An odd, non-square frame shape catches transposed and off-by-one layouts.
ODD = (37, 53)
FAST = settings(max_examples=25, deadline=None, derandomize=True)


def rng(seed: int = 0) -> np.random.Generator:
    """A fresh generator, so that every test states its own seed."""
    return np.random.default_rng(seed)


def neighbour_corr(a: np.ndarray) -> float:
    """The smaller of the lag-1 correlations along rows and along columns."""
    across = np.corrcoef(a[:, :-1].ravel(), a[:, 1:].ravel())[0, 1]
    down = np.corrcoef(a[:-1].ravel(), a[1:].ravel())[0, 1]
    return float(min(across, down))


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
    """The paper's set-up at 64 × 64 with 7 dates (reference clouds)."""
    return paper_case(tyrol_rgb, 7, size=64, rng=np.random.default_rng(7))


@pytest.fixture(scope="session")
def case_128x15(tyrol_rgb: np.ndarray) -> SimulatedSeries:
    """The paper's set-up at 128 × 128 with 15 dates (reference clouds)."""
    return paper_case(tyrol_rgb, 15, size=128, rng=np.random.default_rng(2))
