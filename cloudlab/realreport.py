"""Markdown tables and the JSON summary of a real-cloud experiment run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from cloudlab.realconfig import RealCloudsConfig
from cloudlab.tables import fmt, md_table

__all__ = ["markdown_table", "summary_json", "write_real_report"]


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A DataFrame as a Markdown table (index as the first column), floats to ``digits``.

    Parameters
    ----------
    frame
        The table.
    digits
        Decimals of float cells; NaN is written as ``–``.

    Returns
    -------
    str
    """

    def cell(value: Any) -> str:
        return fmt(value, digits) if isinstance(value, float) else str(value)

    head = [str(frame.index.name or ""), *map(str, frame.columns)]
    rows = [[str(key), *(cell(v) for v in row.tolist())] for key, row in frame.iterrows()]
    return md_table(head, rows)


def _order(cfg: RealCloudsConfig, keep_clear: bool = False) -> list[str]:
    """Estimators in the config's order: solvers (each followed by its ``keep-clear`` variant
    if asked), then baselines."""
    solvers = [s.label for s in cfg.solvers]
    if keep_clear:
        solvers = [label for s in solvers for label in (s, s + " keep-clear")]
    return solvers + list(cfg.baselines)


#: The keys of one prediction case.
_CASE = ["series", "band", "target", "source"]


def _prediction_tables(pred: pd.DataFrame, cfg: RealCloudsConfig) -> list[str]:
    order = [e for e in _order(cfg, keep_clear=True) if e in set(pred["estimator"])]
    lines = [
        "## Prediction under real clouds",
        "",
        "r = ‖out − truth‖_F / ‖truth‖_F of the target date on the pasted pixels, mean over "
        f"{len(pred.drop_duplicates(_CASE))} (pair, band) cases; `r_cloud`, `r_shadow`: on the "
        "pasted cloud / shadow pixels alone; `bias`: mean estimate / mean truth − 1 on the pasted "
        "pixels; `beats median`, `beats nearest`: share of cases "
        "with r below the temporal median's / the nearest clear date's. `keep-clear`: the "
        "estimate with the observation kept where the estimator's own mask says clear.",
        "",
    ]
    for protocol, part in pred.groupby("protocol", sort=False):
        overall = part.groupby("estimator")[["r", "r_cloud", "r_shadow", "bias"]].mean()
        per_band = part.pivot_table(index="estimator", columns="band", values="r", aggfunc="mean")
        overall = overall.join(per_band.add_prefix("r "))
        keyed = part.set_index(_CASE)
        beats = {"temporal-median": "beats median", "nearest-clear": "beats nearest"}
        for base, column in beats.items():
            ref = keyed[keyed["estimator"] == base]["r"]
            if len(ref):
                better = keyed["r"] < ref.reindex(keyed.index)
                overall[column] = better.groupby(keyed["estimator"]).mean()
        overall = overall.reindex(order)
        overall.index.name = "estimator"
        cells = part.pivot_table(
            index="estimator", columns=["series", "band"], values="r", aggfunc="mean"
        ).reindex(order)
        cells.columns = [f"{s} {b}" for s, b in cells.columns]
        cells.index.name = "estimator"
        lines += [
            f"### Protocol `{protocol}`",
            "",
            markdown_table(overall),
            "",
            "Per series and band (mean r over the series' pairs):",
            "",
            markdown_table(cells),
            "",
        ]
    return lines


def _fidelity_table(fid: pd.DataFrame, cfg: RealCloudsConfig) -> list[str]:
    order = [e for e in _order(cfg) if e in set(fid["estimator"])]
    table = fid.pivot_table(index="estimator", columns="band", values="r_clear", aggfunc="mean")
    table["mean"] = fid.groupby("estimator")["r_clear"].mean()
    if "r_clear_keep" in fid:
        table["mean, keep-clear"] = fid.groupby("estimator")["r_clear_keep"].mean()
    table = table.reindex(order)
    table.index.name = "estimator"
    return [
        "## Fidelity on reference-clear entries",
        "",
        "r between each estimate of the unmodified series and the observation, on the entries "
        "the reference calls clear (all dates), mean over series; `keep-clear`: with the "
        "observation kept where the solver's own mask says clear. `nearest-clear` returns a "
        "clear entry itself (0 by construction).",
        "",
        markdown_table(table),
        "",
    ]


def _pooled(masks: pd.DataFrame) -> pd.DataFrame:
    """Agreement counts summed over every date and series, per (estimator, class), with their
    precision, recall and F1."""
    pooled = masks[masks["date"] == "all"].groupby(["estimator", "class"])[["tp", "fp", "fn"]].sum()
    pooled["precision"] = pooled["tp"] / (pooled["tp"] + pooled["fp"])
    pooled["recall"] = pooled["tp"] / (pooled["tp"] + pooled["fn"])
    pooled["f1"] = 2 * pooled["tp"] / (2 * pooled["tp"] + pooled["fp"] + pooled["fn"])
    return pooled


def _mask_tables(masks: pd.DataFrame, cfg: RealCloudsConfig) -> list[str]:
    order = [s.label for s in cfg.solvers if s.label in set(masks["estimator"])]
    wide = _pooled(masks)[["precision", "recall", "f1"]].unstack("class")
    wide.columns = [f"{c} {m}" for m, c in wide.columns]
    classes = list(dict.fromkeys(masks["class"]))
    wide = wide[[f"{c} {m}" for c in classes for m in ("precision", "recall", "f1")]]
    wide = wide.reindex(order)
    wide.index.name = "solver"
    per_date = masks[(masks["date"] != "all") & (masks["class"] == "cloud")]
    f1 = per_date.groupby("estimator")["f1"].agg(["mean", "median"]).reindex(order)
    f1.columns = ["cloud F1 per date, mean", "median"]
    f1.index.name = "solver"
    return [
        "## Mask agreement",
        "",
        "`cloudcore.classify` of the unmodified series (all bands together) against the "
        "reference mask; counts pooled over all dates and series. Reference cloud = Fmask "
        "cloud, shadow = Fmask cloud shadow; predicted `cloud` = code 2, `cloud+haze` = codes "
        "1 or 2, `shadow` = code 3. Snow counts as neither.",
        "",
        markdown_table(wide, digits=3),
        "",
        "Per-date cloud F1 (dates whose reference or prediction has cloud):",
        "",
        markdown_table(f1, digits=3),
        "",
    ]


def summary_json(
    frames: dict[str, pd.DataFrame], cfg: RealCloudsConfig, *, seconds: float, mask_note: str
) -> dict[str, Any]:
    """Means per estimator, for ``scores.json``.

    Parameters
    ----------
    frames
        The run's tables: ``prediction``, ``fidelity``, ``mask``, ``pairs``.
    cfg
        The configuration.
    seconds
        Wall time of the run.
    mask_note
        Why mask agreement was skipped, or empty.

    Returns
    -------
    dict
    """
    pred, fid, masks = frames["prediction"], frames["fidelity"], frames["mask"]
    out: dict[str, Any] = {
        "name": cfg.name,
        "seconds": round(seconds, 2),
        "dtype": cfg.solver.dtype,
    }
    out["pairs"] = frames["pairs"].to_dict(orient="records")
    if len(pred):
        means = pred.groupby(["protocol", "estimator"])["r"].mean()
        out["prediction_r_mean"] = {
            protocol: means[protocol].to_dict() for protocol in dict.fromkeys(pred["protocol"])
        }
    if len(fid):
        out["fidelity_r_mean"] = fid.groupby("estimator")["r_clear"].mean().to_dict()
    if len(masks):
        out["mask_f1"] = {f"{e} {c}": float(v) for (e, c), v in _pooled(masks)["f1"].items()}
    if mask_note:
        out["mask_note"] = mask_note
    return out


def write_real_report(
    out: Path,
    frames: dict[str, pd.DataFrame],
    cfg: RealCloudsConfig,
    *,
    seconds: float,
    mask_note: str,
) -> Path:
    """Write ``out/report.md``: the pairs, prediction, fidelity and mask tables.

    Parameters
    ----------
    out
        The run directory.
    frames
        The run's tables: ``prediction``, ``fidelity``, ``mask``, ``pairs``.
    cfg
        The configuration.
    seconds
        Wall time of the run.
    mask_note
        Why mask agreement was skipped, or empty.

    Returns
    -------
    pathlib.Path
        The report.
    """
    pred, fid, masks, pairs = (frames[k] for k in ("prediction", "fidelity", "mask", "pairs"))
    lines = [
        f"# Real clouds: {cfg.name}",
        "",
        f"Data `{cfg.data}`; series {', '.join(s.name for s in cfg.series)}; solver dtype "
        f"{cfg.solver.dtype}; {seconds:.1f} s.",
        "",
    ]
    if len(pairs):
        table = pairs.set_index("series")
        lines += ["## Pairs (target ← source)", "", markdown_table(table, digits=3), ""]
    if len(pred):
        lines += _prediction_tables(pred, cfg)
    if len(fid):
        lines += _fidelity_table(fid, cfg)
    if len(masks):
        lines += _mask_tables(masks, cfg)
    elif mask_note:
        lines += ["## Mask agreement", "", mask_note + ".", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
