"""Publication: every product of a run moved into place under its final name, ``COMPLETE.json``
last."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

from pipeline.outputs.items import publish_run_catalog
from pipeline.plan import RunPlan
from pipeline.store.durable import publish_dir, remove_published, write_json

__all__ = ["publish"]


def publish(plan: RunPlan, cube_tmp: Path, finals: list[Path]) -> tuple[str, ...]:
    """Move every product into place; returns the published COGs and quicklooks.

    All products exist in full under temporary names. COMPLETE.json goes first and comes back
    last, so while it exists the published set is one run's, whole.

    Parameters
    ----------
    plan
        The run's plan.
    cube_tmp
        The finished cube under its temporary name.
    finals
        The final paths of the COGs and quicklooks
        (:attr:`pipeline.outputs.tasks.ProductTasks.finals`).

    Returns
    -------
    tuple of str
        The published COGs and quicklooks, sorted.
    """
    layout = plan.layout
    remove_published(layout)
    publish_dir(cube_tmp, layout.cube)
    publish_dir(layout.partial(layout.cog_dir), layout.cog_dir)
    if plan.config.output.quicklooks:
        publish_dir(layout.partial(layout.quicklook_dir), layout.quicklook_dir)
    elif layout.quicklook_dir.exists():
        # Quicklooks of an earlier run would show images this run did not produce.
        shutil.rmtree(layout.quicklook_dir)
    publish_dir(layout.partial(layout.diagnostics_csv), layout.diagnostics_csv)
    # The run's STAC Items describe the published COGs: written once they are in place, and
    # published (whole) before the completion record.
    publish_run_catalog(plan)
    products = sorted(str(p) for p in finals)
    write_json(
        layout.complete,
        {
            "completed": datetime.now().astimezone().isoformat(timespec="seconds"),
            "code_version": plan.version,
            "acquisitions": [a.id for a in plan.acquisitions],
            "tiles": len(plan.tiles),
            "bands": list(plan.bands),
            "products": [str(Path(p).relative_to(layout.root)) for p in products],
        },
    )
    return tuple(products)
