"""Radiometric calibration (``inputs.calibration``): DN → radiance or top-of-atmosphere reflectance.

CRESDA's convention is radiance ``L = Gain·DN + Bias`` (W m⁻² sr⁻¹ µm⁻¹), with coefficients
published once a year and, for GF-4 PMS, per integration time. **They are not in the product.**
Real GF-4 XML carries ``<Gain>``/``<Bias>`` lists, but the same values in 2021, 2022 and 2025
products (PMS ``6.864,4.598,5.223,6.375,8.681``), about the reciprocal of CRESDA's gains: read
as ``Gain·DN + Bias`` they give radiances 25–40× too large. So this module takes the
coefficients from a table the user keeps from CRESDA's yearly publication
(``inputs.calibration_table``, YAML), looked up by the acquisition's year and its
``IntegrationTime`` setting; a date the table does not cover is an error, never a guess.

- ``dn`` (default): value = DN / max_dn, the paper's convention.
- ``radiance``: value = L / L_ref, with one ``L_ref`` per band for the whole series (the largest
  radiance a date's scale can hold, ``Gain·max_dn + Bias``), so clouds sit near 1 as the model
  needs and every date shares one linear scale. Physical radiance = value × L_ref.
- ``reflectance`` (PMS only): value = TOA reflectance ``ρ = π·L·d² / (ESUN·sin(sun
  elevation))``, d the Earth–Sun distance in AU. The mid-infrared IRS band is dominated by
  thermal emission, where a solar reflectance means nothing.

ESUN per PMS band is the mean of the ASTM G173-03 extraterrestrial spectrum (shipped with
pvlib) over the band's nominal edges (CRESDA: B1 0.45–0.90, B2 0.45–0.52, B3 0.52–0.60,
B4 0.63–0.69, B5 0.76–0.90 µm), a rectangular response: the product carries no spectral
response, and the published GF-4 ESUN tables found disagree by 28 % on the pan band. The sun
elevation is the XML's (``SolarZenith`` holds the elevation), else computed (NREL SPA, pvlib)
at the scene centre and ``CenterTime``.

The table (``inputs.calibration_table``)::

    # CRESDA absolute radiometric calibration, L = Gain·DN + Bias
    PMS:
      2021:
        "6,30,20,30,30": {gain: [0.1753, 0.1843, 0.2041, 0.1625, 0.1144], bias: [0, 0, 0, 0, 0]}
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError, InputError
from pipeline.geom import footprint_centre
from pipeline.inputs.acquisition import Acquisition

__all__ = [
    "CALIBRATIONS",
    "PMS_BAND_EDGES_UM",
    "calibrate",
    "earth_sun_distance",
    "esun",
    "load_calibration_table",
    "sun_position",
    "value_meaning",
]

CALIBRATIONS = ("dn", "radiance", "reflectance")

#: Nominal band edges of the GF-4 PMS camera in µm (CRESDA's GF-4 specification).
PMS_BAND_EDGES_UM = {
    "B1": (0.45, 0.90),
    "B2": (0.45, 0.52),
    "B3": (0.52, 0.60),
    "B4": (0.63, 0.69),
    "B5": (0.76, 0.90),
}

RADIANCE_UNITS = "W m-2 sr-1 um-1"


@functools.cache
def esun(band: str) -> float:
    """Mean exoatmospheric solar irradiance of a PMS band, W m⁻² µm⁻¹ (see module docstring)."""
    from pvlib.spectrum import get_reference_spectra

    lo, hi = PMS_BAND_EDGES_UM[band]
    spectrum = get_reference_spectra(standard="ASTM G173-03")["extraterrestrial"]
    inside = spectrum[(spectrum.index >= lo * 1000) & (spectrum.index <= hi * 1000)]
    return float(inside.mean()) * 1000.0  # W m-2 nm-1 → W m-2 µm-1


def earth_sun_distance(time: datetime) -> float:
    """Earth–Sun distance in astronomical units at ``time`` (aware), NREL SPA via pvlib."""
    import pandas as pd
    from pvlib.solarposition import nrel_earthsun_distance

    return float(nrel_earthsun_distance(pd.DatetimeIndex([pd.Timestamp(time)])).iloc[0])


def sun_position(time: datetime, lon: float, lat: float) -> tuple[float, float]:
    """Sun (elevation, azimuth) in degrees seen from (lon, lat) at ``time`` (aware).

    Geometric elevation (no refraction), azimuth clockwise from north; NREL SPA via pvlib.
    """
    import pandas as pd
    from pvlib.solarposition import get_solarposition

    pos = get_solarposition(pd.DatetimeIndex([pd.Timestamp(time)]), lat, lon)
    return float(pos["elevation"].iloc[0]), float(pos["azimuth"].iloc[0])


def _sun_elevation(acq: Acquisition) -> float:
    if acq.sun_elevation is not None:
        return acq.sun_elevation
    if not acq.footprint:
        raise InputError(
            f"{acq.path.name}: no sun elevation and no footprint in its metadata; "
            "inputs.calibration: reflectance needs one — use radiance"
        )
    return sun_position(acq.time, *footprint_centre(acq.footprint))[0]


Table = dict[str, dict[int, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]]]


def _setting(values: Any) -> str:
    """An IntegrationTime setting as the table keys it: ``"6,30,20,30,30"``."""
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    return ",".join(f"{float(v):g}" for v in values)


def load_calibration_table(path: Path) -> Table:
    """Read a calibration table (module docstring) into sensor → year → setting → (gain, bias).

    Raises
    ------
    ConfigError
        The file is missing, not YAML, or not shaped as documented.
    """
    import yaml

    where = f"inputs.calibration_table: {path}"
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: cannot read it ({exc}); fix the path or the YAML") from None
    table: Table = {}
    try:
        for sensor, years in data.items():
            for year, settings in years.items():
                for setting, entry in settings.items():
                    gain = tuple(float(v) for v in entry["gain"])
                    bias = tuple(float(v) for v in entry["bias"])
                    if len(gain) != len(bias):
                        raise ValueError(f"{sensor} {year} {setting}: gain and bias lengths differ")
                    table.setdefault(str(sensor).upper(), {}).setdefault(int(year), {})[
                        _setting(setting)
                    ] = (gain, bias)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f'{where}: expected SENSOR: YEAR: "IntegrationTime": {{gain: [...], bias: [...]}} '
            f"({exc}); see pipeline.inputs.radiometry"
        ) from None
    return table


def _coefficients(acq: Acquisition, table: Table) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (gain, bias) of an acquisition's year and integration setting."""
    setting = _setting(acq.integration_time or ())
    year = acq.time.year
    entry = table.get(acq.sensor, {}).get(year, {}).get(setting)
    if entry is None:
        raise InputError(
            f"{acq.path.name}: inputs.calibration_table has no {acq.sensor} coefficients for "
            f"{year}, IntegrationTime {setting or '(none)'}; add CRESDA's published values or "
            "set inputs.calibration: dn"
        )
    if len(entry[0]) != len(acq.bands):
        raise InputError(
            f"{acq.path.name}: inputs.calibration_table lists {len(entry[0])} gains for "
            f"{acq.sensor} {year} {setting}, the image has {len(acq.bands)} bands; fix the table"
        )
    return entry


def calibrate(
    acqs: Sequence[Acquisition], calibration: str, table_path: Path | None = None
) -> list[Acquisition]:
    """Set each date's DN → value mapping for ``calibration``.

    Parameters
    ----------
    acqs
        The series, already scaled (``max_dn`` final).
    calibration
        ``"dn"``, ``"radiance"`` or ``"reflectance"``.
    table_path
        The calibration table (needed unless ``calibration`` is ``"dn"``).

    Returns
    -------
    list of Acquisition
        The dates with ``calibration`` set, and ``scale``/``offset`` unless it is ``dn``.

    Raises
    ------
    ConfigError
        Unknown calibration, or reflectance of a band without a solar irradiance (IRS).
        Also: no calibration table for radiance or reflectance, or an unreadable one.
    InputError
        The table has no coefficients for a date's year and setting, or (reflectance) a date
        has no sun elevation and no footprint.
    """
    acqs = list(acqs)
    if calibration not in CALIBRATIONS:
        raise ConfigError(
            f"inputs.calibration: {calibration!r} is not one of "
            f"{', '.join(map(repr, CALIBRATIONS))}"
        )
    bands = acqs[0].bands if acqs else ()
    if calibration == "dn":
        return acqs
    if table_path is None:
        raise ConfigError(
            f"inputs.calibration: {calibration!r} needs inputs.calibration_table (CRESDA's "
            "published Gain/Bias; GF-4 products do not carry them) — set it or use dn"
        )
    table = load_calibration_table(table_path)
    if calibration == "reflectance":
        unknown = [b for b in bands if b not in PMS_BAND_EDGES_UM]
        if unknown:
            raise ConfigError(
                f"inputs.calibration: reflectance is undefined for band {unknown[0]} (the IRS "
                "mid-infrared band is dominated by thermal emission); use radiance or dn"
            )
        out = []
        for a in acqs:
            gain, bias = _coefficients(a, table)
            d = earth_sun_distance(a.time)
            sin_e = math.sin(math.radians(_sun_elevation(a)))
            k = [math.pi * d * d / (esun(b) * sin_e) for b in bands]
            out.append(
                replace(
                    a,
                    calibration="reflectance",
                    scale=tuple(g * kb for g, kb in zip(gain, k, strict=True)),
                    offset=tuple(o * kb for o, kb in zip(bias, k, strict=True)),
                )
            )
        return out
    coefs = [_coefficients(a, table) for a in acqs]
    l_ref = tuple(
        max(g[i] * a.max_dn + o[i] for a, (g, o) in zip(acqs, coefs, strict=True))
        for i in range(len(bands))
    )
    out = [
        replace(
            a,
            calibration="radiance",
            physical_scale=l_ref,
            scale=tuple(gi / r for gi, r in zip(g, l_ref, strict=True)),
            offset=tuple(oi / r for oi, r in zip(o, l_ref, strict=True)),
        )
        for a, (g, o) in zip(acqs, coefs, strict=True)
    ]
    return out


def value_meaning(acqs: Sequence[Acquisition]) -> tuple[str, str, tuple[float, ...]]:
    """What the series' values are: (calibration, units, physical scale per band).

    Physical quantity = value × physical scale: 1 for DN fractions and reflectance, ``L_ref``
    (W m⁻² sr⁻¹ µm⁻¹) per band for radiance.
    """
    first = acqs[0]
    units = RADIANCE_UNITS if first.calibration == "radiance" else ""
    return first.calibration, units, first.physical_scale or (1.0,) * len(first.bands)
