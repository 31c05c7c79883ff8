"""The real-cloud experiment: solvers and baselines scored on real clouds with a reference mask.

Per series (a date window of the bundled Landsat series) and band, D is pixels × dates in
[0, 1] (:mod:`cloudlab.realdata`), solved in memory with :func:`cloudcore.decompose`, one
solve at a time, with the configured dtype (float64 by default). Three scores:

* **prediction** (``prediction.csv``): for each chosen (clear target, cloudy source) pair the
  source's cloud and shadow pixels are pasted onto the target (:mod:`cloudlab.realpaste`),
  the series is solved, and the target's ground is scored against its true clear values on
  the pasted pixels: r = ‖out − truth‖_F / ‖truth‖_F, also on the cloud and the shadow pixels
  alone. Baselines (:data:`~cloudlab.realpaste.BASELINES`) are scored the same way;
* **fidelity** (``fidelity.csv``): r between each estimate of the unmodified series and the
  observation on the entries the reference calls clear, every date;
* **mask agreement** (``mask.csv``): :func:`cloudcore.classify` of the unmodified series'
  decompositions (all bands together) against the reference mask: precision, recall and F1 of
  cloud, of cloud-or-haze and of shadow, per date and overall.

``report.md`` holds the tables (:mod:`cloudlab.realreport`), ``scores.json`` the means.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import cloudcore
from cloudcore._growth import growth
from cloudcore.kept import keep_clear
from cloudlab.realconfig import RealCloudsConfig, SolverEntry
from cloudlab.realdata import CLOUD, SHADOW, RealSeries, load_real_series
from cloudlab.realpaste import (
    BASELINES,
    choose_pairs,
    cloudy_fraction,
    paste_clouds,
    without_source,
)
from cloudlab.realreport import summary_json, write_real_report
from cloudlab.realscores import agreement_per_date, relative_error
from pipeline.config import SolverConfig
from pipeline.solve.tile import solve_matrix, solver_lambda

__all__ = [
    "MASK_CLASSES",
    "RealCloudsResult",
    "config_pairs",
    "run_real_clouds",
    "solve",
]

log = logging.getLogger(__name__)

#: Mask classes scored: name -> (reference codes, predicted codes of cloudcore.classify).
MASK_CLASSES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "cloud": ((CLOUD,), (2,)),
    "cloud+haze": ((CLOUD,), (1, 2)),
    "shadow": ((SHADOW,), (3,)),
}


@dataclass(frozen=True)
class RealCloudsResult:
    """What :func:`run_real_clouds` wrote, and how long it took."""

    output: Path
    report: Path | None
    pairs: int
    solves: int
    seconds: float
    mask_note: str


def solve(
    D: np.ndarray,
    observed: np.ndarray,
    entry: SolverEntry,
    cfg: RealCloudsConfig,
    frame: tuple[int, int],
) -> cloudcore.Decomposition:
    """A series matrix solved as the pipeline solves a tile
    (:func:`pipeline.solve.tile.solve_matrix`) with the entry's method, λ rule and refinement and
    the experiment's ``solver`` settings.

    Parameters
    ----------
    D
        ``(pixels, dates)``, NaN where not observed.
    observed
        Boolean mask of the observed entries.
    entry
        Method, λ rule (``star``: λ̂*(d, n), ``auto``: 1/√d, or the number) and refinement.
    cfg
        The experiment (its ``solver`` settings).
    frame
        (rows, cols) of one image (the refinement cleans its flags per image).

    Returns
    -------
    cloudcore.Decomposition
    """
    settings = cfg.solver
    # This experiment's figures (docs/REAL-CLOUDS.md, "The first real-cloud experiment") were
    # measured at the paper's growth of μ, before the pipeline's became 2: a study's, else that
    # (cloudcore's own, growth()).
    rho = growth()
    solver = SolverConfig.model_validate(
        {**entry.model_dump(), **settings.model_dump(), "rho": rho}  # method, λ; beta, tol, ...
    )
    data = np.where(observed, D, 0.0).astype(settings.dtype)
    lam = solver_lambda(solver, *D.shape)
    return solve_matrix(data, observed, solver, frame, lam, threads=1)


def _band_indices(cfg: RealCloudsConfig, series: RealSeries) -> list[int]:
    if cfg.bands is None:
        return list(range(len(series.bands)))
    unknown = [b for b in cfg.bands if b not in series.bands]
    if unknown:
        from pipeline.errors import ConfigError

        raise ConfigError(f"bands: {unknown} not in the data's bands {list(series.bands)}")
    return [series.bands.index(b) for b in cfg.bands]


def config_pairs(cfg: RealCloudsConfig, reference: np.ndarray) -> list[tuple[int, int]]:
    """The (target, source) date pairs of one series by the config's ``pairs`` settings and
    seed (:func:`~cloudlab.realpaste.choose_pairs`); ``reference`` is (pixels, dates)."""
    return choose_pairs(
        reference,
        clear_max=cfg.pairs.clear_max,
        min_observed=cfg.pairs.min_observed,
        cloudy_min=cfg.pairs.cloudy_min,
        cloudy_max=cfg.pairs.cloudy_max,
        count=cfg.pairs.per_series,
        seed=cfg.seed,
    )


def _series_rows(
    cfg: RealCloudsConfig, name: str, series: RealSeries, bands: list[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Prediction, fidelity, mask and pair rows of one series."""
    n = series.dates.size
    days = series.dates.astype(np.int64)
    reference = series.reference.reshape(n, -1).T
    pairs = config_pairs(cfg, reference)
    cloudy, _ = cloudy_fraction(reference)
    log.info("series %s: %d dates, %d pairs", name, n, len(pairs))
    pair_rows = [
        {
            "series": name,
            "target": str(series.dates[t]),
            "source": str(series.dates[s]),
            "target_cloudy": float(cloudy[t]),
            "source_cloud": float(np.mean(reference[:, s] == CLOUD)),
            "source_shadow": float(np.mean(reference[:, s] == SHADOW)),
        }
        for t, s in pairs
    ]
    pred: list[dict[str, Any]] = []
    fid: list[dict[str, Any]] = []
    masks: list[dict[str, Any]] = []
    clear = reference == 0
    # Without the whiteness test (mask.white): this experiment's bands are a user's selection in
    # any order, and its figures (docs/REAL-CLOUDS.md, the first experiment) were made without it.
    rule = cloudcore.MaskRule(
        **{
            "white": 0.0,
            "white_cloud": 0.0,
            "shadow_near": 0.0,
            "persist": 0.0,
            **cfg.mask.overrides(),
        }
    )
    matrices = [series.matrix(b) for b in bands]  # (D, observed) of each band
    for entry in cfg.solvers:
        results = []
        for b, (D, observed) in zip(bands, matrices, strict=True):
            started = time.perf_counter()
            res = solve(D, observed, entry, cfg, series.frame)
            results.append(res)
            fid.append(
                {
                    "series": name,
                    "band": series.bands[b],
                    "estimator": entry.label,
                    "r_clear": relative_error(res.ground, D, clear & observed),
                    "lam": res.lam,
                    "iterations": res.iterations,
                    "converged": res.converged,
                    "seconds": time.perf_counter() - started,
                }
            )
        if cfg.mask.enabled:
            observed_all = series.observed.reshape(n, -1).T  # one for all bands
            codes = cloudcore.classify_result(results, series.frame, rule, observed_all)
            masks += _mask_rows(name, entry.label, series, codes)
            said_clear = _said_clear(codes)
            for row, (D, observed), res in zip(fid[-len(bands) :], matrices, results, strict=True):
                kept, _ = keep_clear(res.ground, D, said_clear)
                row["r_clear_keep"] = relative_error(kept, D, clear & observed)
    for base in cfg.baselines:
        for b, (D, observed) in zip(bands, matrices, strict=True):
            est = BASELINES[base](D, reference, days)
            fid.append(
                {
                    "series": name,
                    "band": series.bands[b],
                    "estimator": base,
                    "r_clear": relative_error(est, D, clear & observed),
                }
            )
    for t, s in pairs:
        for protocol in cfg.pairs.protocols:
            pred += _pair_rows(cfg, name, series, bands, matrices, (t, s), protocol, rule)
    return pred, fid, masks, pair_rows


def _said_clear(codes: np.ndarray) -> np.ndarray:
    """``(pixels, dates)``: where the ``(dates, rows, cols)`` mask codes say clear."""
    return codes.reshape(codes.shape[0], -1).T == cloudcore.masks.CLEAR


def _pair_rows(
    cfg: RealCloudsConfig,
    name: str,
    series: RealSeries,
    bands: list[int],
    matrices: list[tuple[np.ndarray, np.ndarray]],
    pair: tuple[int, int],
    protocol: str,
    rule: cloudcore.MaskRule,
) -> list[dict[str, Any]]:
    """Prediction rows of one (target, source) pair under one protocol: every solver (and, with
    the mask on, every solver with ``keep_clear``), then every baseline, per band.
    ``matrices`` are the bands' (D, observed)."""
    t, s = pair
    n = series.dates.size
    reference = series.reference.reshape(n, -1).T
    source_ref = reference[:, s]
    pasted = []
    for D, _ in matrices:
        one = paste_clouds(D, reference, t, s)
        keep = np.arange(n)
        if protocol == "drop-source":
            one, keep = without_source(one)
        pasted.append(one)
    days = series.dates.astype(np.int64)[keep]
    frame = series.frame
    common = [
        {
            "series": name,
            "protocol": protocol,
            "band": series.bands[b],
            "target": str(series.dates[t]),
            "source": str(series.dates[s]),
            "dates": int(keep.size),
            "pixels": int(p.scored.sum()),
            "cloud_pixels": int((p.scored & (source_ref == CLOUD)).sum()),
            "shadow_pixels": int((p.scored & (source_ref == SHADOW)).sum()),
        }
        for b, p in zip(bands, pasted, strict=True)
    ]
    target = pasted[0].target
    rows: list[dict[str, Any]] = []
    for entry in cfg.solvers:
        results, seconds = [], []
        for p in pasted:
            started = time.perf_counter()
            results.append(solve(p.D, p.observed, entry, cfg, frame))
            seconds.append(time.perf_counter() - started)
        codes = (
            cloudcore.classify_result(results, frame, rule, pasted[0].observed)
            if cfg.mask.enabled
            else None
        )
        said_clear = _said_clear(codes) if codes is not None else None
        for c, p, res, sec in zip(common, pasted, results, seconds, strict=True):
            row = _scored(c, entry.label, res.ground[:, target], p, source_ref)
            row.update(lam=res.lam, iterations=res.iterations, converged=res.converged, seconds=sec)
            rows.append(row)
            if said_clear is not None:
                kept, _ = keep_clear(res.ground, p.D, said_clear)
                rows.append(_scored(c, entry.label + " keep-clear", kept[:, target], p, source_ref))
    for base in cfg.baselines:
        for c, p in zip(common, pasted, strict=True):
            est = BASELINES[base](p.D, p.reference, days)[:, target]
            rows.append(_scored(c, base, est, p, source_ref))
    return rows


def _scored(
    common: dict[str, Any], label: str, estimate: np.ndarray, pasted: Any, source_ref: np.ndarray
) -> dict[str, Any]:
    """A prediction row: r on the pasted pixels, on their cloud part and their shadow part, and
    the bias: mean estimate / mean truth − 1 on the pasted pixels."""
    scored = pasted.scored
    return {
        **common,
        "estimator": label,
        "r": relative_error(estimate, pasted.truth, scored),
        "bias": float(np.nanmean(estimate[scored]) / np.mean(pasted.truth[scored]) - 1.0),
        "r_cloud": relative_error(estimate, pasted.truth, pasted.scored & (source_ref == CLOUD)),
        "r_shadow": relative_error(estimate, pasted.truth, pasted.scored & (source_ref == SHADOW)),
    }


def _mask_rows(
    name: str, label: str, series: RealSeries, codes: np.ndarray
) -> list[dict[str, Any]]:
    """Per-date and overall agreement rows of one solver's predicted mask."""
    rows = []
    for cls, (ref_codes, pred_codes) in MASK_CLASSES.items():
        per_date = agreement_per_date(series.reference, codes, ref_codes, pred_codes)
        total = sum(per_date[1:], per_date[0])
        for date, agr in [*zip(series.dates.astype(str), per_date, strict=True), ("all", total)]:
            rows.append(
                {
                    "series": name,
                    "estimator": label,
                    "class": cls,
                    "date": date,
                    "tp": agr.tp,
                    "fp": agr.fp,
                    "fn": agr.fn,
                    "precision": agr.precision,
                    "recall": agr.recall,
                    "f1": agr.f1,
                }
            )
    return rows


def run_real_clouds(
    cfg: RealCloudsConfig, *, output: str | Path | None = None, report: bool = True
) -> RealCloudsResult:
    """Run the whole experiment of ``cfg`` in this process and write its tables.

    Parameters
    ----------
    cfg
        The validated configuration.
    output
        Output directory; default ``cfg.output``.
    report
        Also write ``report.md``.

    Returns
    -------
    RealCloudsResult
    """
    out = Path(output) if output is not None else cfg.output
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
    data = load_real_series(cfg.data_path)
    if cfg.crop is not None:
        data = data.crop(*cfg.crop)
    bands = _band_indices(cfg, data)
    mask_note = "" if cfg.mask.enabled else "mask agreement disabled"
    started = time.perf_counter()
    tables: dict[str, list[dict[str, Any]]] = {"prediction": [], "fidelity": [], "mask": []}
    tables["pairs"] = []
    for window in cfg.series:
        series = data.between(window.start, window.end)
        if cfg.drop_cloudy_above is not None:
            cloudy, _ = cloudy_fraction(series.reference.reshape(series.dates.size, -1).T)
            series = series.take(np.flatnonzero(cloudy <= cfg.drop_cloudy_above))
        if series.dates.size < 2:
            log.warning("series %s: %d date(s), skipped", window.name, series.dates.size)
            continue
        rows = _series_rows(cfg, window.name, series, bands)
        for key, part in zip(("prediction", "fidelity", "mask", "pairs"), rows, strict=True):
            tables[key] += part
    seconds = time.perf_counter() - started
    frames = {key: pd.DataFrame(rows) for key, rows in tables.items()}
    for key, frame in frames.items():
        frame.to_csv(out / f"{key}.csv", index=False)
    summary = summary_json(frames, cfg, seconds=seconds, mask_note=mask_note)
    (out / "scores.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    path = (
        write_real_report(out, frames, cfg, seconds=seconds, mask_note=mask_note)
        if report
        else None
    )
    solves = sum(
        int(f["iterations"].notna().sum())
        for f in (frames["fidelity"], frames["prediction"])
        if "iterations" in f
    )
    log.info(
        "real-clouds %s: %d pairs, %d solves in %.1f s -> %s",
        cfg.name,
        len(frames["pairs"]),
        solves,
        seconds,
        out,
    )
    return RealCloudsResult(out, path, len(frames["pairs"]), solves, seconds, mask_note)
