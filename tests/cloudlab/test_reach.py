"""What the candidates can reach of #44's bars, chosen in sample (cloudlab.reach)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cloudlab.reach import bars, candidate_table, frontier, markdown, per_site


def _scores() -> pd.DataFrame:
    """Two sites (median r 0.4 and 0.2, nearest-clear oracle 0.3 and 0.1) and three candidates:
    ``good`` meets both bars on both sites, ``leaky`` predicts well and changes clear pixels on
    site b, ``blind`` keeps clear pixels and predicts worse than 0.85 × the median on site a;
    ``partial`` is scored on one site only and does not count."""
    rows = [
        ("a", "temporal-median", "", 0.4, 0.3),
        ("b", "temporal-median", "", 0.2, 0.2),
        ("a", "nearest-clear", "", 0.3, 0.0),
        ("b", "nearest-clear", "", 0.1, 0.0),
        ("a", "s", "good", 0.20, 0.01),
        ("b", "s", "good", 0.10, 0.02),
        ("a", "s", "leaky", 0.10, 0.02),
        ("b", "s", "leaky", 0.05, 0.09),
        ("a", "s", "blind", 0.39, 0.00),
        ("b", "s", "blind", 0.15, 0.00),
        ("a", "s", "partial", 0.01, 0.00),
    ]
    frame = pd.DataFrame(rows, columns=["site", "solve", "step", "pred", "fid"])
    kept = frame.assign(protocol="keep-source", pred=9.0, fid=9.0)  # never read
    return pd.concat([frame.assign(protocol="drop-source"), kept], ignore_index=True)


def test_only_candidates_scored_on_every_site_count_and_ratios_are_to_the_median() -> None:
    table, oracle = candidate_table(_scores())
    assert sorted(table.candidate.unique()) == ["s · blind", "s · good", "s · leaky"]
    good = table[table.candidate == "s · good"].set_index("site")
    np.testing.assert_allclose(good.ratio, [0.5, 0.5])
    np.testing.assert_allclose(oracle.sort_index(), [0.3, 0.1])


def test_each_bar_is_met_only_where_every_site_meets_it() -> None:
    met = bars(*candidate_table(_scores()))
    assert met.prediction.to_dict() == {"s · blind": False, "s · good": True, "s · leaky": True}
    assert met.fidelity.to_dict() == {"s · blind": True, "s · good": True, "s · leaky": False}
    # mean r 0.15, 0.075, 0.27 against the oracle's 0.2
    assert met["mean"].to_dict() == {"s · blind": False, "s · good": True, "s · leaky": True}


def test_per_site_counts_and_the_best_figure_under_the_other_bar() -> None:
    table, _ = candidate_table(_scores())
    sites = per_site(table).set_index("site")
    assert sites.loc["a", "prediction met"] == 2 and sites.loc["a", "fidelity met"] == 3
    assert sites.loc["b", "both"] == 2
    # on a, blind (ratio 0.975) does not predict: the least fidelity of the others is good's
    assert sites.loc["a", "least fidelity, prediction met"] == 0.01
    # on b, leaky (ratio 0.25) changes clear pixels: the least ratio of the others is good's
    assert sites.loc["b", "least ratio, fidelity met"] == 0.5


def test_the_frontier_sets_a_site_aside_and_bounds_the_largest_ratio() -> None:
    table, _ = candidate_table(_scores())
    rows = frontier(table).set_index("sites set aside")
    assert rows.loc["none", "both bars met"] == 1  # good
    assert rows.loc["none", "ratio ≤ 0.85"] == 0.02  # good's largest fidelity
    # blind's largest ratio (0.975 on a) is within 1.0: its fidelity 0 is the least there
    assert rows.loc["none", "ratio ≤ 1.0"] == 0.0
    # with b set aside, leaky's fidelity on a (0.02) and good's (0.01): good's is the least
    assert rows.loc["b", "ratio ≤ 0.85"] == 0.01
    assert "| none | 1 | 0.020 |" in markdown(frontier(table))
