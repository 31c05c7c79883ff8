"""Archive reprocessing: scan an archive of GF-4 products, group them into scene series, run
each series once, and publish a STAC catalog of the results.

``python -m pipeline batch ARCHIVE_CONFIG`` is meant to run on a schedule. Each run:

1. **scans** the archive roots for products (directories or ``.tar.gz``) and reads each
   product's metadata XML for the exact time and footprint, caching what it read from archives
   (:mod:`pipeline.batch.scan`);
2. **groups** products into series: same sensor, same time window (windows of
   ``grouping.window_days`` days counted from ``grouping.window_origin``, so a new product can
   only ever change the series of its own window), and footprints that overlap the series'
   first footprint by at least ``grouping.min_overlap`` (:mod:`pipeline.batch.series`);
3. gives each series a **deterministic id** (a hash of its sensor and sorted image ids) and
   its own folder ``OUTPUT/series/<id>/``, and skips it when its manifest (``series.json``:
   products with file sizes and times, configuration hash, code version) says it is already
   done (:mod:`pipeline.batch.manifest`). Series that need work run one after another, through
   :func:`pipeline.run.run`, on **one** cluster started once for the batch (runs connect to it
   by address); a failed series is reported and the others go on (:mod:`pipeline.batch.run`,
   reported in a :class:`BatchSummary`, :mod:`pipeline.batch.summary`);
4. **publishes** a STAC catalog of every completed series under ``OUTPUT/stac/``
   (:mod:`pipeline.batch.stac`, imported only when a catalog is written: it needs pystac).

Output layout::

    OUTPUT/series/<id>/       one pipeline.run output (cube.zarr, cog/, quicklooks/, ...)
    OUTPUT/series/<id>/series.json   the manifest, written last, only after a clean run
    OUTPUT/stac/catalog.json  the catalog, replaced as a whole on every batch
    OUTPUT/.batch/            scan cache and the lock that keeps two batches apart

Typical use (what the ``batch`` subcommand does)::

    summary = run_batch(load_archive_config(path), force=False, dry_run=False)
    print(summary.describe())
"""

from pipeline.batch.config import (
    ArchiveConfig,
    ArchiveSection,
    GroupingSection,
    OutputSection,
    RunTemplate,
    SeriesInputs,
    SeriesOutput,
    load_archive_config,
)
from pipeline.batch.manifest import MANIFEST_NAME, MANIFEST_VERSION, read_manifest
from pipeline.batch.run import Plan, plan_batch, run_batch, series_config
from pipeline.batch.scan import Product, ScanResult, scan_archive
from pipeline.batch.series import Series, group_products, series_id
from pipeline.batch.summary import BatchSummary, SeriesOutcome

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "ArchiveConfig",
    "ArchiveSection",
    "BatchSummary",
    "GroupingSection",
    "OutputSection",
    "Plan",
    "Product",
    "RunTemplate",
    "ScanResult",
    "Series",
    "SeriesInputs",
    "SeriesOutcome",
    "SeriesOutput",
    "group_products",
    "load_archive_config",
    "plan_batch",
    "read_manifest",
    "run_batch",
    "scan_archive",
    "series_config",
    "series_id",
]
