"""The data files in tests/data are present and are the ones SOURCES.md describes."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests.cloudcore.conftest import DATA, GOLDEN, TYROL

# A file row of the table in SOURCES.md: | `path` | sha256 | bytes |
_ROW = re.compile(r"^\| `(?P<path>[^`]+)` \| (?P<sha256>[0-9a-f]{64}) \| (?P<size>\d+) \|$")
LISTED = {
    m["path"]: (m["sha256"], int(m["size"]))
    for line in (DATA / "SOURCES.md").read_text(encoding="utf-8").splitlines()
    if (m := _ROW.match(line))
}


def test_every_data_file_is_listed_and_every_listed_file_is_there():
    on_disk = {
        p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file() and p.suffix != ".md"
    }
    assert on_disk == set(LISTED)
    assert {p.relative_to(DATA).as_posix() for p in GOLDEN} == {
        path for path in LISTED if path.startswith("golden/")
    }
    assert TYROL.relative_to(DATA).as_posix() in LISTED


@pytest.mark.parametrize("path", sorted(LISTED))
def test_data_file_matches_its_recorded_checksum(path):
    sha256, size = LISTED[path]
    data = (DATA / path).read_bytes()
    assert len(data) == size
    assert hashlib.sha256(data).hexdigest() == sha256
