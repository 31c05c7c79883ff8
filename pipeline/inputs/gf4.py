"""GF-4 L1A products as a series: find each product's image of one sensor, read its metadata.

Product names, files, archives and the metadata XML are in :mod:`pipeline.inputs.gf4_product`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import rasterio
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError

from pipeline.errors import ConfigError, InputError
from pipeline.geom import footprint_centre
from pipeline.inputs.acquisition import Acquisition
from pipeline.inputs.files import check_complete, expand_paths
from pipeline.inputs.gf4_product import (
    SENSORS,
    GF4Metadata,
    ProductFiles,
    check_pmi_complete,
    extract_archive,
    find_product_files,
    is_archive,
    parse_metadata,
    parse_product_name,
)
from pipeline.inputs.radiometry import calibrate
from pipeline.inputs.scaling import bits_max, check_dn_args, scaled_series

__all__ = ["discover_gf4"]

log = logging.getLogger(__name__)

# Sun elevation from the XML vs computed at CenterTime (UTC+8) and the footprint centre: real
# products agree to a fraction of a degree; reading the time as UTC is off by tens of degrees.
_SUN_TOLERANCE_DEG = 2.0


def discover_gf4(
    paths: Sequence[str | Path],
    *,
    sensor: str = "PMS",
    extract_dir: Path,
    max_dn: float | None = None,
    dn_rule: str = "auto",
    calibration: str = "dn",
    calibration_table: Path | None = None,
) -> list[Acquisition]:
    """Find the GF-4 L1A images of one sensor in product directories, archives or globs.

    Parameters
    ----------
    paths
        Product directories, ``.tar.gz`` archives, or glob patterns matching either. Products
        named for the other sensor (``GF4_IRS_…`` when ``sensor="PMS"``) are skipped; a PMI
        product holds both sensors and the requested one is picked.
    sensor
        ``"PMS"`` (5 bands B1…B5, 50 m) or ``"IRS"`` (1 band IRS1, 400 m).
    extract_dir
        Where archives are extracted (once; an existing complete extraction is reused), and
        where the observed maximum DN of each file is cached.
    max_dn
        DN that maps to 1.0; overrides ``dn_rule``.
    dn_rule
        ``"auto"``, ``"metadata"`` or ``"pow2"`` (:mod:`pipeline.inputs.scaling`): by default
        ``2^ValidPixelBits − 1``, checked against the data.
    calibration
        ``"dn"``, ``"radiance"`` or ``"reflectance"`` (:mod:`pipeline.inputs.radiometry`).
    calibration_table
        CRESDA's coefficients by year and integration time (needed unless ``"dn"``).

    Returns
    -------
    list of Acquisition
        Sorted by time (UTC). ``nodata`` is the file's no-data value, or 0 when the file sets
        none (L1A fill is DN 0).

    Raises
    ------
    ConfigError
        Unknown sensor, dn_rule or calibration, or a non-positive max_dn.
    InputError
        A path or pattern matches nothing, an archive is truncated, a product lacks the
        sensor's files (or a PMI product either sensor's), its metadata is incomplete or
        contradicts the image, or (``dn_rule: metadata``) the data exceed ``ValidPixelBits``.
    """
    sensor_u = sensor.upper()
    if sensor_u not in SENSORS:
        raise ConfigError(f"inputs.sensor: {sensor!r} is not a GF-4 sensor; use 'PMS' or 'IRS'")
    check_dn_args(max_dn, dn_rule)
    acqs: list[Acquisition] = []
    seen: set[Path] = set()
    for entry in expand_paths(paths):
        name = parse_product_name(entry.name)
        if name is not None and name.kind not in (sensor_u, "PMI"):
            log.info(
                "skipping %s: a %s product, sensor %s requested", entry.name, name.kind, sensor_u
            )
            continue
        if entry.is_dir():
            directory = entry
        elif is_archive(entry):
            directory = extract_archive(entry, extract_dir)
        else:
            raise InputError(
                f"{entry.name}: not a GF-4 product directory or .tar.gz archive; list product "
                "directories or archives in inputs.paths"
            )
        if name is not None and name.kind == "PMI":
            found = {s: find_product_files(directory, s) for s in SENSORS}
            check_pmi_complete(found, entry.name)
            files = found[sensor_u]
        else:
            files = find_product_files(directory, sensor_u)
        if files is None:
            raise InputError(
                f"{entry.name}: holds no GF4_{sensor_u}_*.xml; it is not a GF-4 {sensor_u} "
                "product — remove it from inputs.paths or set inputs.sensor"
            )
        if files.tiff.resolve() in seen:
            continue
        seen.add(files.tiff.resolve())
        acqs.append(_gf4_acquisition(files, sensor_u))

    scaled = scaled_series(acqs, max_dn, dn_rule, cache_dir=extract_dir)
    return calibrate(scaled, calibration, calibration_table)


def _check_sun(meta: GF4Metadata) -> None:
    """Warn when the XML's sun elevation disagrees with the sun position at its time.

    Real GF-4 metadata agree within a fraction of a degree once ``CenterTime`` is read as
    Beijing time; a large difference means a time or tag this reader misunderstands.
    """
    if meta.sun_elevation is None or meta.footprint is None:
        return
    from pipeline.inputs.radiometry import sun_position

    computed, _ = sun_position(meta.center_time, *footprint_centre(meta.footprint))
    if abs(computed - meta.sun_elevation) > _SUN_TOLERANCE_DEG:
        log.warning(
            "%s: <SolarZenith> %.2f° (GF-4 writes the sun elevation there) but the sun was "
            "%.2f° high at the scene centre at %s UTC; check the product's times",
            meta.path.name,
            meta.sun_elevation,
            computed,
            meta.center_time.strftime("%Y-%m-%d %H:%M:%S"),
        )


def _gf4_acquisition(files: ProductFiles, sensor: str) -> Acquisition:
    tiff, xml = files.tiff, files.xml
    meta = parse_metadata(xml)
    _check_sun(meta)
    try:
        with warnings.catch_warnings():
            # L1A images have no geotransform by design; their georeferencing is the RPC.
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(tiff) as src:
                count, width, height = src.count, src.width, src.height
                nodata, has_rpcs = src.nodata, src.rpcs is not None
                dtype = np.dtype(src.dtypes[0])
                check_complete(src, tiff)
    except RasterioIOError as exc:
        raise InputError(
            f"{tiff.name}: image is not readable ({exc}); re-download the product"
        ) from None
    if count != len(meta.bands):
        raise InputError(
            f"{tiff.name}: image has {count} bands but {xml.name} lists {len(meta.bands)} "
            f"({','.join(meta.bands)}); the product is inconsistent — re-download it"
        )
    if (width, height) != (meta.width, meta.height):
        raise InputError(
            f"{tiff.name}: image is {width}x{height} but {xml.name} says "
            f"{meta.width}x{meta.height}; the product is inconsistent — re-download it"
        )
    if not has_rpcs:
        base = tiff.name[: -len(tiff.suffix)]  # product names contain dots: no with_suffix
        what = f"{files.rpb.name} is malformed" if files.rpb else f"missing {base}.rpb"
        raise InputError(
            f"{tiff.name}: no RPCs found ({what}); L1A images are georeferenced only by RPC — "
            "re-download the product"
        )
    dtype_max = float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0
    bits = meta.valid_pixel_bits or meta.pixel_bits
    return Acquisition(
        id=tiff.stem,
        path=tiff,
        time=meta.center_time,
        sensor=sensor,
        bands=meta.bands,
        max_dn=min(bits_max(bits), dtype_max) if bits else dtype_max,
        georef="rpc",
        nodata=0.0 if nodata is None else float(nodata),
        integration_time=meta.integration_time,
        cloud_percent=meta.cloud_percent,
        footprint=meta.footprint,
        gsd=meta.image_gsd,
        dtype_max=dtype_max,
        valid_bits=meta.valid_pixel_bits,
        sun_elevation=meta.sun_elevation,
    )
