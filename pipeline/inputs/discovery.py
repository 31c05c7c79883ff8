"""The acquisitions an ``inputs`` section describes, whatever its kind."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.config import InputsConfig, SimulatedInputs
from pipeline.inputs.acquisition import Acquisition
from pipeline.inputs.geotiff import discover_geotiffs
from pipeline.inputs.gf4 import discover_gf4
from pipeline.store.durable import read_json, write_json
from pipeline.store.layout import Layout

__all__ = ["discover", "simulated_before", "simulated_paths"]

log = logging.getLogger(__name__)


def _simulation_settings(inputs: SimulatedInputs) -> dict[str, Any]:
    return {
        "n_dates": inputs.n_dates,
        "size": inputs.size,
        "seed": inputs.seed,
        "sensor": inputs.sensor,
        "cloud_style": inputs.cloud_style,
        # 2: PMI products as CRESDA lays them out (both sensors), 10-bit DN, Beijing times.
        "format": 2,
    }


def simulated_before(inputs: SimulatedInputs, layout: Layout) -> list[str] | None:
    """The products of an earlier simulation with the same settings, or None if there is none."""
    record = read_json(layout.products / "simulation.json")
    if record is None or record.get("settings") != _simulation_settings(inputs):
        return None
    paths = [str(p) for p in record.get("paths", [])]
    return paths if paths and all(Path(p).exists() for p in paths) else None


def simulated_paths(inputs: SimulatedInputs, layout: Layout) -> list[str]:
    """Simulate the demo series once; reuse it while the simulation settings are unchanged."""
    before = simulated_before(inputs, layout)
    if before is not None:
        return before
    shutil.rmtree(layout.products, ignore_errors=True)
    layout.products.mkdir(parents=True, exist_ok=True)
    log.info(
        "simulating %d GF-4-like dates of %d px into %s",
        inputs.n_dates,
        inputs.size,
        layout.products,
    )
    # Imported here: the simulator (scikit-image, scipy) is for the demo only.
    from pipeline.inputs.synthetic import make_gf4_series

    settings = _simulation_settings(inputs)
    # Always PMI products, as delivered; the run reads the requested sensor from them.
    made = make_gf4_series(
        layout.products,
        n_dates=inputs.n_dates,
        size=inputs.size,
        seed=inputs.seed,
        cloud_style=inputs.cloud_style,
        sensor="PMI",
    )
    paths = [str(p) for p in made.paths]
    write_json(
        layout.products / "simulation.json",
        {"settings": settings, "paths": paths, "truth_path": str(made.truth_path)},
    )
    return paths


def discover(inputs: InputsConfig, layout: Layout) -> list[Acquisition]:
    """The acquisitions described by the ``inputs`` section, in time order."""
    if inputs.kind == "geotiff":
        times = None
        if inputs.dates is not None:
            times = [datetime(d.year, d.month, d.day, tzinfo=UTC) for d in inputs.dates]
        return discover_geotiffs(
            list(inputs.paths),
            times=times,
            date_pattern=inputs.date_pattern,
            max_dn=inputs.max_dn,
            dn_rule=inputs.dn_rule,
        )
    if inputs.kind == "stac":
        from pipeline.inputs.stac import discover_stac

        return discover_stac(inputs)
    if inputs.kind == "simulated":
        # Simulated products are directories: nothing to extract.
        paths, extract_dir = simulated_paths(inputs, layout), layout.extract
    else:
        paths, extract_dir = list(inputs.paths), inputs.extract_dir or layout.extract
    return discover_gf4(
        paths,
        sensor=inputs.sensor,
        extract_dir=extract_dir,
        max_dn=inputs.max_dn,
        dn_rule=inputs.dn_rule,
        calibration=inputs.calibration,
        calibration_table=inputs.calibration_table,
    )
