"""The scene's own choice of solve: the default unless another is better by more than the
spread over the scene's own pairs; one real site end to end."""

import numpy as np
import pandas as pd
import pytest

from cloudlab.scene_choice import (
    CANDIDATES,
    DEFAULT_KEY,
    DEFAULT_STEP,
    OWN,
    fold_choice,
    own_codes,
    own_pairs,
    scene_rows,
    scored_rows,
    spread_choice,
    unanimous_choice,
)
from cloudlab.sites import load_site
from cloudlab.sitescore import WholeSeries, site_arrays

SITE = "own"


def _rows(errors: dict[str, list[float]], median: float = 0.5) -> pd.DataFrame:
    """Rows of :func:`scored_rows`' shape: per pair, the temporal median at r ``median`` and
    each candidate at the r given for that pair, fidelity 0 (no charge)."""
    rows = []
    pairs = len(next(iter(errors.values())))
    for pair in range(pairs):
        base = {"site": SITE, "protocol": "drop-source", "pair": pair, "fid_num": 0.0}
        rows.append(
            {
                **base,
                "solve": "temporal-median",
                "step": "",
                "fid_den": 1.0,
                "pred_num": median**2,
                "pred_den": 1.0,
            }
        )
        for key, r in errors.items():
            rows.append(
                {
                    **base,
                    "solve": key,
                    "step": DEFAULT_STEP.name,
                    "fid_den": 1.0,
                    "pred_num": r[pair] ** 2,
                    "pred_den": 1.0,
                }
            )
    return pd.DataFrame(rows)


def test_the_default_is_kept_within_the_spread():
    # rpca x1 is better on average but worse on one pair: its difference is within its spread.
    rows = _rows({DEFAULT_KEY: [0.2, 0.2, 0.2, 0.2], "rpca x1": [0.1, 0.1, 0.1, 0.35]})
    chosen, table = spread_choice(rows, SITE, DEFAULT_STEP, [DEFAULT_KEY, "rpca x1"])
    assert table.loc["rpca x1", "difference"] < 0
    assert table.loc["rpca x1", "difference"] + table.loc["rpca x1", "spread"] >= 0
    assert chosen == DEFAULT_KEY


def test_another_is_taken_beyond_the_spread_the_least_loss_among_them():
    rows = _rows(
        {
            DEFAULT_KEY: [0.1, 0.1, 0.3, 0.3],
            "rpca x1.4": [0.09, 0.09, 0.27, 0.27],  # better on every pair: beyond the spread
            "rpca x1": [0.095, 0.095, 0.285, 0.285],  # the same, a little worse pooled
            "aatm x1": [0.25, 0.25, 0.05, 0.05],  # least pooled loss, but within its spread
        }
    )
    keys = [DEFAULT_KEY, "rpca x1", "rpca x1.4", "aatm x1"]
    chosen, table = spread_choice(rows, SITE, DEFAULT_STEP, keys)
    assert table.loss.idxmin() == "aatm x1"  # neither "least loss overall" ...
    assert table.difference.idxmin() == "aatm x1"  # ... nor "most gained on average"
    assert table.loc["aatm x1", "difference"] + table.loc["aatm x1", "spread"] >= 0
    assert chosen == "rpca x1.4"
    # The pooled loss: r over the median's, pooled over the pairs.
    expected = np.sqrt(np.mean(np.square([0.09, 0.09, 0.27, 0.27]))) / 0.5
    assert table.loc["rpca x1.4", "loss"] == pytest.approx(expected)


def test_a_pair_without_a_loss_does_not_narrow_the_spread():
    rows = _rows({DEFAULT_KEY: [0.2, 0.2, 0.2], "rpca x1": [0.1, 0.1, 0.1]})
    # Pair 2 has no clear pixel scored: its fidelity is 0/0 and its loss unknown.
    rows.loc[(rows.pair == 2), "fid_den"] = 0.0
    _, table = spread_choice(rows, SITE, DEFAULT_STEP, [DEFAULT_KEY, "rpca x1"])
    assert table.loc["rpca x1", "difference"] == pytest.approx(-0.2)
    assert table.loc["rpca x1", "spread"] == 0.0  # two known pairs, the same difference


def test_no_pairs_of_its_own_keeps_the_default():
    rows = _rows({DEFAULT_KEY: [0.2], "rpca x1": [0.1]})
    chosen, table = spread_choice(rows, "elsewhere", DEFAULT_STEP)
    assert chosen == DEFAULT_KEY and table.empty


def test_a_single_pair_never_moves_the_default():
    rows = _rows({DEFAULT_KEY: [0.4], "rpca x1": [0.1]})
    chosen, _ = spread_choice(rows, SITE, DEFAULT_STEP, [DEFAULT_KEY, "rpca x1"])
    assert chosen == DEFAULT_KEY


def test_the_grid_spans_both_rules_at_three_scales_capped_unrefined():
    assert DEFAULT_KEY in CANDIDATES
    assert {(s.method, s.lam) for s in CANDIDATES.values()} == {("aatm", "star"), ("rpca", "auto")}
    assert sorted({s.scale for s in CANDIDATES.values()}) == [1.0, 1.4, 2.0]
    assert all(s.cap and not s.refine for s in CANDIDATES.values())


def test_a_real_site_chooses_from_its_own_mask_alone():
    """The 10 x 10 France cube: its own pairs come from the default's mask, never the
    reference's (a reference of all clear would leave it no pair), and every candidate is
    scored on each of them."""
    site = load_site("s2_nrt_subset")
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    series = WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0))
    own = own_codes(D, series, frame)
    blind = WholeSeries(frame, D, np.zeros_like(reference), series.observed)
    assert np.array_equal(own_codes(D, blind, frame), own)
    pairs = own_pairs(own, 2)
    assert len(pairs) == 2
    specs = {k: CANDIDATES[k] for k in (DEFAULT_KEY, "rpca x1")}
    rows = pd.DataFrame(scored_rows(D, own, days, frame, pairs, specs, [DEFAULT_STEP], SITE))
    assert set(rows.pair) == {0, 1}
    chosen, table = spread_choice(rows, SITE, DEFAULT_STEP, list(specs))
    assert chosen in specs and np.isfinite(table.loss).all()


def test_unanimity_leaves_the_default_only_where_every_draw_agrees():
    better = _rows({DEFAULT_KEY: [0.2] * 4, "rpca x1": [0.1, 0.11, 0.1, 0.12]})
    within = _rows({DEFAULT_KEY: [0.2] * 4, "rpca x1": [0.1, 0.1, 0.1, 0.35]})
    names = ["draw 0", "draw 1", "draw 2"]
    keys = [DEFAULT_KEY, "rpca x1"]
    agreed = pd.concat([better.assign(site=name) for name in names])
    assert unanimous_choice(agreed, names, DEFAULT_STEP, keys) == "rpca x1"
    # The dissenting draw in the middle: neither the first nor the last draw decides.
    split = pd.concat(
        [better.assign(site="draw 0"), within.assign(site="draw 1"), better.assign(site="draw 2")]
    )
    assert spread_choice(split, "draw 0", DEFAULT_STEP, keys)[0] == "rpca x1"
    assert spread_choice(split, "draw 2", DEFAULT_STEP, keys)[0] == "rpca x1"
    assert unanimous_choice(split, names, DEFAULT_STEP, keys) == DEFAULT_KEY


def test_unanimity_needs_the_same_candidate_not_only_another_one():
    rpca = _rows({DEFAULT_KEY: [0.2] * 4, "rpca x1": [0.1] * 4, "rpca x1.4": [0.15] * 4})
    wider = _rows({DEFAULT_KEY: [0.2] * 4, "rpca x1": [0.15] * 4, "rpca x1.4": [0.1] * 4})
    keys = [DEFAULT_KEY, "rpca x1", "rpca x1.4"]
    draws = pd.concat([rpca.assign(site="a"), wider.assign(site="b")])
    assert {spread_choice(draws, d, DEFAULT_STEP, keys)[0] for d in "ab"} == {
        "rpca x1",
        "rpca x1.4",
    }
    assert unanimous_choice(draws, ["a", "b"], DEFAULT_STEP, keys) == DEFAULT_KEY


def test_a_scene_is_scored_on_its_reference_pairs_and_on_each_draw_of_its_own():
    """The France cube as a scene: the reference's pairs under its label, each draw of its own
    mask's pairs under the label, OWN and the draw, every candidate on every pair of each."""
    site = load_site("s2_nrt_subset")
    frame = site.series.frame
    D, reference, days = site_arrays(site)
    own = own_codes(D, WholeSeries(frame, D, reference, np.isfinite(D).all(axis=0)), frame)
    specs = {k: CANDIDATES[k] for k in (DEFAULT_KEY, "rpca x1")}
    rows = scene_rows("fr", frame, D, reference, days, own, 2, 2, 1, specs)
    sides = {"fr", f"fr{OWN}0", f"fr{OWN}1", f"fr{OWN}one"}
    assert set(rows.site) == sides
    for side in sides:
        mine = rows[rows.site == side]
        # Every pair of a side has every candidate and the temporal median.
        per_pair = mine.groupby("pair").solve.apply(set)
        assert all({*specs, "temporal-median"} <= solves for solves in per_pair)
    assert rows[rows.site == "fr"].pair.nunique() == len(own_pairs(reference, 4))
    assert all(rows[rows.site == f"fr{OWN}{d}"].pair.nunique() <= 2 for d in range(2))
    assert rows[rows.site == f"fr{OWN}one"].pair.nunique() == 1
    # Without one_draw_pairs no such side.
    alone = scene_rows("fr", frame, D, reference, days, own, 1, 1, None, specs)
    assert set(alone.site) == {"fr", f"fr{OWN}0"}
    # The own sides' pairs come from ``own``, the reference side's from ``reference``: an own
    # mask that calls everything clear has no cloudy source, so no own pair at all.
    blind = scene_rows("fr", frame, D, reference, days, np.zeros_like(own), 2, 2, 1, specs)
    assert set(blind.site) == {"fr"}


def test_a_fold_leaves_the_default_only_beyond_the_spread_and_reads_no_left_out_site():
    b, o = DEFAULT_KEY, "rpca x1"
    # rpca better by 0.1 on each of three sites, 0.05 on a fourth: beyond its spread.
    losses = pd.DataFrame(
        {b: [1.0, 1.0, 1.0, 1.0, 1.0], o: [0.9, 0.9, 0.9, 0.95, 5.0]},
        index=["s1", "s2", "s3", "s4", "s5"],
    )
    assert fold_choice(losses, "s5") == o  # s5, where rpca fails, is not read
    # With s5 among the training sites the mean difference is positive: the default.
    assert fold_choice(losses, "s1") == b
    # Better on average but within the spread (d worse): the default; without d, rpca.
    mixed = pd.DataFrame({b: [1.0] * 4, o: [0.5, 0.5, 0.5, 1.3]}, index=["a", "b", "c", "d"])
    assert fold_choice(mixed, "a") == b
    assert fold_choice(mixed, "d") == o
    # Two beyond the spread: the least mean loss among them.
    two = pd.DataFrame(
        {b: [1.0] * 4, o: [0.8, 0.81, 0.79, 0.8], "rpca x1.4": [0.7, 0.71, 0.69, 0.7]},
        index=["a", "b", "c", "d"],
    )
    assert fold_choice(two, "d") == "rpca x1.4"
