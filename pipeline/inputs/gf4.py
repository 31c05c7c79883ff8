"""GF-4 L1A products as a series: find each product's image of one sensor, read its metadata.

Product names, files, archives and the metadata XML are in :mod:`pipeline.inputs.gf4_product`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import rasterio
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError

from pipeline.errors import ConfigError, InputError
from pipeline.inputs.acquisition import Acquisition
from pipeline.inputs.files import check_complete, expand_paths
from pipeline.inputs.gf4_product import (
    SENSORS,
    ProductFiles,
    extract_archive,
    find_product_files,
    is_archive,
    parse_metadata,
    parse_product_name,
)
from pipeline.inputs.scaling import SENSOR_MAX_DN, check_dn_args, scaled_series

__all__ = ["discover_gf4"]

log = logging.getLogger(__name__)


def discover_gf4(
    paths: Sequence[str | Path],
    *,
    sensor: str = "PMS",
    extract_dir: Path,
    max_dn: float | None = None,
    dn_rule: Literal["sensor", "pow2"] = "sensor",
) -> list[Acquisition]:
    """Find the GF-4 L1A images of one sensor in product directories, archives or globs.

    Parameters
    ----------
    paths
        Product directories, ``.tar.gz`` archives, or glob patterns matching either. Products
        named for the other sensor (``GF4_IRS_…`` when ``sensor="PMS"``) are skipped; a PMI
        product holds both sensors and the requested one is picked.
    sensor
        ``"PMS"`` (5 bands, 50 m) or ``"IRS"`` (1 band, 400 m).
    extract_dir
        Where archives are extracted (once; an existing complete extraction is reused).
    max_dn
        DN that maps to 1.0; overrides ``dn_rule``.
    dn_rule
        ``"sensor"``: PMS 4095, IRS 65535. ``"pow2"``: 2**ceil(log2(observed max DN)) over the
        whole series (reads every file once).

    Returns
    -------
    list of Acquisition
        Sorted by time. ``nodata`` is the file's no-data value, or 0 when the file sets none
        (L1A fill is DN 0).

    Raises
    ------
    ConfigError
        Unknown sensor or dn_rule, or a non-positive max_dn.
    InputError
        A path or pattern matches nothing, an archive is truncated, a product lacks the
        sensor's files, its metadata is incomplete, or the image disagrees with its metadata.
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

    return scaled_series(acqs, max_dn, dn_rule)


def _gf4_acquisition(files: ProductFiles, sensor: str) -> Acquisition:
    tiff, xml = files.tiff, files.xml
    meta = parse_metadata(xml)
    if meta.sensor_id.upper() != sensor:
        raise InputError(
            f"{xml.name}: <SensorID> is {meta.sensor_id!r} but the file is named for {sensor}; "
            "the product is inconsistent — re-download it"
        )
    try:
        with warnings.catch_warnings():
            # L1A images have no geotransform by design; their georeferencing is the RPC.
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(tiff) as src:
                count, width, height = src.count, src.width, src.height
                nodata, has_rpcs = src.nodata, src.rpcs is not None
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
    return Acquisition(
        id=tiff.stem,
        path=tiff,
        time=meta.center_time,
        sensor=sensor,
        bands=meta.bands,
        max_dn=SENSOR_MAX_DN[sensor],
        georef="rpc",
        nodata=0.0 if nodata is None else float(nodata),
        integration_time=meta.integration_time,
        cloud_percent=meta.cloud_percent,
        footprint=meta.footprint,
        gsd=meta.image_gsd,
    )
