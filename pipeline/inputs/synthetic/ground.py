"""The simulated cloud-free ground (the *truth*), the clouds over it, and the DN of both.

The truth is the bundled tyrol-w1 RGB image made into five GF-4 PMS-like bands
(:func:`truth_bands`). Clouds come from :func:`cloudcore.simulate.cloud_series` and are mixed as
``I_t = C_t + (1 - C_t)·I`` (docs/CONVENTIONS.md §4); DN = round(I_t · max DN) (:func:`to_dn`).
"""

from __future__ import annotations

import importlib.resources
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine
from rasterio.errors import NotGeoreferencedWarning
from skimage.transform import resize

from pipeline.errors import ConfigError

__all__ = [
    "DATA_DIR",
    "DEMO_IMAGE",
    "PMS_BANDS",
    "SimulatedProducts",
    "cloud_fields",
    "load_demo_truth",
    "to_dn",
    "truth_bands",
    "write_truth",
]

#: The package's bundled data: the demo's cloud-free image (the lab's ``bundled:`` images too).
DATA_DIR = Path(str(importlib.resources.files("pipeline"))) / "data"
DEMO_IMAGE = "tyrol-w1_1k_rgb.tif"

# MATLAB rgb2gray weights (docs/CONVENTIONS.md §4).
_GREY = np.array([0.2989, 0.5870, 0.1140])
#: The names of the five simulated bands: B1 pan, B2 blue, B3 green, B4 red, B5 NIR.
PMS_BANDS = ("B1", "B2", "B3", "B4", "B5")


@dataclass(frozen=True)
class SimulatedProducts:
    """What a simulation wrote.

    Attributes
    ----------
    paths
        Product directories, or ``.tar.gz`` archives when ``archive=True`` (GF-4); GeoTIFF files
        (GeoTIFF series). In time order.
    truth_path
        Georeferenced float32 GeoTIFF, 5 bands (B1 pan, B2 blue, B3 green, B4 red, B5 NIR) in
        [0, 1]: the cloud-free ground.
    times
        Acquisition time of each path.
    """

    paths: list[Path]
    truth_path: Path
    times: list[datetime]


def load_demo_truth() -> np.ndarray:
    """The bundled cloud-free demo image.

    Returns
    -------
    numpy.ndarray
        ``tyrol-w1_1k_rgb.tif``: uint8 of shape (1000, 1000, 3), channel-last RGB.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(DATA_DIR / DEMO_IMAGE) as src:
            return np.moveaxis(src.read(), 0, -1)


def truth_bands(rgb: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """Five GF-4 PMS-like bands in [0, 1] from an RGB image, resized.

    B1 (pan) is MATLAB's rgb2gray of the RGB; B2, B3, B4 are blue, green, red. B5 (NIR) is a
    synthetic mix ``clip(0.1 + 0.8·G + 1.5·max(G − R, 0) − 0.2·B, 0, 1)``: vegetation (green
    above red) comes out bright as in a real near-infrared band, water and shadow dark.

    Parameters
    ----------
    rgb
        (h, w, 3) uint8 (scaled by 255) or float in [0, 1].
    size
        Output size, square or (height, width).

    Returns
    -------
    numpy.ndarray
        float32 of shape (5, height, width).
    """
    shape = (size, size) if isinstance(size, int) else tuple(size)
    img = np.asarray(rgb, dtype=np.float64)
    if np.issubdtype(np.asarray(rgb).dtype, np.integer):
        img = img / 255.0
    if img.ndim != 3 or img.shape[2] < 3:
        raise ConfigError(f"truth_rgb: expected an (h, w, 3) RGB array, got shape {img.shape}")
    img = resize(img[..., :3], shape, order=1, anti_aliasing=True, preserve_range=True)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    pan = img @ _GREY
    nir = np.clip(0.1 + 0.8 * g + 1.5 * np.maximum(g - r, 0.0) - 0.2 * b, 0.0, 1.0)
    return np.clip(np.stack([pan, b, g, r, nir]), 0.0, 1.0).astype(np.float32)


def cloud_fields(
    shape: tuple[int, int], n: int, style: str, rng: np.random.Generator
) -> np.ndarray:
    """Cloud thickness of ``n`` dates, clipped to [0, 1].

    Parameters
    ----------
    shape
        (height, width) of each field.
    n
        Number of dates.
    style
        ``"reference"``, ``"perlin"`` or ``"moving"`` (:func:`cloudcore.simulate.cloud_series`),
        or ``"none"`` for no cloud at all.
    rng
        Draws the fields (nothing is drawn for ``"none"``).

    Returns
    -------
    numpy.ndarray
        float64 of shape (n, height, width).

    Raises
    ------
    ConfigError
        An unknown ``style``.
    """
    if style == "none":
        return np.zeros((n, *shape), dtype=np.float64)
    if style not in ("reference", "perlin", "moving"):
        raise ConfigError(
            f"cloud_style: {style!r} is not one of 'reference', 'perlin', 'moving', 'none'"
        )
    from cloudcore.simulate import cloud_series

    fields = cloud_series(shape, n, style=style, rng=rng)  # type: ignore[arg-type]
    return np.clip(np.asarray(fields, dtype=np.float64), 0.0, 1.0)


def write_truth(path: Path, bands: np.ndarray, transform: Affine, crs: str) -> None:
    """Write the truth as a deflated float32 GeoTIFF of the five named bands.

    Parameters
    ----------
    path
        The file to write.
    bands
        (5, height, width) values in [0, 1] (:func:`truth_bands`).
    transform, crs
        Its georeferencing.
    """
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=bands.shape[2],
        height=bands.shape[1],
        count=5,
        dtype="float32",
        crs=crs,
        transform=transform,
        compress="deflate",
    ) as dst:
        dst.write(bands.astype(np.float32))
        dst.descriptions = PMS_BANDS


def to_dn(obs: np.ndarray, max_dn: int) -> np.ndarray:
    """DN = round(``obs`` · ``max_dn``) as uint16, NaN (no ground) as the fill value 0.

    Parameters
    ----------
    obs
        Observed values in [0, 1] (ground under clouds), NaN where there is no ground.
    max_dn
        The DN of 1.0.

    Returns
    -------
    numpy.ndarray
        uint16 of ``obs``' shape; every valid pixel is at least 1.
    """
    # DN 0 is the L1A fill value: keep every valid pixel at 1 or above, NaN (no ground) at 0.
    dn = np.clip(np.round(np.nan_to_num(obs, nan=0.0) * max_dn), 1, max_dn)
    return np.where(np.isfinite(obs), dn, 0).astype(np.uint16)
