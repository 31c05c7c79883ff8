"""What the held-out benchmark's candidates can reach of issue #44's bars, chosen in sample.

The held-out benchmark (:mod:`cloudlab.heldout`) scores every candidate (a solve and a
post-step: mask rule, composition, offset) on every site, and chooses among them on four sites
to score the fifth. This module asks the question before it: is there a candidate at all that
meets the issue's bars on every site when it is chosen *knowing* the scores (in sample, the
best any choice among them could do)? The bars, with the cloudy date dropped:

* **prediction**: r on the pasted pixels ≤ :data:`RATIO_LIMIT` × the temporal median's on
  every site;
* **fidelity**: r between the output and the observation on the target's reference-clear
  pixels ≤ :data:`cloudlab.heldout.FIDELITY_LIMIT` on every site;
* **mean**: the mean r over the sites ≤ the nearest-clear oracle's.

In-sample by construction: these figures bound from above what a held-out choice among the
same candidates can reach; they are no evidence for a default.
"""

from __future__ import annotations

import itertools

import pandas as pd

from cloudlab.heldout import FIDELITY_LIMIT
from cloudlab.heldout_report import markdown_table as markdown  # the report's tables

__all__ = ["RATIO_LIMIT", "bars", "candidate_table", "frontier", "markdown", "per_site"]

#: The prediction bar: r ≤ this × the temporal median's on every site (issue #44).
RATIO_LIMIT = 0.85
#: Bounds on the largest prediction ratio at which the frontier is printed.
RATIO_BOUNDS = (0.85, 1.0, 1.1, 1.2, 1.25, 1.3)


def candidate_table(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Per candidate (``solve · step``) and site, the prediction ratio to the temporal median
    and the fidelity r, cloudy date dropped; and the nearest-clear oracle's r per site.

    Returns
    -------
    table
        Columns ``candidate``, ``site``, ``pred``, ``ratio``, ``fid``; only candidates scored on
        every site.
    oracle
        The nearest-clear oracle's prediction r, indexed by site.
    """
    drop = scores[scores.protocol == "drop-source"]
    median = drop[drop.solve == "temporal-median"].set_index("site").pred
    oracle = drop[drop.solve == "nearest-clear"].set_index("site").pred
    cand = drop[drop.step.notna() & (drop.step != "")].copy()
    cand["candidate"] = cand.solve + " · " + cand.step
    cand["ratio"] = cand.pred / cand.site.map(median)
    sites = median.index
    complete = cand.groupby("candidate").site.nunique() == len(sites)
    cand = cand[cand.candidate.map(complete)]
    return cand[["candidate", "site", "pred", "ratio", "fid"]], oracle


def bars(table: pd.DataFrame, oracle: pd.Series) -> pd.DataFrame:
    """Per candidate: its largest ratio and fidelity over the sites, its mean r, and whether it
    meets each bar."""
    by = table.groupby("candidate")
    out = pd.DataFrame(
        {
            "max_ratio": by.ratio.max(),
            "max_fid": by.fid.max(),
            "mean_r": by.pred.mean(),
        }
    )
    out["prediction"] = out.max_ratio <= RATIO_LIMIT
    out["fidelity"] = out.max_fid <= FIDELITY_LIMIT
    out["mean"] = out.mean_r <= float(oracle.mean())
    return out


def per_site(table: pd.DataFrame) -> pd.DataFrame:
    """Per site, on its own: the candidates meeting its prediction bar, its fidelity bar and
    both, its least fidelity among those meeting its prediction bar and its least ratio among
    those meeting its fidelity bar."""
    rows = []
    for site, scored in table.groupby("site"):
        predicts = scored.ratio <= RATIO_LIMIT
        keeps = scored.fid <= FIDELITY_LIMIT
        rows.append(
            {
                "site": site,
                "prediction met": int(predicts.sum()),
                "fidelity met": int(keeps.sum()),
                "both": int((predicts & keeps).sum()),
                "least fidelity, prediction met": _least(scored.fid[predicts]),
                "least ratio, fidelity met": _least(scored.ratio[keeps]),
            }
        )
    return pd.DataFrame(rows)


def _least(values: pd.Series) -> float:
    return float(values.min()) if len(values) else float("nan")


def frontier(table: pd.DataFrame) -> pd.DataFrame:
    """With every site, then with each site and each pair of sites set aside (neither of their
    bars counted): the candidates meeting both bars on the sites counted, and for each bound
    of :data:`RATIO_BOUNDS` on their largest ratio the least largest fidelity."""
    sites = sorted(table.site.unique())
    asides = [(), *itertools.combinations(sites, 1), *itertools.combinations(sites, 2)]
    rows = []
    for aside in asides:
        counted = table[~table.site.isin(aside)]
        by = counted.groupby("candidate")
        max_ratio, max_fid = by.ratio.max(), by.fid.max()
        row: dict[str, object] = {
            "sites set aside": ", ".join(aside) or "none",
            "both bars met": int(((max_ratio <= RATIO_LIMIT) & (max_fid <= FIDELITY_LIMIT)).sum()),
        }
        for bound in RATIO_BOUNDS:
            row[f"ratio ≤ {bound}"] = _least(max_fid[max_ratio <= bound])
        rows.append(row)
    return pd.DataFrame(rows)
