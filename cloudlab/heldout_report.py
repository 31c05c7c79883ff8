"""The held-out benchmark's ``report.md``: the sites, the held-out scores, the baselines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudlab.baselines import MULTIBAND_BASELINES, ORACLES

__all__ = ["FIXED", "FlooredTable", "markdown_table", "write_report"]

#: Candidates shown beside the chosen ones on every site (today's and the paper's settings).
FIXED: dict[str, str] = {
    "previous default (rpca 1/√d refined, ground everywhere)": ("rpca-auto+refine | ground"),
    "rpca 1/√d, ground everywhere": "rpca-auto | ground",
    "aatm λ̂*, ground everywhere (the paper)": "aatm-star | ground",
}


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "–" if np.isnan(x) else f"{x:.3f}"
    return str(x).replace("|", "·")  # a candidate is "solve | step": not a column break


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a markdown table: numbers to the third decimal (``–`` where missing), a
    candidate's ``solve | step`` written ``solve · step``."""
    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _score(scores: pd.DataFrame, site: str, candidate: str, protocol: str, what: str) -> float:
    solve, _, step = candidate.partition(" | ")
    hit = scores[
        (scores.site == site)
        & (scores.solve == solve)
        & (scores.step == step)
        & (scores.protocol == protocol)
    ]
    return float(hit[what].iloc[0]) if len(hit) else float("nan")


def comparison(
    scores: pd.DataFrame, sites: list[str], defaults: dict[str, str], protocol: str
) -> pd.DataFrame:
    """Prediction r per site (and mean) of the defaults (label: candidate), the fixed candidates
    and the baselines."""
    rows = []
    named = {**defaults, **FIXED}
    named.update(
        {b + (" (oracle)" if b in ORACLES else ""): f"{b} | " for b in MULTIBAND_BASELINES}
    )
    for label, cand in named.items():
        values = [_score(scores, s, cand, protocol, "pred") for s in sites]
        fid = [_score(scores, s, cand, "drop-source", "fid") for s in sites]
        rows.append([label, *values, float(np.mean(values)), float(np.mean(fid))])
    return pd.DataFrame(rows, columns=["estimator", *sites, "mean", "fidelity r (mean)"])


def write_report(
    out: Path,
    facts: pd.DataFrame,
    scores: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    summary: dict[str, Any],
    floored: Sequence[tuple[FlooredTable, pd.DataFrame]] = (),
    *,
    command: str,
) -> Path:
    """Write ``report.md`` into ``out`` and return its path: the held-out scores (``tables``)
    of the pipeline's candidates (``plain``), of every candidate, the joint re-solve's included
    (``joint``), and of the pipeline's candidates with the ground capped (``capped``) and not
    (``uncapped``), and of the floored solves where scored (``floored``); ``command`` is the
    run's (:func:`cloudlab.heldout.run_command`)."""
    sites = list(facts.site)
    held, held_joint, held_capped, held_uncapped = (
        _held(tables[k]) for k in ("plain", "joint", "capped", "uncapped")
    )
    defaults = {
        "**default (the pipeline's, its ground bounded)**": summary["pipeline_default"],
        "chosen by the loss on all sites": summary["default"],
    }
    parts = [
        "# Held-out real-cloud benchmark",
        "",
        f"`{command}` (cloudlab/heldout.py).",
        "",
        "## Sites",
        "",
        markdown_table(facts),
        "",
        "## Held-out scores (each site scored with the candidate chosen on the others)",
        "",
        markdown_table(held),
        "",
        _means(held),
        "",
        f"**Chosen on all sites:** `{summary['default']}` (least loss without the "
        f"whiteness test: `{summary['best']}`; {_white_losses(summary)}; "
        f"{_stage_losses(summary.get('white_clouds'), 'white clouds')}; "
        f"{_stage_losses(summary.get('shadow_near'), 'a shadow beside its cloud')}; "
        f"{_stage_losses(summary.get('persist'), 'ground that stays')}; "
        f"{_stage_losses(summary.get('between'), 'the departure from the clear dates')}; "
        f"{_stage_losses(summary.get('shadow_flat'), 'a shadow dark in every band')}"
        f"{_threshold_stage(summary)}). "
        "**The pipeline's "
        f"default** is that with its ground capped (and floored where the solve name says "
        f"so): `{summary['pipeline_default']}`.",
        "",
        "## Held-out scores with the ground capped",
        "",
        "Each site scored with the candidate chosen on the others, its ground capped at each "
        "pixel's median date (`solver.cap_ground`).",
        "",
        markdown_table(held_capped),
        "",
        _means(held_capped),
        "",
        "The same folds' choices, the ground not capped:",
        "",
        markdown_table(held_uncapped),
        "",
        _means(held_uncapped),
        "",
        *_floored(floored),
        "## Held-out scores with the joint re-solve among the candidates (benchmark only)",
        "",
        markdown_table(held_joint),
        "",
        _means(held_joint),
        "",
        "## Prediction r per site, cloudy date dropped (in-sample for the default)",
        "",
        markdown_table(comparison(scores, sites, defaults, "drop-source")),
        "",
        "## Prediction r per site, cloudy date kept",
        "",
        markdown_table(comparison(scores, sites, defaults, "keep-source")),
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


@dataclass(frozen=True)
class FlooredTable:
    """Which held-out table of the floored solves (``python -m cloudlab heldout --floor``):
    the floor's quantile, whether each date's level was taken out of the darkening, and whether
    each fold chose among those candidates alone (else: its choice, floored)."""

    q: float
    level: bool
    chosen: bool

    @property
    def stem(self) -> str:
        """The table's name in ``heldout-<stem>.csv``."""
        return f"floor{self.q:g}" + "-level" * self.level + "-chosen" * self.chosen


def _floored(tables: Sequence[tuple[FlooredTable, pd.DataFrame]]) -> list[str]:
    """The report's lines for the tables of the floored solves."""
    parts = []
    for key, table in tables:
        held, q = _held(table), f"{key.q:g}"
        how = (
            f"chosen on the others among the candidates floored at {q} alone (the mask's "
            "thresholds chosen given the floor)"
            if key.chosen
            else f"chosen on the others, its ground capped at each pixel's median date and "
            f"raised to its {q} quantile"
        )
        parts += [
            f"## Held-out scores with the ground floored at quantile {q}"
            + (", each date's level out of the darkening" if key.level else "")
            + (", chosen given the floor" if key.chosen else ""),
            "",
            f"Each site scored with the candidate {how} (`solver.floor_ground`)"
            + ("; each date's median residual, where negative, out of its darkening." * key.level)
            + ".",
            "",
            markdown_table(held),
            "",
            _means(held),
            "",
        ]
    return parts


def _means(held: pd.DataFrame) -> str:
    means = held.select_dtypes("number").mean()
    return "Means over the sites: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()) + "."


def _held(table: pd.DataFrame) -> pd.DataFrame:
    held = table.copy()
    held["ratio to median"] = held.pred_drop / held["temporal-median_drop"]
    cols = {
        "site": "site (left out)",
        "chosen": "chosen on the other sites",
        "pred_drop": "r dropped",
        "temporal-median_drop": "median",
        "ratio to median": "ratio",
        "nearest-clear_drop": "nearest clear (oracle)",
        "pred_keep": "r kept",
        "fid": "fidelity r",
        "f1_cloud+haze": "F1 cloud+haze",
        "f1_shadow": "F1 shadow",
        "f1_cloud+haze_grown": "F1 cloud+haze, grown as the reference",
        "f1_shadow_grown": "F1 shadow, grown as the reference",
    }
    return held[list(cols)].rename(columns=cols)


def _stage_losses(variants: dict[str, float] | None, what: str) -> str:
    """A stage's mean loss of each variant (a post-step's name), as the report words it: the
    third stage's white clouds, the fourth's shadow beside its cloud (``default.json``)."""
    if not variants:
        return f"no {what} scored"
    return f"mean loss with {what}, the ground capped: " + ", ".join(
        f"`{step}` {v:.3f}" for step, v in variants.items()
    )


def _threshold_stage(summary: dict[str, Any]) -> str:
    """The eighth stage's clause of the choice's sentence: only for a run that scored it
    (``--rethreshold``)."""
    if "thresholds" not in summary:
        return ""
    return "; " + _stage_losses(summary["thresholds"], "the mask's thresholds chosen again")


def _white_losses(summary: dict[str, Any]) -> str:
    """The second stage's mean loss of each whiteness ratio, as the report words it."""
    white = summary.get("white") or {}
    if not white:
        return "no whiteness ratio scored"
    return "mean loss by whiteness ratio " + ", ".join(f"{w}: {v:.3f}" for w, v in white.items())
