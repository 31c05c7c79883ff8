"""The RPC model of simulated GF-4 frames: ground to image, image to ground, and its ``.rpb``.

Each simulated date is a separately pointed frame: an RPC00B model with a shift of a few
pixels, a little quadratic distortion and terrain parallax, written as the ``.rpb`` sidecar
that GDAL reads. As in real GF-4 PMS sidecars (checked on 2022 and 2025 products): the header
says ``satId = "XXX"; bandId = "XXX"; SpecId = "XXX";``, ``errBias = 1.0``, ``errRand = 0.0``,
the height offset is non-zero (the scene's mean height, ~74–100 m) with a scale of a few
thousand metres, and the denominators are not 1 (first-order terms of a few 1e-3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.geom import METRES_PER_DEGREE

__all__ = ["SyntheticRpc", "make_rpc"]

# Terrain parallax of the simulated view: image lines per 1000 m of height. GF-4 sees northern
# China obliquely from 105.6° E over the equator, so relief displaces pixels by tens of metres.
_PARALLAX_PX_PER_KM = 4.0
#: Height normalisation of the simulated RPCs, as in real PMS sidecars (offset 100.36 m and
#: scale 2943.6 m in a 2022 product; IRS writes 0 and 5000).
_HEIGHT_OFFSET = {"PMS": 100.359193857434, "IRS": 0.0}
_HEIGHT_SCALE = {"PMS": 2943.640806142566, "IRS": 5000.0}
#: First-order denominator terms (L, P) of the line and sample polynomials, the size of real
#: PMS values (-2.6e-3, -3.7e-3 on lines of a 2022 product).
_DEN_LINE = (-2.5686e-3, -3.7201e-3)
_DEN_SAMP = (1.9e-3, -2.2e-3)


def _rpc_terms(lon_n: np.ndarray, lat_n: np.ndarray, h_n: np.ndarray) -> list[np.ndarray]:
    """The 20 RPC00B polynomial terms, in the order of the coefficient lists."""
    L, P, H = lon_n, lat_n, h_n
    one = np.ones_like(L)
    return [
        one,
        L,
        P,
        H,
        L * P,
        L * H,
        P * H,
        L * L,
        P * P,
        H * H,
        P * L * H,
        L**3,
        L * P * P,
        L * H * H,
        L * L * P,
        P**3,
        P * H * H,
        L * L * H,
        P * P * H,
        H**3,
    ]


@dataclass(frozen=True)
class SyntheticRpc:
    """A simulated RPC00B: rational polynomials ground → image."""

    lon_off: float
    lat_off: float
    lon_scale: float
    lat_scale: float
    line_off: float
    samp_off: float
    line_scale: float
    samp_scale: float
    line_num: tuple[float, ...]
    samp_num: tuple[float, ...]
    line_den: tuple[float, ...]
    samp_den: tuple[float, ...]
    height_off: float
    height_scale: float

    def image(self, lon: np.ndarray, lat: np.ndarray, h: np.ndarray | float = 0.0):
        """Ground → (row, col) in pixel-centre coordinates (RPC convention)."""
        L = (np.asarray(lon) - self.lon_off) / self.lon_scale
        P = (np.asarray(lat) - self.lat_off) / self.lat_scale
        H = np.broadcast_to((np.asarray(h, float) - self.height_off) / self.height_scale, L.shape)
        terms = _rpc_terms(L, P, H)

        def poly(coefs: Sequence[float]) -> np.ndarray:
            return sum(c * t for c, t in zip(coefs, terms, strict=True))  # type: ignore[return-value]

        line = poly(self.line_num) / poly(self.line_den)
        samp = poly(self.samp_num) / poly(self.samp_den)
        return self.line_off + self.line_scale * line, self.samp_off + self.samp_scale * samp

    def ground(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Image → ground at height 0, by Newton iterations on the forward polynomial."""
        rows, cols = np.asarray(rows, float), np.asarray(cols, float)
        # Start from the linear part, then refine; the model is nearly affine so a few steps
        # reach machine precision.
        lon = np.full(rows.shape, self.lon_off)
        lat = np.full(rows.shape, self.lat_off)
        d = 1e-7
        for _ in range(8):
            r0, c0 = self.image(lon, lat)
            rl, cl = self.image(lon + d * self.lon_scale, lat)
            rp, cp = self.image(lon, lat + d * self.lat_scale)
            a, b = (rl - r0) / d, (rp - r0) / d  # d row / d(L, P)
            c, e = (cl - c0) / d, (cp - c0) / d  # d col / d(L, P)
            fr, fc = rows - r0, cols - c0
            det = a * e - b * c
            dL = (e * fr - b * fc) / det
            dP = (a * fc - c * fr) / det
            lon = lon + dL * self.lon_scale
            lat = lat + dP * self.lat_scale
            if max(np.abs(dL).max(initial=0.0), np.abs(dP).max(initial=0.0)) < 1e-13:
                break
        return lon, lat

    def rpb_text(self) -> str:
        """RPC00B sidecar text laid out as CRESDA writes GF-4 ``.rpb`` files."""

        def coefs(values: Sequence[float]) -> str:
            body = ",\n".join(f"\t\t\t{v:+.15E}" for v in values)
            return f"(\n{body});"

        return (
            'satId = "XXX";\nbandId = "XXX";\nSpecId = "XXX";\n'
            "BEGIN_GROUP = IMAGE\n"
            "\terrBias =   1.0;\n\terrRand =    0.0;\n"
            f"\tlineOffset = {self.line_off:.15f};\n\tsampOffset = {self.samp_off:.15f};\n"
            f"\tlatOffset =   {self.lat_off:.15f};\n\tlongOffset =  {self.lon_off:.15f};\n"
            f"\theightOffset = {self.height_off:.15f};\n"
            f"\tlineScale = {self.line_scale:.15f};\n\tsampScale = {self.samp_scale:.15f};\n"
            f"\tlatScale =    {self.lat_scale:.15f};\n\tlongScale =    {self.lon_scale:.15f};\n"
            f"\theightScale = {self.height_scale:.15f};\n"
            f"\tlineNumCoef = {coefs(self.line_num)}\n\tlineDenCoef = {coefs(self.line_den)}\n"
            f"\tsampNumCoef = {coefs(self.samp_num)}\n\tsampDenCoef = {coefs(self.samp_den)}\n"
            "END_GROUP = IMAGE\nEND;\n"
        )


def make_rpc(
    size: int,
    gsd: float,
    lon0: float,
    lat0: float,
    shift: tuple[float, float],
    angle: float,
    sensor: str = "PMS",
) -> SyntheticRpc:
    """A frame of ``size`` pixels at ``gsd`` m centred near (lon0, lat0).

    Image columns run east and rows south, rotated by ``angle`` radians, displaced by ``shift``
    (rows, cols) pixels, with a mild quadratic distortion and terrain parallax along rows.
    """
    half = size / 2.0
    lat_scale = half * gsd / METRES_PER_DEGREE
    lon_scale = lat_scale / np.cos(np.radians(lat0))
    ca, sa = np.cos(angle), np.sin(angle)
    q = 0.01  # about q·half pixels of quadratic distortion at the frame corners
    line = [0.0] * 20
    samp = [0.0] * 20
    # Normalised: col = cos·L + sin·P (+ q·L²), row = sin·L − cos·P (+ q·L·P) + parallax·H.
    samp[0], samp[1], samp[2], samp[7] = shift[1] / half, ca, sa, q
    line[0], line[1], line[2], line[4] = shift[0] / half, sa, -ca, q
    h_off, h_scale = _HEIGHT_OFFSET[sensor], _HEIGHT_SCALE[sensor]
    line[3] = _PARALLAX_PX_PER_KM * (h_scale / 1000.0) / half
    line_den, samp_den = [1.0] + [0.0] * 19, [1.0] + [0.0] * 19
    line_den[1], line_den[2] = _DEN_LINE
    samp_den[1], samp_den[2] = _DEN_SAMP
    return SyntheticRpc(
        lon_off=lon0,
        lat_off=lat0,
        lon_scale=lon_scale,
        lat_scale=lat_scale,
        line_off=(size - 1) / 2.0,
        samp_off=(size - 1) / 2.0,
        line_scale=half,
        samp_scale=half,
        line_num=tuple(line),
        samp_num=tuple(samp),
        line_den=tuple(line_den),
        samp_den=tuple(samp_den),
        height_off=h_off,
        height_scale=h_scale,
    )


# --- writers -------------------------------------------------------------------------------
