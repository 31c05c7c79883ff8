"""GF-4 metadata parsing, product names and archive extraction."""

from __future__ import annotations

import re
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.inputs.gf4_product import (
    extract_archive,
    find_product_files,
    parse_metadata,
    parse_product_name,
)
from pipeline.inputs.synthetic import SimulatedProducts

# Laid out as CRESDA writes GF-4 L1A metadata (checked against real PMS and IRS XML of 2021, 2022
# and 2025 products; values here are made up): declaration with a space before "?>", flat tags
# indented by 4, empty tags self-closed, <SensorID> PMI for either sensor, Beijing-time stamps,
# 10 valid bits in 16, integration times in milliseconds, elevations under the *Zenith tags.
XML = """<?xml version="1.0" encoding="UTF-8" ?>
<ProductMetaData>
    <SatelliteID>GF4</SatelliteID>
    <SensorID>PMI</SensorID>
    <ReceiveTime>2017-03-01 05:00:00</ReceiveTime>
    <ProductID>123456</ProductID>
    <ProductLevel>LEVEL1A</ProductLevel>
    <ProductQuality />
    <Bands>1,2,3,4,5</Bands>
    <StartTime>2017-03-01 05:00:00</StartTime>
    <EndTime>2017-03-01 05:00:00</EndTime>
    <CenterTime>2017-03-01 05:00:00</CenterTime>
    <ImageGSD>50</ImageGSD>
    <WidthInPixels>10240</WidthInPixels>
    <HeightInPixels>10240</HeightInPixels>
    <CloudPercent>12</CloudPercent>
    <QualityInfo></QualityInfo>
    <PixelBits>16</PixelBits>
    <ValidPixelBits>10</ValidPixelBits>
    <SolarAzimuth>160.2</SolarAzimuth>
    <SolarZenith>48.5</SolarZenith>
    <SatelliteAzimuth>195.0</SatelliteAzimuth>
    <SatelliteZenith>47.9</SatelliteZenith>
    <GainMode />
    <Gain>6.86400,4.59800,5.22300,6.37500,8.68100</Gain>
    <Bias>2.98600,4.14000,1.43900,3.60500,0.33100</Bias>
    <IntegrationTime>6,30,20,30,30</IntegrationTime>
    <TopLeftLatitude>42.1</TopLeftLatitude>
    <TopLeftLongitude>113.2</TopLeftLongitude>
    <TopRightLatitude>42.3</TopRightLatitude>
    <TopRightLongitude>119.6</TopRightLongitude>
    <BottomRightLatitude>37.6</BottomRightLatitude>
    <BottomRightLongitude>119.9</BottomRightLongitude>
    <BottomLeftLatitude>37.4</BottomLeftLatitude>
    <BottomLeftLongitude>113.6</BottomLeftLongitude>
    <TopLeftMapX />
    <SomeVendorTag>ignored</SomeVendorTag>
</ProductMetaData>
"""
NAME = "GF4_PMS_E116.4_N39.9_20170301_L1A0000123456"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / f"{NAME}.xml"
    path.write_text(text)
    return path


def test_parse_metadata_reads_all_documented_tags(tmp_path: Path) -> None:
    meta = parse_metadata(_write(tmp_path, XML))
    assert meta.sensor_id == "PMI"  # the camera; the sensor is the file name's
    assert meta.satellite_id == "GF4"
    assert meta.product_id == "123456"
    # 05:00 Beijing time is 21:00 UTC of the day before.
    assert meta.center_time == datetime(2017, 2, 28, 21, 0, 0, tzinfo=UTC)
    assert meta.start_time == meta.center_time
    assert meta.bands == ("B1", "B2", "B3", "B4", "B5")
    assert meta.integration_time == (6.0, 30.0, 20.0, 30.0, 30.0)
    assert (meta.pixel_bits, meta.valid_pixel_bits) == (16, 10)
    assert meta.gain == (6.864, 4.598, 5.223, 6.375, 8.681)
    assert meta.bias == (2.986, 4.14, 1.439, 3.605, 0.331)
    assert (meta.sun_elevation, meta.satellite_elevation) == (48.5, 47.9)
    assert meta.image_gsd == 50.0
    assert (meta.width, meta.height) == (10240, 10240)
    assert meta.footprint == ((113.2, 42.1), (119.6, 42.3), (119.9, 37.6), (113.6, 37.4))
    assert meta.cloud_percent == 12.0
    assert meta.satellite_azimuth == 195.0


@pytest.mark.parametrize(
    "tag", ["CenterTime", "Bands", "WidthInPixels", "HeightInPixels", "SensorID"]
)
def test_missing_required_tag_names_file_and_tag(tmp_path: Path, tag: str) -> None:
    text = re.sub(rf"\s*<{tag}>.*?</{tag}>", "", XML)
    with pytest.raises(InputError) as info:
        parse_metadata(_write(tmp_path, text))
    message = str(info.value)
    assert f"{NAME}.xml" in message
    assert f"<{tag}>" in message
    assert "\n" not in message


def test_optional_tags_may_be_missing(tmp_path: Path) -> None:
    text = re.sub(
        r"\s*<(TopLeftLatitude|ImageGSD|IntegrationTime|ValidPixelBits|Gain)>.*?</\1>", "", XML
    )
    meta = parse_metadata(_write(tmp_path, text))
    assert meta.footprint is None
    assert meta.image_gsd is None
    assert meta.integration_time is None
    assert meta.valid_pixel_bits is None and meta.gain is None


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("<WidthInPixels>10240", "<WidthInPixels>wide", "WidthInPixels"),
        ("<CenterTime>2017-03-01 05:00:00", "<CenterTime>01/03/2017", "CenterTime"),
        ("<CenterTime>2017-03-01 05:00:00", "<CenterTime>2017-03-01 25:61:00", "CenterTime"),
        ("<ProductMetaData>", "<Other>", "ProductMetaData"),
        ("<SensorID>PMI", "<SensorID>WFV", "SensorID"),
        ("<SatelliteID>GF4", "<SatelliteID>GF1", "SatelliteID"),
        ("<IntegrationTime>6,30,20,30,30", "<IntegrationTime>6,30", "IntegrationTime"),
        ("<ValidPixelBits>10", "<ValidPixelBits>17", "ValidPixelBits"),
    ],
)
def test_bad_values_are_input_errors(tmp_path: Path, old: str, new: str, expect: str) -> None:
    text = XML.replace(old, new)
    if new == "<Other>":
        text = text.replace("</ProductMetaData>", "</Other>")
    with pytest.raises(InputError, match=expect) as info:
        parse_metadata(_write(tmp_path, text))
    assert f"{NAME}.xml" in str(info.value) and "\n" not in str(info.value)


def test_irs_band_is_not_pms_b1(tmp_path: Path) -> None:
    # Real IRS metadata lists its one band as "1", like the PMS pan band.
    irs = tmp_path / f"{NAME.replace('PMS', 'IRS')}.xml"
    irs.write_text(
        XML.replace("<Bands>1,2,3,4,5", "<Bands>1")
        .replace("6.86400,4.59800,5.22300,6.37500,8.68100", "280.59")
        .replace("2.98600,4.14000,1.43900,3.60500,0.33100", "873.21")
        .replace("6,30,20,30,30", "15")
    )
    meta = parse_metadata(irs)
    assert meta.bands == ("IRS1",) and meta.integration_time == (15.0,)


def test_unreadable_xml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"{NAME}.xml: metadata is not readable XML"):
        parse_metadata(_write(tmp_path, XML[:200]))


def test_parse_product_name() -> None:
    name = parse_product_name(f"{NAME.replace('PMS', 'PMI')}.tar.gz")
    assert name is not None
    assert (name.kind, name.lon, name.lat, name.date, name.product_id) == (
        "PMI",
        116.4,
        39.9,
        "20170301",
        "0000123456",
    )
    south = parse_product_name("GF4_IRS_W70.5_S33.4_20170301_L1A0000000001")
    assert south is not None and (south.lon, south.lat) == (-70.5, -33.4)
    assert parse_product_name("GF4_PMS_E116_N39_2017_L1A1") is None


def test_find_product_files_in_simulated_product(gf4_products: SimulatedProducts) -> None:
    files = find_product_files(gf4_products.paths[0], "PMS")
    assert files is not None
    assert files.tiff.name == gf4_products.paths[0].name.replace("PMI", "PMS") + ".tiff"
    assert files.rpb is not None and files.rpb.suffix == ".rpb"
    irs = find_product_files(gf4_products.paths[0], "IRS")  # a PMI product holds both
    assert irs is not None and irs.tiff.name.startswith("GF4_IRS_")


def test_extraction_is_reused_and_redone_when_archive_changes(
    gf4_pmi_archives: SimulatedProducts, tmp_path: Path
) -> None:
    archive = gf4_pmi_archives.paths[0]
    first = extract_archive(archive, tmp_path)
    tiff = next(first.glob("GF4_PMS_*.tiff"))
    inode = tiff.stat().st_ino
    again = extract_archive(archive, tmp_path)
    assert again == first
    assert tiff.stat().st_ino == inode  # not extracted a second time
    # Only the final directory remains: no temporary extraction left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]

    copy = tmp_path / "copies" / archive.name
    copy.parent.mkdir()
    copy.write_bytes(archive.read_bytes())
    out = tmp_path / "out"
    extract_archive(copy, out)
    (out / first.name / "stray.txt").write_text("left from an older download")
    copy.write_bytes(archive.read_bytes() + b"\0" * 1024)  # replaced: size differs
    redone = extract_archive(copy, out)
    assert not (redone / "stray.txt").exists()


def test_truncated_archive_is_input_error(
    gf4_pmi_archives: SimulatedProducts, tmp_path: Path
) -> None:
    data = gf4_pmi_archives.paths[0].read_bytes()
    broken = tmp_path / gf4_pmi_archives.paths[0].name
    broken.write_bytes(data[: len(data) // 2])
    out = tmp_path / "extract"
    with pytest.raises(InputError, match=rf"{re.escape(broken.name)}: archive is truncated"):
        extract_archive(broken, out)
    assert list(out.iterdir()) == []


def test_unsafe_archive_member_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / f"{NAME}.tar.gz"
    payload = tmp_path / "payload.txt"
    payload.write_text("x")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(payload, arcname="../escaped.txt")
    with pytest.raises(InputError, match="unsafe member"):
        extract_archive(evil, tmp_path / "extract")
    assert not (tmp_path / "escaped.txt").exists()
