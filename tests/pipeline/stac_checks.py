"""STAC validation for tests: stac-validator (core + every extension the objects declare)
against the JSON schemas vendored in ``tests/data/stac-schemas`` (mapped by URL); with the
``offline`` fixture (tests/pipeline/conftest.py) the network is cut off while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The JSON schemas the catalogs declare, vendored (tests/data/stac-schemas/README.md): each
#: file lives under its URL's host and path, so the map is URL -> file.
SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "stac-schemas"


def _schema_map() -> dict[str, str]:
    return {f"https://{p.relative_to(SCHEMAS).as_posix()}": str(p) for p in SCHEMAS.rglob("*.json")}


def stac_validate(path: Path) -> list[dict[str, Any]]:
    """stac-validator, recursive from ``path``, against the vendored schemas only; its message
    per STAC object."""
    from stac_validator.validate import StacValidate

    validator = StacValidate(str(path), recursive=True, schema_map=_schema_map())
    validator.run()
    return list(validator.message)
