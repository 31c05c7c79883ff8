"""The xarray API: :func:`remove_clouds`, a (time, band, y, x) DataArray in, a Dataset out.

It runs the pipeline itself, not a second implementation: the DataArray is written as a GeoTIFF
series (one file per date, named by its UTC time) into a working folder, a run configuration is
built from the keyword arguments, :func:`pipeline.run.run` solves it with the same tiles, halos
and blending as ``python -m pipeline run``, and the run's cube is opened lazily.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import rasterio
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr
from affine import Affine
from rasterio.windows import Window

from pipeline.config import Config, parse
from pipeline.errors import PipelineError
from pipeline.ids import ALL_BANDS, time_label
from pipeline.run import run
from pipeline.store.layout import MASK, PROVENANCE, Layout

__all__ = ["remove_clouds"]

log = logging.getLogger(__name__)

DIMS = ("time", "band", "y", "x")
#: The variables of the returned Dataset, in this order.
VARIABLES = ("clear", "cloud", "haze", "shadow", MASK, PROVENANCE)
#: The CRS the GeoTIFFs of a series without one are written in (with a unit pixel transform):
#: the pipeline needs a georeferenced series; the result carries no CRS.
PLACEHOLDER_CRS = "EPSG:3857"
#: The largest DN a uint16 GeoTIFF holds; below it, this value marks the pixels without data.
_UINT16_MAX = 65535
#: Bytes of the input computed at once while the GeoTIFFs are written (all dates, a strip of rows).
_STRIP_BYTES = 256 << 20
#: Files are named by their UTC time (:func:`pipeline.ids.time_label`), which the run reads back.
_DATE_PATTERN = r"^(\d{8}T\d{6}Z)\.tif$"
#: Sections the function sets itself.
_OWN_SECTIONS = {
    "inputs": "the DataArray is the input (pass max_dn= for DN data)",
    "grid": "the result is on the DataArray's own grid (resample it first, e.g. with "
    "data.rio.reproject)",
}


@dataclass(frozen=True)
class _Series:
    """The checked input: (time, band, y, x) north-up, and how to write and label it."""

    data: xr.DataArray
    times: pd.DatetimeIndex  # UTC, naive
    names: tuple[str, ...]  # band descriptions of the GeoTIFFs
    crs: Any  # the input's CRS, or None
    transform: Affine  # of the files written
    flipped: bool  # y ran south to north: written flipped, flipped back in the result


def remove_clouds(
    data: xr.DataArray,
    *,
    max_dn: float | None = None,
    workdir: str | Path | None = None,
    **settings: Any,
) -> xr.Dataset:
    """Remove clouds from an image time series held in an :class:`xarray.DataArray`.

    The series is written as GeoTIFFs (one per date) into ``workdir`` and solved by a pipeline
    run (:func:`pipeline.run.run`): the same tiles, halos, blending and mask as
    ``python -m pipeline run``. The run uses the current Dask client's scheduler if there is one
    (:func:`distributed.default_client`), else the pipeline's own local cluster.

    Parameters
    ----------
    data
        Dims ``(time, band, y, x)`` (any order), NumPy- or Dask-backed, at least 2 dates.
        Values in [0, 1] (floats), or digital numbers in [0, ``max_dn``] with ``max_dn``; NaN
        marks missing data (a pixel missing in one band is left out in every band of that date).
        ``time`` holds datetimes, taken as UTC when they have no zone, strictly increasing and
        at least one second apart. Georeferenced through rioxarray (``data.rio.crs``,
        ``data.rio.transform()``, north-up or south-up) or not at all: then the GeoTIFFs get a
        placeholder CRS (:data:`PLACEHOLDER_CRS`) with a unit pixel transform, and the result
        none.
    max_dn
        The DN that means 1.0 (e.g. 1023 for 10-bit data), at most 65535: the values must then
        be whole numbers in [0, ``max_dn``] (written as uint16 GeoTIFFs, 65535 where NaN: so
        NaN only with ``max_dn`` below 65535).
    workdir
        Folder of the GeoTIFF series (``series/``, removed after a successful run) and of the run
        (``run/``: ``cube.zarr``, COGs, STAC Items, ``diagnostics.csv``). Default: a new
        :func:`tempfile.mkdtemp` folder that is **kept**, because the returned Dataset reads
        ``run/cube.zarr`` lazily; its path is ``result.attrs["workdir"]``. Delete it once the
        result is no longer needed.
    **settings
        Sections of the run configuration (``configs/*.yaml``, :class:`pipeline.config.Config`)
        as mappings: ``solver={"method": "aatm-shadow"}``, ``mask={...}``, ``tiling={...}``,
        ``cluster={...}`` (overrides the current client), ``output={"quicklooks": True}``
        (quicklooks are off by default). ``inputs`` and ``grid`` are set from ``data``.

    Returns
    -------
    xarray.Dataset
        Dask-backed, with the input's ``time``, ``band``, ``y`` and ``x`` coordinates (and its
        CRS, written with rioxarray): ``clear`` (the cloud-free series), ``cloud``, ``haze``
        and ``shadow`` (float32, (time, band, y, x); ``shadow`` is 0, NaN where ``cloud`` is,
        when the solver has no shadow layer: unless ``solver.method`` is ``aatm-shadow`` or
        ``solver.refine``; with ``solver.shadow_free_fill`` it is signed, the fill's ground
        less the mask solve's),
        ``mask`` ((time, y, x) uint8: 0 clear, 1 haze, 2 cloud, 3 shadow, 255 no data) and
        ``provenance`` ((time, band, y, x) uint8: 1 observed, 0 modelled, 255 no data). Its
        attributes are the cube's (the run's settings) and ``workdir``.

    Raises
    ------
    ValueError
        ``data`` has the wrong dims, times, values or georeferencing, or a setting is one the
        function sets itself; the message says what to change.
    pipeline.errors.PipelineError
        The configuration is invalid (:class:`~pipeline.errors.ConfigError`), the cluster cannot
        be reached, or tiles failed.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> import pipeline
    >>> rng = np.random.default_rng(0)
    >>> ground = rng.uniform(0.1, 0.4, (1, 3, 64, 64))
    >>> cloud = np.zeros((5, 1, 64, 64))
    >>> cloud[1, :, 10:30, 20:40] = 0.9
    >>> data = xr.DataArray(
    ...     cloud + (1 - cloud) * ground,
    ...     dims=("time", "band", "y", "x"),
    ...     coords={"time": pd.date_range("2024-06-01 10:30", periods=5), "band": ["B", "G", "R"]},
    ... )
    >>> result = pipeline.remove_clouds(data, tiling={"tile_size": 32, "overlap": 8})
    >>> result.clear.dims
    ('time', 'band', 'y', 'x')
    >>> bool(abs(result.clear[1, :, 20, 30] - ground[0, :, 20, 30]).max() < 0.05)
    True
    >>> clear = result.clear.load()  # read before the working folder goes
    >>> import shutil; shutil.rmtree(result.attrs["workdir"])
    """
    series = _checked(data, max_dn)
    made = workdir is None
    folder = Path(tempfile.mkdtemp(prefix="remove-clouds-") if made else str(workdir))
    try:
        config = _config(folder, series, max_dn, settings)
        paths = _write_series(series, folder / "series", max_dn)
        summary = run(config)
    except BaseException:
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if not summary.ok:
        failures = "; ".join(f"{f.stage} {f.key}: {f.message}" for f in summary.failures)
        raise PipelineError(
            f"{len(summary.failures)} tile(s) failed ({failures}); the run is in {folder / 'run'}"
        )
    shutil.rmtree(folder / "series", ignore_errors=True)
    shutil.rmtree(Layout(config.output.path).work, ignore_errors=True)
    log.debug("solved %d dates from %s", len(paths), folder)
    return _result(Layout(config.output.path).cube, series, folder)


def _checked(data: Any, max_dn: float | None) -> _Series:
    """The input checked (all but its values, read while written) and put in (time, band, y, x)
    order, north-up."""
    if not isinstance(data, xr.DataArray):
        raise ValueError(f"data: expected an xarray.DataArray, got {type(data).__name__}")
    if set(data.dims) != set(DIMS) or data.ndim != 4:
        raise ValueError(
            f"data has dims {tuple(map(str, data.dims))}; it needs exactly (time, band, y, x): "
            "rename or transpose them (e.g. data.rename(lat='y', lon='x'))"
        )
    if not np.issubdtype(data.dtype, np.integer) and not np.issubdtype(data.dtype, np.floating):
        raise ValueError(f"data holds {data.dtype} values; it needs real numbers")
    if data.sizes["time"] < 2:
        raise ValueError(f"data has {data.sizes['time']} date(s); it needs at least 2")
    if max_dn is not None and not (0 < float(max_dn) <= _UINT16_MAX):
        raise ValueError(
            f"max_dn {max_dn} is outside (0, {_UINT16_MAX}]: scale the DN into [0, 1] yourself "
            "and leave max_dn out"
        )
    data = data.transpose(*DIMS)
    times = _utc_times(data)
    crs = data.rio.crs
    flipped = False
    if crs is None:
        transform = Affine(1.0, 0.0, 0.0, 0.0, -1.0, float(data.sizes["y"]))
    else:
        transform = data.rio.transform()
        if transform.b != 0 or transform.d != 0 or transform.a <= 0 or transform.e == 0:
            raise ValueError(
                f"data's transform {tuple(transform)[:6]} is rotated or mirrored in x; "
                "reproject it onto a north-up grid (data.rio.reproject(data.rio.crs))"
            )
        if transform.e > 0:  # rows run south to north: written north-up
            flipped = True
            data = data.isel(y=slice(None, None, -1))
            transform = data.rio.transform()
    return _Series(data, times, _band_names(data), crs, transform, flipped)


def _utc_times(data: xr.DataArray) -> pd.DatetimeIndex:
    """The dates as naive UTC, checked to increase by at least a second."""
    if "time" not in data.coords:
        raise ValueError("data has no time coordinate: assign one (data.assign_coords(time=...))")
    values = data["time"].values
    wrong = ValueError(f"data.time holds {values.dtype} values; it needs datetimes (datetime64)")
    if values.dtype.kind not in "MO":  # datetime64, or objects (datetimes with a zone)
        raise wrong
    try:
        times = pd.DatetimeIndex(values)
    except (TypeError, ValueError):
        raise wrong from None
    if times.tz is not None:
        times = times.tz_convert("UTC").tz_localize(None)
    if times.hasnans:
        raise ValueError("data.time has a missing time (NaT): drop that date")
    seconds = times.floor("s").asi8
    if (np.diff(seconds) <= 0).any():
        raise ValueError(
            "data.time must increase strictly, at least 1 s apart: sort it "
            "(data.sortby('time')) and drop repeated dates"
        )
    return times


def _band_names(data: xr.DataArray) -> tuple[str, ...]:
    """The band coordinate as GeoTIFF band descriptions, where they are usable as file-name parts
    (the run names its COGs by band); else B1, B2, ..."""
    count = data.sizes["band"]
    fallback = tuple(f"B{i + 1}" for i in range(count))
    if "band" not in data.coords:
        return fallback
    names = tuple(str(v) for v in data["band"].values)
    usable = all(n and n != ALL_BANDS and all(c.isalnum() or c in "._-" for c in n) for n in names)
    if not usable or len(set(names)) != count:
        log.info("band names %s are not usable in file names: bands named B1.. instead", names)
        return fallback
    return names


def _config(
    folder: Path, series: _Series, max_dn: float | None, settings: dict[str, Any]
) -> Config:
    """The run configuration: the series' GeoTIFFs in, ``folder/run`` out, the user's sections,
    and the current Dask client's scheduler unless a ``cluster`` section is given."""
    for key, why in _OWN_SECTIONS.items():
        if key in settings:
            raise ValueError(f"remove_clouds sets `{key}` itself: {why}; remove {key}=")
    output = dict(settings.get("output") or {})
    if "path" in output:
        raise ValueError("remove_clouds sets output.path itself: pass workdir= instead")
    # No dashboard link printed by a library call (cluster={"dashboard": True} for one).
    cluster = settings.get("cluster")
    if cluster is None:
        address = _current_scheduler()
        cluster = {"kind": "address", "address": address} if address else {}
    if isinstance(cluster, Mapping):
        cluster = {"dashboard": False, **cluster}
    inputs: dict[str, Any] = {
        "kind": "geotiff",
        "paths": [str(p) for p in _paths(folder / "series", series)],
        "date_pattern": _DATE_PATTERN,
    }
    if max_dn is not None:
        inputs["max_dn"] = float(max_dn)
    return parse(
        {
            **settings,
            "inputs": inputs,
            "output": {"quicklooks": False, **output, "path": str(folder / "run")},
            "cluster": cluster,
        },
        Config,
        source="remove_clouds",
    )


def _current_scheduler() -> str | None:
    """The address of the current Dask client's scheduler, or None without one."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    return str(client.scheduler.address)


def _paths(folder: Path, series: _Series) -> list[Path]:
    """One GeoTIFF per date, named by its UTC time (which the run parses back)."""
    return [folder / f"{time_label(t.to_pydatetime())}.tif" for t in series.times]


def _write_series(series: _Series, folder: Path, max_dn: float | None) -> list[Path]:
    """Write the series block by block (:func:`_blocks`), checking its values on the way."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    paths = _paths(folder, series)
    data = series.data
    _, n_band, height, width = data.shape
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": n_band,
        "dtype": "float32" if max_dn is None else "uint16",
        "crs": PLACEHOLDER_CRS if series.crs is None else series.crs,
        "transform": series.transform,
    }
    if max_dn is not None and max_dn < _UINT16_MAX:
        profile["nodata"] = _UINT16_MAX  # above max_dn: never a valid DN
    with ExitStack() as stack:
        files = [stack.enter_context(rasterio.open(p, "w", **profile)) for p in paths]
        for dst in files:
            dst.descriptions = series.names
        for dates, rows in _blocks(data):
            block = _checked_values(np.asarray(data[dates, :, rows].values), max_dn)
            window = Window(0, rows.start, width, rows.stop - rows.start)
            for dst, values in zip(files[dates], block, strict=True):
                dst.write(values, window=window)
    return paths


def _blocks(data: xr.DataArray) -> Iterator[tuple[slice, slice]]:
    """(dates, rows) of the blocks the series is written in, every band and column each.

    A NumPy array goes in strips of rows of every date, of about :data:`_STRIP_BYTES`. A Dask
    array goes by its chunks of dates and rows, neighbouring chunks of rows merged up to that
    size, so that every chunk is computed once: a block is never smaller than one chunk.
    """
    n_time, n_band, height, width = data.shape
    row_bytes = n_band * width * 8
    if data.chunks is None:
        rows = max(1, _STRIP_BYTES // (n_time * row_bytes))
        for top in range(0, height, rows):
            yield slice(0, n_time), slice(top, min(top + rows, height))
        return
    t0 = 0
    for n_dates in data.chunks[0]:
        budget = _STRIP_BYTES // (n_dates * row_bytes)
        top = bottom = 0
        for n_rows in data.chunks[2]:
            if bottom > top and bottom + n_rows - top > budget:
                yield slice(t0, t0 + n_dates), slice(top, bottom)
                top = bottom
            bottom += n_rows
        yield slice(t0, t0 + n_dates), slice(top, bottom)
        t0 += n_dates


def _checked_values(strip: np.ndarray, max_dn: float | None) -> np.ndarray:
    """A strip of all dates as the GeoTIFFs hold it: float32 in [0, 1] with NaN, or uint16 DN
    with 65535 for NaN; ValueError naming the fix for any other value."""
    valid = np.isfinite(strip) if strip.dtype.kind == "f" else np.ones(strip.shape, bool)
    if strip.dtype.kind == "f" and np.isinf(strip).any():
        raise ValueError("data holds infinite values: replace them with NaN (missing data)")
    found = strip[valid]
    low, high = (float(found.min()), float(found.max())) if found.size else (0.0, 0.0)
    if max_dn is None:
        if low < 0 or high > 1:
            raise ValueError(
                f"data holds values in [{low:g}, {high:g}], outside [0, 1]: pass max_dn= (the "
                "largest DN, e.g. 1023 for 10-bit data) for digital numbers, or scale to [0, 1]"
            )
        return strip.astype(np.float32, copy=False)
    if low < 0 or high > max_dn or (strip.dtype.kind == "f" and (found % 1 != 0).any()):
        raise ValueError(
            f"data holds values in [{low:g}, {high:g}]; with max_dn {max_dn:g} they must be whole "
            f"DN in [0, {max_dn:g}]: raise max_dn, or leave it out for values in [0, 1]"
        )
    if not valid.all() and max_dn >= _UINT16_MAX:
        raise ValueError(
            f"data has NaN (missing data), which uint16 DN with max_dn {max_dn:g} cannot mark: "
            f"keep max_dn below {_UINT16_MAX}, or scale to [0, 1] and leave max_dn out"
        )
    return np.where(valid, strip, _UINT16_MAX).astype(np.uint16)


def _result(cube: Path, series: _Series, folder: Path) -> xr.Dataset:
    """The run's cube, lazily, with the input's coordinates and CRS (none without one)."""
    ds = xr.open_zarr(cube, consolidated=False)
    height, width = series.data.sizes["y"], series.data.sizes["x"]
    if (ds.sizes["y"], ds.sizes["x"]) != (height, width) or not ds.rio.transform().almost_equals(
        series.transform
    ):
        raise PipelineError(
            f"{cube}: the run's grid {ds.rio.transform()} ({ds.sizes['y']}x{ds.sizes['x']} px) is "
            f"not the input's {series.transform} ({height}x{width} px)"
        )
    if "shadow" not in ds:  # the solver's model has no shadow layer: its shadow is 0
        ds["shadow"] = xr.zeros_like(ds["cloud"]).where(ds["cloud"].notnull())
    ds = ds[list(VARIABLES)].drop_vars("spatial_ref", errors="ignore")
    for name in ds.variables:
        ds[name].attrs.pop("grid_mapping", None)
        ds[name].encoding.pop("grid_mapping", None)
    if series.flipped:
        ds = ds.isel(y=slice(None, None, -1))
        data = series.data.isel(y=slice(None, None, -1))
    else:
        data = series.data
    for dim in DIMS:
        if dim in data.coords:
            coord = data[dim]
            ds = ds.assign_coords({dim: xr.Variable((dim,), coord.values, coord.attrs)})
        else:
            ds = ds.drop_vars(dim)
    ds.attrs["workdir"] = str(folder)
    if series.crs is not None:
        ds = ds.rio.write_crs(series.crs).rio.write_transform(data.rio.transform())
    return ds
