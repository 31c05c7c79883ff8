"""DN scaling: how each date's digital numbers become reflectance-like values in [0, 1].

The solver's model (D = C + (1 − C)∘L, C ≤ 1) needs clouds near 1: every date is divided by a
maximum DN, the sensor's (default), an explicit ``inputs.max_dn``, or the reference code's
``2^⌈log₂ max⌉`` rule (``inputs.dn_rule: pow2``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import rasterio

from pipeline.errors import ConfigError, InputError
from pipeline.inputs.acquisition import Acquisition

__all__ = ["SENSOR_MAX_DN", "check_dn_args", "scaled_series"]

#: Maximum DN per GF-4 sensor: PMS files are uint16 but about 12-bit effective.
SENSOR_MAX_DN = {"PMS": 4095.0, "IRS": 65535.0}


def check_dn_args(max_dn: float | None, dn_rule: str) -> None:
    if max_dn is not None and not (math.isfinite(max_dn) and max_dn > 0):
        raise ConfigError(
            f"inputs.max_dn: {max_dn} is not a positive number; set it to the "
            "sensor's maximum DN (e.g. 4095) or drop it"
        )
    if dn_rule not in ("sensor", "pow2"):
        raise ConfigError(f"inputs.dn_rule: {dn_rule!r} is not one of 'sensor', 'pow2'")


def _observed_max(path: Path, nodata: float | None) -> float:
    """Largest valid DN of a file, read in row strips to bound memory on 10240² images."""
    best = -math.inf
    with rasterio.open(path) as src:
        rows = max(1, (64 * 2**20) // max(1, src.width * src.count * 8))
        for row in range(0, src.height, rows):
            win = rasterio.windows.Window(0, row, src.width, min(rows, src.height - row))
            data = src.read(window=win)
            valid = np.isfinite(data) if data.dtype.kind == "f" else np.ones(data.shape, bool)
            if nodata is not None:
                valid &= data != nodata
            if valid.any():
                best = max(best, float(data[valid].max()))
    return best


def _pow2_max_dn(acqs: list[Acquisition]) -> float:
    """2**ceil(log2(observed max)) over the whole series, so every date shares one scale."""
    observed = max(_observed_max(a.path, a.nodata) for a in acqs)
    if not math.isfinite(observed) or observed <= 0:
        raise InputError(
            f"{acqs[0].path.name}: no positive valid DN in the series, cannot apply "
            "dn_rule 'pow2'; set inputs.max_dn explicitly"
        )
    return float(2 ** math.ceil(math.log2(observed)))


def scaled_series(acqs: list[Acquisition], max_dn: float | None, dn_rule: str) -> list[Acquisition]:
    """The series in time order, with ``max_dn`` (or the pow2 rule) replacing each sensor's DN
    scale when given."""
    if max_dn is not None:
        acqs = [replace(a, max_dn=float(max_dn)) for a in acqs]
    elif dn_rule == "pow2" and acqs:
        pow2 = _pow2_max_dn(acqs)
        acqs = [replace(a, max_dn=pow2) for a in acqs]
    return sorted(acqs, key=lambda a: (a.time, a.id))
