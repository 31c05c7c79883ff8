"""What a provider's mask buys: the benchmark's sites run through ``inputs.kind: stac``.

For every site of the held-out benchmark and each of its (clear target, cloudy source) pairs
(the same pairs, protocol "drop-source": :mod:`cloudlab.heldout`), the pasted series is written
as a static STAC catalog of COGs (:func:`cloudlab.stac_site.write_stac_series`) with the site's
reference mask as the quality asset: the provider's mask (Fmask, SCL, CMASK) as the provider
shipped it, mapped to the benchmark's codes, and on the target the source's flags where its
clouds were pasted, as the provider would have flagged them. Then ``python -m pipeline run``'s
code (:func:`pipeline.run.run`) runs four times on it, with the defaults: blind, and with
``inputs.quality`` (cloud, shadow and no data left out of the solve and filled), its
``combine`` ``provider`` (their mask is the mask) and ``union`` (ours fills too); and blind
with ``solver.shadow_free_fill``. Scores, pooled
over bands, as the held-out benchmark's: prediction r on the pasted pixels that were clear,
fidelity r on the target's other reference-clear pixels (a NaN output counts as 0, an error),
each pooled over the site's pairs, the share of pasted pixels the output fills, and the
temporal median's r on the same series.

The quality asset *is* the reference the scores read: the mask's F1 is not scored here (it
would be 1 by construction); prediction and fidelity are what a provider's mask buys.
Values are written as DN = reflectance × 10000 (the sites' reflectance, clipped to [0, 1], as
the benchmark reads it) in uint16 with no data 65535, and read with ``max_dn: 10000``.
"""

from __future__ import annotations

import csv
import logging
import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.realdata import CLOUD, NODATA, SHADOW
from cloudlab.sites import load_site, site_names
from cloudlab.sitescore import (
    PastedPair,
    error_sums,
    pasted_pair,
    site_arrays,
    site_pairs,
)
from cloudlab.stac_site import write_stac_series

__all__ = ["run_provider"]

log = logging.getLogger(__name__)

#: DN of reflectance 1 in the catalogs written, and their no-data DN.
DN_SCALE, DN_NODATA = 10000, 65535
#: The runs: blind (no quality band), ``inputs.quality.combine`` provider and union, and blind
#: with ``solver.shadow_free_fill`` (the default's mask, a shadow model's ground where it fills).
RUNS = ("blind", "provider", "union", "shadow-free")


def _sums(tag: str, est: np.ndarray, pair: PastedPair) -> dict[str, float]:
    """The held-out benchmark's error sums of one estimate, named by ``tag``."""
    sums = error_sums(est, pair.truth, pair.scored, pair.clear)
    return {f"{tag}_{key}": value for key, value in sums.items()}


def _catalog(
    folder: Path, site: Any, D: np.ndarray, reference: np.ndarray, keep: np.ndarray
) -> Path:
    """The pasted series (bands, pixels, dates) as a STAC catalog with its quality asset."""
    s = site.series
    rows, cols = s.frame
    dates = [str(d) for d in s.dates[keep]]
    values = np.moveaxis(D, 2, 0).reshape(len(dates), D.shape[0], rows, cols)
    dn = np.where(np.isfinite(values), np.round(np.nan_to_num(values) * DN_SCALE), DN_NODATA)
    quality = reference.T.reshape(len(dates), rows, cols).astype(np.uint8)
    return write_stac_series(
        folder,
        values=dn.astype(np.uint16),
        dates=dates,
        bands=list(s.bands),
        crs=s.crs,
        transform=s.transform,
        nodata=DN_NODATA,
        scale=1.0 / DN_SCALE,
        quality=quality,
        quality_name="reference",
        name=site.name.replace("_", "-"),
    )


def _config(catalog: Path, bands: list[str], out: Path, address: str, tag: str) -> Any:
    """The pipeline's configuration of the run ``tag`` of :data:`RUNS` on the site's ``catalog``."""
    from pipeline.config import Config

    inputs: dict[str, Any] = {
        "kind": "stac",
        "catalog": str(catalog),
        "bands": bands,
        "max_dn": DN_SCALE,
    }
    if tag not in ("blind", "shadow-free"):
        inputs["quality"] = {
            "asset": "reference",
            "rule": "classes",
            "combine": tag,
            "cloud": [CLOUD],
            "shadow": [SHADOW],
            "nodata": [NODATA],
        }
    return Config.model_validate(
        {
            "inputs": inputs,
            "output": {"path": str(out), "quicklooks": False},
            "solver": {"shadow_free_fill": tag == "shadow-free"},
            "cluster": {"kind": "address", "address": address},
        }
    )


def _clear_cube(out: Path, target: int) -> np.ndarray:
    """The run's clear values of date ``target``, ``(bands, pixels)``."""
    import zarr

    clear = zarr.open_array(store=str(out / "cube.zarr"), path="clear", mode="r")
    frame = np.asarray(clear[target])
    return frame.reshape(frame.shape[0], -1).astype(np.float64)


def score_site(name: str, work: Path, address: str, pairs: int = 4, seed: int = 0) -> list[dict]:
    """Every run of :data:`RUNS` on every pair of one site."""
    from pipeline.run import run

    site = load_site(name)
    s = site.series
    D_all, reference, days = site_arrays(site)
    rows = []
    for k, (t, src) in enumerate(site_pairs(site, pairs, seed)):
        pair = pasted_pair(D_all, reference, t, src)
        kept = pair.kept(days, "drop-source")
        target = kept.target
        folder = work / name / f"pair{k}"
        shutil.rmtree(folder, ignore_errors=True)
        catalog = _catalog(folder / "catalog", site, kept.D, kept.reference, kept.keep)
        median = MULTIBAND_BASELINES["temporal-median"](kept.D, kept.reference, kept.days)
        median = median[:, :, target]
        row: dict[str, Any] = {"site": name, "pair": k, "target": t, "source": src}
        row.update(_sums("median", median, pair))
        for tag in RUNS:
            out = folder / tag
            started = time.perf_counter()
            run(_config(catalog, list(s.bands), out, address, tag))
            row[f"{tag}_seconds"] = round(time.perf_counter() - started, 1)
            est = _clear_cube(out, target)
            row.update(_sums(tag, est, pair))
            row[f"{tag}_filled"] = float(np.isfinite(est[:, pair.scored]).mean())
        rows.append(row)
        log.info("%s pair %d: %s", name, k, row)
    return rows


def run_provider(out: Path, sites: list[str] | None = None, pairs: int = 4) -> list[dict]:
    """Score every site; write ``provider.csv`` and ``provider.md`` under ``out``.

    Runs the pipeline on a LocalCluster of two single-threaded workers, started once.
    """
    from distributed import LocalCluster

    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        for name in sites or site_names():
            rows += score_site(name, out / "work", cluster.scheduler_address, pairs)
    with open(out / "provider.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "provider.md").write_text(table(rows))
    return rows


def _pooled(rows: list[dict], tag: str, score: str) -> float:
    num = sum(r[f"{tag}_{score}_num"] for r in rows)
    return math.sqrt(num / sum(r[f"{tag}_{score}_den"] for r in rows))


def table(rows: list[dict]) -> str:
    """Per site, r pooled over its pairs (markdown): prediction of each run and of the
    temporal median, fidelity of each run."""
    head = [
        "site",
        "pairs",
        *(f"{t} r" for t in RUNS),
        "median r",
        *(f"{t} fidelity" for t in RUNS),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    columns: list[list[float]] = []
    for name in dict.fromkeys(r["site"] for r in rows):
        mine = [r for r in rows if r["site"] == name]
        values = [_pooled(mine, t, "pred") for t in (*RUNS, "median")]
        values += [_pooled(mine, t, "fid") for t in RUNS]
        columns.append(values)
        lines.append(f"| {name} | {len(mine)} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    means = np.mean(columns, axis=0)
    lines.append("| mean of sites | | " + " | ".join(f"{v:.3f}" for v in means) + " |")
    return "\n".join(lines) + "\n"
