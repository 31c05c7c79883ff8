"""The common target grid every acquisition is warped to before stacking.

GF-4 L1A dates are separately pointed frames with RPC georeferencing only
(docs/CONVENTIONS.md §7): they must be orthorectified onto one north-up grid before pixels of
different dates can be compared.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import rasterio
import rasterio.windows
from affine import Affine
from rasterio.crs import CRS
from rasterio.errors import CRSError, NotGeoreferencedWarning
from rasterio.transform import RPCTransformer
from rasterio.warp import transform as transform_points
from rasterio.warp import transform_bounds

from pipeline.errors import ConfigError, InputError
from pipeline.geom import METRES_PER_DEGREE, densify
from pipeline.inputs import Acquisition

__all__ = ["LATTICE_TOLERANCE", "TargetGrid", "derive_grid", "on_lattice", "utm_crs"]

Bounds = tuple[float, float, float, float]
# Points per footprint edge when projecting it: UTM bends lon/lat edges slightly.
_EDGE_POINTS = 21
#: How far (in pixels) two transforms may differ and still count as one pixel lattice: the
#: origins of GeoTIFFs on one grid differ by whole pixels up to float64 rounding of their
#: coordinates (~1e-10 px for UTM metres).
LATTICE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class TargetGrid:
    """A north-up raster grid: CRS, affine transform and size.

    Attributes
    ----------
    crs
        ``"EPSG:xxxx"`` or WKT; anything :meth:`rasterio.crs.CRS.from_user_input` accepts.
    transform
        North-up affine transform of the grid's top-left corner.
    width, height
        Size in pixels.
    """

    crs: str
    transform: Affine
    width: int
    height: int

    def __post_init__(self) -> None:
        t = self.transform
        if t.b != 0 or t.d != 0 or t.a <= 0 or t.e >= 0:
            raise ValueError(f"TargetGrid transform must be north-up, got {tuple(t)[:6]}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"TargetGrid size must be positive, got {self.width}x{self.height}")

    def window_transform(self, window: rasterio.windows.Window) -> Affine:
        """Affine transform of ``window``'s top-left corner on this grid."""
        # Same as rasterio.windows.transform, without affine's deprecated ``*`` operator.
        return self.transform @ Affine.translation(window.col_off, window.row_off)

    @property
    def bounds(self) -> Bounds:
        """(left, bottom, right, top) in grid CRS units."""
        t = self.transform
        return (t.c, t.f + t.e * self.height, t.c + t.a * self.width, t.f)

    @property
    def resolution(self) -> tuple[float, float]:
        """Pixel size (x, y), both positive."""
        return (self.transform.a, -self.transform.e)

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width)."""
        return (self.height, self.width)

    def coords(self) -> tuple[np.ndarray, np.ndarray]:
        """Pixel-centre coordinates: y of shape (height,) from north to south, x of (width,)."""
        t = self.transform
        y = t.f + (np.arange(self.height) + 0.5) * t.e
        x = t.c + (np.arange(self.width) + 0.5) * t.a
        return y, x


def utm_crs(lon: float, lat: float) -> str:
    """``"EPSG:326zz"`` (north) or ``"EPSG:327zz"`` (south) of the standard UTM zone of a point.

    The Norway/Svalbard zone exceptions are not applied.
    """
    zone = min(60, max(1, math.floor((lon + 180.0) / 6.0) + 1))
    return f"EPSG:{(32600 if lat >= 0 else 32700) + zone}"


def _rpc_lonlat_outline(acq: Acquisition) -> tuple[np.ndarray, np.ndarray]:
    """Lon/lat of an RPC image's outline: the metadata footprint, else the RPC at height 0."""
    if acq.footprint is not None:
        return densify(acq.footprint, _EDGE_POINTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(acq.path) as src:
            rpcs, w, h = src.rpcs, src.width, src.height
    if rpcs is None:
        raise InputError(f"{acq.path.name}: no RPCs; re-download the product")
    cols, rows = densify([(0, 0), (w, 0), (w, h), (0, h)], _EDGE_POINTS)
    with RPCTransformer(rpcs) as tr:
        lon, lat = tr.xy(rows, cols, offset="ul")
    return np.asarray(lon, float), np.asarray(lat, float)


@dataclass(frozen=True)
class _Header:
    """What the grid needs of a GeoTIFF (``georef == "crs"``) input, read once per file."""

    crs: CRS
    transform: Affine
    bounds: Bounds
    width: int
    height: int


def _header(acq: Acquisition) -> _Header | None:
    """The georeferencing of a CRS input; None for an RPC input."""
    if acq.georef != "crs":
        return None
    if acq.stac is not None:
        s = acq.stac
        t = Affine(*s.transform)
        left, top = t.c, t.f
        right, bottom = t @ (s.width, s.height)
        bounds = (min(left, right), min(top, bottom), max(left, right), max(top, bottom))
        return _Header(CRS.from_user_input(s.crs), t, bounds, s.width, s.height)
    with rasterio.open(acq.path) as src:
        return _Header(src.crs, src.transform, tuple(src.bounds), src.width, src.height)


def _footprint_bounds(acq: Acquisition, header: _Header | None, crs: CRS) -> Bounds:
    """Bounding box of an acquisition's footprint in ``crs``."""
    if header is None:
        lon, lat = _rpc_lonlat_outline(acq)
        xs, ys = transform_points("EPSG:4326", crs, lon, lat)
        return (min(xs), min(ys), max(xs), max(ys))
    return tuple(transform_bounds(header.crs, crs, *header.bounds, densify_pts=_EDGE_POINTS))


def _lonlat_centre(
    acqs: Sequence[Acquisition], headers: Sequence[_Header | None]
) -> tuple[float, float]:
    lons, lats = [], []
    for a, h in zip(acqs, headers, strict=True):
        if h is None:
            lon, lat = _rpc_lonlat_outline(a)
        else:
            lon0, lat0, lon1, lat1 = transform_bounds(h.crs, "EPSG:4326", *h.bounds)
            lon, lat = np.array([lon0, lon1]), np.array([lat0, lat1])
        lons.append(lon)
        lats.append(lat)
    all_lon, all_lat = np.concatenate(lons), np.concatenate(lats)
    return (float(all_lon.min() + all_lon.max()) / 2, float(all_lat.min() + all_lat.max()) / 2)


def _rpc_gsd_metres(acq: Acquisition) -> float:
    """Ground pixel size at the image centre, from the RPC, for products without ImageGSD."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(acq.path) as src:
            rpcs, w, h = src.rpcs, src.width, src.height
    with RPCTransformer(rpcs) as tr:
        lon, lat = tr.xy([h / 2, h / 2, h / 2 + 1], [w / 2, w / 2 + 1, w / 2])
    lon, lat = np.asarray(lon), np.asarray(lat)
    k = math.cos(math.radians(lat[0]))
    dx = math.hypot((lon[1] - lon[0]) * k, lat[1] - lat[0]) * METRES_PER_DEGREE
    dy = math.hypot((lon[2] - lon[0]) * k, lat[2] - lat[0]) * METRES_PER_DEGREE
    return (dx + dy) / 2


def _default_resolution(
    acq: Acquisition, header: _Header | None, crs: CRS, centre_lat: float
) -> float:
    if header is not None:
        if header.crs == crs:
            return float(abs(header.transform.a))
        # Another CRS was asked for: let GDAL suggest the equivalent pixel size.
        tr, _, _ = rasterio.warp.calculate_default_transform(
            header.crs, crs, header.width, header.height, *header.bounds
        )
        return float(abs(tr.a))
    gsd = acq.gsd if acq.gsd is not None else _rpc_gsd_metres(acq)
    if crs.is_geographic:
        return gsd / METRES_PER_DEGREE
    return gsd / float(crs.linear_units_factor[1])


def on_lattice(transform: Affine, lattice: Affine) -> bool:
    """Whether the north-up ``transform`` has ``lattice``'s pixel size and its origin lies on
    ``lattice``'s pixel corners (within :data:`LATTICE_TOLERANCE` px): then a window of one is a
    window of the other, and reading it needs no resampling."""
    if transform.b != 0 or transform.d != 0 or lattice.b != 0 or lattice.d != 0:
        return False
    if not (
        math.isclose(transform.a, lattice.a, rel_tol=1e-9)
        and math.isclose(transform.e, lattice.e, rel_tol=1e-9)
    ):
        return False
    col = (transform.c - lattice.c) / lattice.a
    row = (transform.f - lattice.f) / lattice.e
    return abs(col - round(col)) <= LATTICE_TOLERANCE and abs(row - round(row)) <= LATTICE_TOLERANCE


def _shared_lattice(
    headers: Sequence[_Header | None], crs: CRS, resolution: float | None
) -> Affine | None:
    """The pixel lattice every input shares in ``crs`` (the first file's transform), or None.

    GeoTIFF inputs share one when each is north-up in ``crs`` with the same pixel size (that of
    ``resolution``, if given) and their origins differ by whole pixels, e.g. a Landsat series,
    whose 30 m grid is offset by 15 m from multiples of 30 m. RPC inputs have no lattice.
    """
    transforms = []
    for h in headers:
        if h is None or h.crs != crs:
            return None
        transforms.append(h.transform)
    first = transforms[0]
    if first.a <= 0 or first.e >= 0 or not all(on_lattice(t, first) for t in transforms):
        return None
    if resolution is not None and not (
        math.isclose(first.a, resolution, rel_tol=1e-9)
        and math.isclose(-first.e, resolution, rel_tol=1e-9)
    ):
        return None
    return first


def _snap(value: float, origin: float, step: float, up: bool) -> float:
    """``value`` moved outwards onto ``origin + k·step``; the tiny tolerance keeps an already
    aligned edge from growing a pixel through floating-point noise."""
    k = (value - origin) / step
    eps = 1e-9
    return origin + (math.ceil(k - eps) if up else math.floor(k + eps)) * step


def _overlaps(a: Bounds, b: Bounds) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def derive_grid(
    acquisitions: Sequence[Acquisition],
    *,
    crs: str | None = None,
    resolution: float | None = None,
    bounds: Bounds | None = None,
) -> TargetGrid:
    """Choose the common grid a series is warped to.

    Parameters
    ----------
    acquisitions
        The series (at least one acquisition).
    crs
        Target CRS. Default: for GF-4 (RPC) inputs the UTM zone of the footprints' centre;
        for GeoTIFF inputs the first file's CRS.
    resolution
        Pixel size in CRS units. Default: the first acquisition's ``ImageGSD`` (RPC inputs; in
        degrees at about 111 km per degree if ``crs`` is geographic) or the first file's pixel
        size (GeoTIFF inputs).
    bounds
        (left, bottom, right, top) in the target CRS. Default: the union of the footprints,
        so pixels outside one date's footprint become no-data for that date.

    Returns
    -------
    TargetGrid
        North-up. When every input is a GeoTIFF in the target CRS and they share one pixel
        lattice (same pixel size, origins whole pixels apart, and ``resolution`` unset or that
        size), the extent is snapped outwards onto *that* lattice, so that every input pixel is
        a grid pixel and staging copies the data instead of resampling it
        (:func:`pipeline.stage.warp.read_window`). Otherwise (GF-4/RPC inputs, mixed grids, another
        CRS or resolution) it is snapped outwards to multiples of the resolution from the CRS
        origin, so that grids of overlapping runs line up pixel for pixel.

    Raises
    ------
    ConfigError
        Invalid ``crs``, ``resolution`` or ``bounds``.
    InputError
        No acquisitions, or an acquisition whose footprint does not overlap ``bounds`` (it
        would be an all-no-data date).
    """
    acqs = list(acquisitions)
    if not acqs:
        raise InputError("inputs.paths: no acquisition found; nothing to grid")
    if resolution is not None and not (math.isfinite(resolution) and resolution > 0):
        raise ConfigError(
            f"grid.resolution: {resolution} is not a positive number; set it to "
            "the pixel size in CRS units or drop it to use the product GSD"
        )
    if bounds is not None:
        if len(bounds) != 4 or not (bounds[0] < bounds[2] and bounds[1] < bounds[3]):
            raise ConfigError(
                f"grid.bounds: {bounds} is not [left, bottom, right, top] with "
                "left < right and bottom < top"
            )
    headers = [_header(a) for a in acqs]
    centre_lon, centre_lat = _lonlat_centre(acqs, headers)
    if crs is not None:
        try:
            target = CRS.from_user_input(crs)
        except (CRSError, ValueError) as exc:
            raise ConfigError(
                f"grid.crs: {crs!r} is not a CRS ({exc}); use e.g. 'EPSG:32650'"
            ) from None
        crs_str = crs
    elif acqs[0].georef == "rpc":
        crs_str = utm_crs(centre_lon, centre_lat)
        target = CRS.from_user_input(crs_str)
    else:
        assert headers[0] is not None  # a CRS input
        target = headers[0].crs
        epsg = target.to_epsg()
        crs_str = f"EPSG:{epsg}" if epsg is not None else target.to_wkt()
    lattice = _shared_lattice(headers, target, resolution)
    if lattice is not None:
        res_x, res_y, x0, y0 = lattice.a, -lattice.e, lattice.c, lattice.f
    else:
        res = (
            float(resolution)
            if resolution is not None
            else _default_resolution(acqs[0], headers[0], target, centre_lat)
        )
        res_x, res_y, x0, y0 = res, res, 0.0, 0.0

    boxes = [_footprint_bounds(a, h, target) for a, h in zip(acqs, headers, strict=True)]
    if bounds is not None:
        outside = [
            a.path.name for a, b in zip(acqs, boxes, strict=True) if not _overlaps(b, bounds)
        ]
        if outside:
            raise InputError(
                f"{', '.join(outside)}: footprint does not overlap grid.bounds {tuple(bounds)}; "
                f"remove it from {acqs[0].listed_in} or widen grid.bounds"
            )
        left, bottom, right, top = bounds
    else:
        left = min(b[0] for b in boxes)
        bottom = min(b[1] for b in boxes)
        right = max(b[2] for b in boxes)
        top = max(b[3] for b in boxes)
    # Snap outwards onto the lattice (the inputs' own, or multiples of the resolution).
    left = _snap(left, x0, res_x, up=False)
    bottom = _snap(bottom, y0, res_y, up=False)
    right = _snap(right, x0, res_x, up=True)
    top = _snap(top, y0, res_y, up=True)
    width = max(1, round((right - left) / res_x))
    height = max(1, round((top - bottom) / res_y))
    return TargetGrid(
        crs=crs_str,
        transform=Affine(res_x, 0.0, left, 0.0, -res_y, top),
        width=width,
        height=height,
    )
