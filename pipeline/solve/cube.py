"""The cube under construction (``cube.zarr.partial``): opened, resumed or created for a plan,
before the solve writes into it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.ids import ALL_BANDS
from pipeline.inputs.radiometry import value_meaning
from pipeline.plan import RunPlan
from pipeline.store.cube import create_store, store_token
from pipeline.store.durable import remove_published
from pipeline.store.layout import MASK, PROVENANCE

__all__ = ["CUBE_TOKEN_ATTR", "open_cube"]

#: Attribute of cube.zarr holding the plan it was built for (:attr:`RunPlan.cube_token`).
CUBE_TOKEN_ATTR = "cloudremoval_cube_token"


def open_cube(plan: RunPlan) -> Path:
    """The cube under construction (``cube.zarr.partial``), with its blended bands kept.

    A partial cube of the same plan (:attr:`RunPlan.cube_token`) is resumed. So is the published
    cube of an earlier complete run of the same plan: it is moved back under the temporary name
    (``COMPLETE.json`` goes first), its bands stay blended and only the products are rebuilt.
    Anything else is replaced by an empty cube. The markers of row, seam and blended-band
    tasks vouch for data in the cube, so they are dropped with it, and the strips with them.

    Parameters
    ----------
    plan
        The run's plan.

    Returns
    -------
    Path
        The cube under construction.
    """
    layout = plan.layout
    cube_tmp = layout.cube_partial
    token = plan.cube_token
    if store_token(cube_tmp, CUBE_TOKEN_ATTR) == token:
        return cube_tmp
    if store_token(layout.cube, CUBE_TOKEN_ATTR) == token:
        remove_published(layout)
        shutil.rmtree(cube_tmp, ignore_errors=True)
        os.replace(layout.cube, cube_tmp)
        return cube_tmp
    for marker in layout.markers():
        if _writes_cube(marker.stem):
            marker.unlink()
    shutil.rmtree(layout.strips, ignore_errors=True)
    acqs, tiles, config = plan.acquisitions, plan.tiles, plan.config
    create_store(
        cube_tmp,
        plan.grid,
        times=[a.time for a in acqs],
        bands=plan.bands,
        variables=config.solver.layers,
        codes=(PROVENANCE,),
        date_codes=(MASK,),
        tile_size=tiles.tile_size,
        chunk_rows=tiles.cube_chunk_rows,
        attrs={
            CUBE_TOKEN_ATTR: token,
            "acquisitions": [a.id for a in acqs],
            "code_version": plan.version,
            # The cap and the floor as they took effect (left out in the configuration: per
            # method).
            "solver": config.solver.model_dump(mode="json")
            | {"cap_ground": config.solver.caps_ground, "floor_ground": config.solver.ground_floor},
            # As before keep_clear moved into the mask section: the same attributes.
            "mask": _mask_attrs(config, plan.white_band),
            "keep_clear": config.mask.keep_clear,
            "keep_haze": config.mask.keep_clear and config.mask.keep_haze,
            "tiling": {"tile_size": tiles.tile_size, "overlap": tiles.overlap},
            **_value_attrs(acqs),
        },
    )
    return cube_tmp


def _mask_attrs(config: Any, white_band: str | None) -> dict[str, Any]:
    """The mask's thresholds as the cube records them: as before ``grow``, ``keep_haze``,
    ``offset`` and ``white`` came (``grow`` only when set, ``offset`` only when applied,
    :attr:`pipeline.config.Config.applied_offset`, ``white`` with the band it read as the
    shortest, :attr:`pipeline.plan.RunPlan.white_band`, only when on; the later options only
    when on, :meth:`pipeline.config.MaskConfig.options_off`; ``keep_haze`` in an attribute of
    its own)."""
    mask = config.mask
    exclude = {"keep_clear", "keep_haze", "white_band"} | mask.options_off()
    exclude |= set() if config.applied_offset is not None else {"offset"}
    exclude |= set() if config.applied_interpolate else {"interpolate"}
    attrs = dict(mask.model_dump(mode="json", exclude=exclude))
    return attrs | ({"white_band": white_band} if white_band is not None else {})


def _value_attrs(acqs: Sequence[Any]) -> dict[str, Any]:
    """What the cube's values mean: physical quantity = value × physical_scale[band]."""
    calibration, units, physical = value_meaning(acqs)
    return {"calibration": calibration, "units": units, "physical_scale": list(physical)}


def _writes_cube(marker_id: str) -> bool:
    """Whether the marker is a row's, a seam's or a blended band's (not a staging marker)."""
    return not marker_id.startswith(f"{ALL_BANDS}-")
