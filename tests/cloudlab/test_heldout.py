"""The held-out benchmark's choice: leave-one-site-out never sees the site it scores, and the
aATM candidate is preferred only within the spread."""

import json

import numpy as np
import pandas as pd
import pytest

from cloudlab.candidates import SOLVES, post_steps
from cloudlab.heldout import capped, choose, held_out, loss, uncapped, white_of, with_white


def _scores(pred: dict[tuple[str, str], dict[str, float]], sites: list[str]) -> pd.DataFrame:
    rows = []
    for site in sites:
        for protocol in ("drop-source", "keep-source"):
            rows.append(
                dict(
                    site=site,
                    protocol=protocol,
                    solve="temporal-median",
                    step="",
                    pred=0.5,
                    fid=0.3,
                )
            )
            rows.append(
                dict(
                    site=site, protocol=protocol, solve="nearest-clear", step="", pred=0.4, fid=0.0
                )
            )
            for (solve, step), by_site in pred.items():
                rows.append(
                    dict(
                        site=site,
                        protocol=protocol,
                        solve=solve,
                        step=step,
                        pred=by_site[site],
                        fid=0.01,
                    )
                )
    return pd.DataFrame(rows)


def _masks(sites: list[str], solves: list[str]) -> pd.DataFrame:
    counts = {
        f"{c}_{k}": 1
        for c in ("cloud", "cloud+haze", "shadow", "clear")
        for k in ("tp", "fp", "fn")
    }
    return pd.DataFrame(
        [dict(site=s, solve=v, rule="c6 h3 s2 r0 g0", **counts) for s in sites for v in solves]
    )


SITES = ["a", "b", "c", "d"]
STEP = "c6 h3 s2 r0 g0 keep:observed"


def test_each_site_is_scored_with_a_choice_made_without_it() -> None:
    # rpca wins on a, b, c by far; on d it is terrible. Left out, d still gets rpca (chosen on
    # a, b, c) and is scored badly: the held-out score does not peek.
    pred = {
        ("rpca-auto", STEP): {"a": 0.1, "b": 0.1, "c": 0.1, "d": 2.0},
        ("aatm-star", STEP): {"a": 0.4, "b": 0.4, "c": 0.4, "d": 0.2},
    }
    scores = _scores(pred, SITES)
    table = held_out(scores, _masks(SITES, ["rpca-auto", "aatm-star"]), SITES)
    d = table.set_index("site").loc["d"]
    assert d.chosen.startswith("rpca-auto") and d.pred_drop == 2.0
    # In-sample, d would have picked aATM: its loss on d alone is lower.
    assert choose(scores, ["d"])[0].startswith("aatm-star")


def test_aatm_is_preferred_within_the_spread_only() -> None:
    close = {
        ("rpca-auto", STEP): {"a": 0.20, "b": 0.10, "c": 0.30, "d": 0.20},
        ("aatm-star", STEP): {"a": 0.10, "b": 0.30, "c": 0.20, "d": 0.25},
    }
    assert choose(_scores(close, SITES), SITES)[0].startswith("aatm-star")
    far = {
        ("rpca-auto", STEP): {"a": 0.10, "b": 0.10, "c": 0.10, "d": 0.10},
        ("aatm-star", STEP): {"a": 0.40, "b": 0.41, "c": 0.39, "d": 0.40},
    }
    assert choose(_scores(far, SITES), SITES)[0].startswith("rpca-auto")


def test_the_whiteness_test_is_chosen_given_the_rest_of_the_candidate() -> None:
    """Stage one chooses without the test; stage two only sets the chosen rule's ratio. A rule
    that wins only with the test (here rpca's) is not taken by the back door."""
    white = "c6 h3 s2 r0 g0 w0.2 keep:observed"
    pred = {
        ("aatm-star", STEP): {s: 0.20 for s in SITES},
        ("aatm-star", white): {s: 0.18 for s in SITES},
        ("rpca-auto", STEP): {s: 0.30 for s in SITES},
        ("rpca-auto", white): {s: 0.10 for s in SITES},
    }
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {white}" and set(info["white"]) == {"0", "0.2"}
    pred[("aatm-star", white)] = {s: 0.20 for s in SITES}  # a tie: no test
    assert choose(_scores(pred, SITES), SITES)[0] == f"aatm-star | {STEP}"
    assert with_white(f"x | {white}", 0.4) == "x | c6 h3 s2 r0 g0 w0.4 keep:observed"
    assert with_white(f"x | {white}", 0.0) == f"x | {STEP}" and white_of(white) == 0.2


def test_white_clouds_are_chosen_third_given_the_rest_of_the_candidate() -> None:
    """Stage three only adds white clouds (with the chosen whiteness test or a stricter one) to
    the candidate the first two chose, as it is on a tie; a rule with white clouds does not
    enter stage one, even without a whiteness test."""
    flat = "c6 h3 s2 r0 g0 w0.25 wc3 keep:observed"
    pred = {
        ("aatm-star", STEP): {s: 0.20 for s in SITES},
        ("aatm-star", flat): {s: 0.15 for s in SITES},
        ("rpca-auto", STEP): {s: 0.30 for s in SITES},
        ("rpca-auto", "c6 h3 s2 r0 g0 wc3 keep:observed"): {s: 0.05 for s in SITES},
    }
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {flat}" and set(info["white_clouds"]) == {STEP, flat}
    pred[("aatm-star", flat)] = {s: 0.20 for s in SITES}  # a tie: as it is
    assert choose(_scores(pred, SITES), SITES)[0] == f"aatm-star | {STEP}"


def test_a_shadow_beside_its_cloud_is_chosen_fourth_given_the_rest_of_the_candidate() -> None:
    """Stage four only adds a shadow beside its cloud to the candidate the first three chose,
    as it is on a tie; a rule with one does not enter stage one."""
    near = "c6 h3 s2 r0 g0 n1.5x16 keep:observed"
    pred = {
        ("aatm-star", STEP): {s: 0.20 for s in SITES},
        ("aatm-star", near): {s: 0.15 for s in SITES},
        ("rpca-auto", STEP): {s: 0.30 for s in SITES},
        ("rpca-auto", "c6 h3 s2 r0 g0 n1.5x8 keep:observed"): {s: 0.05 for s in SITES},
    }
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {near}" and set(info["shadow_near"]) == {STEP, near}
    pred[("aatm-star", near)] = {s: 0.20 for s in SITES}  # a tie: as it is
    assert choose(_scores(pred, SITES), SITES)[0] == f"aatm-star | {STEP}"


def test_ground_that_stays_is_chosen_fifth_given_the_rest_of_the_candidate() -> None:
    """Stage five only adds ground that stays to the candidate the first four chose, off on a
    tie; a rule with it does not enter stage one, and its label names the grid's step."""
    from cloudlab.candidates import persist_of, step_named

    stays = "c6 h3 s2 r0 g0 p0.3 keep:observed"
    assert [v.name for v in persist_of(step_named(STEP))] == [
        STEP,
        stays,
        "c6 h3 s2 r0 g0 p0.5 keep:observed",
    ]
    assert step_named(stays).rule.persist == 0.3
    pred = {
        ("aatm-star", STEP): {s: 0.20 for s in SITES},
        ("aatm-star", stays): {s: 0.15 for s in SITES},
        ("rpca-auto", STEP): {s: 0.30 for s in SITES},
        ("rpca-auto", "c6 h3 s2 r0 g0 p0.5 keep:observed"): {s: 0.05 for s in SITES},
    }
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {stays}" and set(info["persist"]) == {STEP, stays}
    pred[("aatm-star", stays)] = {s: 0.20 for s in SITES}  # a tie: off
    assert choose(_scores(pred, SITES), SITES)[0] == f"aatm-star | {STEP}"


def test_the_departure_from_the_clear_dates_is_chosen_sixth_given_the_rest() -> None:
    """Stage six only adds the pixel's own departure interpolated from its clear dates to the
    candidate the first five chose, off on a tie; a step with it does not enter stage one, and
    its label names the grid's step."""
    from cloudlab.candidates import between_of, step_named

    between = f"{STEP}+between"
    assert [v.name for v in between_of(step_named(STEP))] == [STEP, between]
    assert step_named(between).between and not step_named(STEP).between
    pred = {
        ("aatm-star", STEP): {s: 0.20 for s in SITES},
        ("aatm-star", between): {s: 0.15 for s in SITES},
        ("rpca-auto", STEP): {s: 0.30 for s in SITES},
        ("rpca-auto", between): {s: 0.05 for s in SITES},
    }
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {between}" and set(info["between"]) == {STEP, between}
    pred[("aatm-star", between)] = {s: 0.20 for s in SITES}  # a tie: off
    assert choose(_scores(pred, SITES), SITES)[0] == f"aatm-star | {STEP}"


def test_the_mask_thresholds_are_chosen_eighth_given_the_rest() -> None:
    """Stage seven offers the chosen step's rule with the grid's cloud and shadow thresholds and
    growths again, the rest of it as chosen; each variant's label resolves to that variant; the
    stage changes nothing until its variants are scored, and keeps the step on a tie."""
    from cloudlab.candidates import step_named, thresholds_of
    from cloudlab.heldout import threshold_stage

    between = f"{STEP}+between"
    variants = thresholds_of(step_named(between))
    names = [v.name for v in variants]
    # 3 clouds x 3 shadows x 3 growths, one of them the step's own (c6 s2 g0).
    assert names[0] == between and len(names) == len(set(names)) == 27
    assert all(n.endswith(" keep:observed+between") for n in names)
    assert all(step_named(v.name) == v for v in variants)
    assert {(v.rule.cloud, v.rule.grow) for v in variants} == {
        (c, g) for c in (3.0, 4.0, 6.0) for g in (0, 1, 2)
    }
    lower = next(v.name for v in variants if (v.rule.cloud, v.rule.grow) == (4.0, 1))
    pred = {
        ("aatm-star", STEP): dict.fromkeys(SITES, 0.20),
        ("aatm-star", between): dict.fromkeys(SITES, 0.15),
    }
    masks = _masks(SITES, ["aatm-star"])
    scores = _scores(pred, SITES)
    # Only the choices of the first seven stages are scored: every fold's is the step with the
    # departure, so its variants are what the stage needs, each once.
    assert [v.name for v in threshold_stage(scores, masks, SITES)] == names[1:]
    pick, info = choose(scores, SITES, rethreshold=True)
    assert pick == f"aatm-star | {between}" and info["thresholds"] == {}
    pred[("aatm-star", lower)] = dict.fromkeys(SITES, 0.10)
    pick, info = choose(_scores(pred, SITES), SITES, rethreshold=True)
    assert pick == f"aatm-star | {lower}" and set(info["thresholds"]) == {between, lower}
    # Without --rethreshold the run's choice has no eighth stage, scored or not.
    pick, info = choose(_scores(pred, SITES), SITES)
    assert pick == f"aatm-star | {between}" and "thresholds" not in info
    pred[("aatm-star", lower)] = dict.fromkeys(SITES, 0.15)  # a tie: the step as chosen
    assert choose(_scores(pred, SITES), SITES, rethreshold=True)[0] == f"aatm-star | {between}"


def test_the_stages_to_score_are_those_of_the_first_six_stages_choices() -> None:
    """Where the later stages add nothing yet, the eighth stage's variants of a whiteness
    test's step are the grid's own steps: the choices that say what the later stages must
    score are made without it, or they would score the variants of a step no fold takes."""
    from cloudlab.candidates import step_named, thresholds_of, white_clouds_of
    from cloudlab.heldout import third_stage, threshold_stage

    white = STEP.replace(" keep:", " w0.2 keep:")
    lower = white.replace("c6 ", "c4 ")
    pred = {
        ("aatm-star", STEP): dict.fromkeys(SITES, 0.20),
        ("aatm-star", white): dict.fromkeys(SITES, 0.15),  # the second stage takes the test
        ("aatm-star", lower): dict.fromkeys(SITES, 0.10),  # not offered in the first
    }
    scores, masks = _scores(pred, SITES), _masks(SITES, ["aatm-star"])
    assert choose(scores, SITES)[0] == f"aatm-star | {white}"
    assert choose(scores, SITES, rethreshold=True)[0] == f"aatm-star | {lower}"
    _, steps = third_stage(scores, masks, SITES, SOLVES)
    assert steps[:3] == white_clouds_of(step_named(white))[1:]
    assert [v.name for v in threshold_stage(scores, masks, SITES)] == [
        v.name for v in thresholds_of(step_named(white))[1:]
    ]


def test_a_shadow_at_or_below_the_rules_shadow_beside_its_cloud_is_not_offered() -> None:
    from cloudlab.candidates import NO_SHADOW, step_named, thresholds_of

    near = step_named(STEP).with_rule(shadow=3.0, shadow_near=2.0, near_reach=16)
    shadows = {v.rule.shadow for v in thresholds_of(near)}
    assert shadows == {3.0, NO_SHADOW}
    haze = {(v.rule.cloud, v.rule.haze) for v in thresholds_of(step_named(STEP))}
    assert haze == {(6.0, 3.0), (4.0, 3.0), (3.0, 3.0)}  # its haze class kept where it can be


def test_white_clouds_of_a_step_that_has_them_name_each_variant_once() -> None:
    """A step with white clouds is one of its own variants: a run of today's chooses among
    its variants without a label twice (``benchmarks/mask_stage.py`` on such a run)."""
    from cloudlab.candidates import step_named, white_clouds_of

    plain = [v.name for v in white_clouds_of(step_named(STEP))]
    assert len(plain) == 4 and plain[0] == STEP
    chosen = plain[2]  # white clouds with the whiteness test at 0.25
    again = [v.name for v in white_clouds_of(step_named(chosen))]
    assert again == [chosen, plain[3]]


def test_the_third_stage_scores_the_white_clouds_of_the_choices_on_their_solves() -> None:
    from cloudlab.candidates import (
        CAPPED_SOLVES,
        between_of,
        flat_dark_of,
        near_of,
        persist_of,
        step_named,
        white_clouds_of,
    )
    from cloudlab.heldout import third_stage

    pred = {("aatm-starx1.4", STEP): {s: 0.2 for s in SITES}}
    masks = _masks(SITES, ["aatm-starx1.4"])
    solves, steps = third_stage(_scores(pred, SITES), masks, SITES, SOLVES)
    # The chosen solve with its ground capped too (the held-out tables score it both ways).
    assert {s.name for s in solves} == {"aatm-starx1.4", "aatm-starx1.4-cap"}
    assert all(s in SOLVES for s in solves) and any(s in CAPPED_SOLVES for s in solves)
    clouds = white_clouds_of(step_named(STEP))
    near = [n for v in clouds for n in near_of(v)[1:]]
    # The white clouds, then each white-cloud variant (the step itself too) with a shadow
    # beside its cloud: 1.5σ within 8 or 16 px (STEP's shadow threshold is 2σ).
    # Then each of those (with the shadow or not) with the pixel's own departure from its
    # clear dates (the sixth stage).
    nears = [n for v in clouds for n in near_of(v)]
    between = [between_of(n)[1] for n in nears]
    # And each of those, with the departure or not, with a shadow dark in every band: 3σ
    # within 16 or 32 px (the seventh stage).
    flats = [f for n in nears for b in between_of(n) for f in flat_dark_of(b)[1:]]
    assert steps == clouds[1:] + near + between + flats and len(between) == 4 * 3
    assert all(b.between and b.name.endswith("+between") for b in between)
    assert len(flats) == 4 * 3 * 2 * 2 and all(f.rule.shadow_flat == 3.0 for f in flats)
    # With --persist, then each of those, with and without the shadow, with ground that stays
    # at 0.3 and 0.5, and the sixth and seventh stages' of every one of those.
    _, with_persist = third_stage(_scores(pred, SITES), masks, SITES, SOLVES, persist=True)
    stays = [q for n in nears for q in persist_of(n)[1:]]
    reached = [q for n in nears for q in persist_of(n)]
    flats = [f for q in reached for b in between_of(q) for f in flat_dark_of(b)[1:]]
    betweens = [between_of(q)[1] for q in reached]
    assert with_persist == clouds[1:] + near + stays + betweens + flats
    assert len(stays) == 4 * 3 * 2


def test_the_capped_table_scores_each_folds_choice_with_its_ground_capped() -> None:
    assert capped(f"aatm-starx1.4 | {STEP}") == f"aatm-starx1.4-cap | {STEP}"
    assert capped(f"aatm-starx1.4-cap | {STEP}") == f"aatm-starx1.4-cap | {STEP}"
    assert capped(f"rpca-auto+refine | {STEP}") == f"rpca-auto+refine | {STEP}"  # no variant
    assert uncapped(f"aatm-starx1.4-cap | {STEP}") == f"aatm-starx1.4 | {STEP}"
    # The loss prefers the plain solve; the capped table still scores the capped one.
    pred = {
        ("aatm-star", STEP): dict.fromkeys(SITES, 0.2),
        ("aatm-star-cap", STEP): dict.fromkeys(SITES, 0.3),
    }
    scores, masks = _scores(pred, SITES), _masks(SITES, ["aatm-star", "aatm-star-cap"])
    plain = held_out(scores, masks, SITES)
    assert set(plain.chosen) == {f"aatm-star | {STEP}"} and set(plain.pred_drop) == {0.2}
    with_cap = held_out(scores, masks, SITES, cap=True)
    assert set(with_cap.chosen) == {f"aatm-star-cap | {STEP}"} and set(with_cap.pred_drop) == {0.3}
    assert held_out(scores, masks, SITES, cap=False).equals(plain)


def test_a_choice_without_a_capped_variant_is_scored_as_chosen_in_the_capped_table() -> None:
    """``--shadow-model`` scores aatm-shadow uncapped only: a fold that chooses it is scored as
    chosen in the capped table, named so, rather than failing on a solve never scored."""
    pred = {("aatm-shadow-stark1", STEP): dict.fromkeys(SITES, 0.2)}
    scores, masks = _scores(pred, SITES), _masks(SITES, ["aatm-shadow-stark1"])
    with_cap = held_out(scores, masks, SITES, cap=True)
    assert set(with_cap.chosen) == {f"aatm-shadow-stark1 | {STEP}"}
    assert with_cap.equals(held_out(scores, masks, SITES))


def test_the_floored_tables_score_the_folds_choice_floored_and_the_choice_given_the_floor() -> None:
    floored = f"aatm-starx1.4-cap-floor0.25 | {STEP}"
    assert capped(f"aatm-starx1.4 | {STEP}", 0.25) == floored
    assert capped(f"aatm-starx1.4-cap-floor0.5 | {STEP}", 0.25) == floored
    assert capped(floored) == f"aatm-starx1.4-cap | {STEP}"
    assert uncapped(floored) == f"aatm-starx1.4 | {STEP}"
    pred = {
        ("aatm-star", STEP): dict.fromkeys(SITES, 0.2),
        ("aatm-star-cap", STEP): dict.fromkeys(SITES, 0.3),
        ("aatm-star-cap-floor0.25", STEP): dict.fromkeys(SITES, 0.4),
        ("rpca-auto-cap-floor0.25", STEP): dict.fromkeys(SITES, 0.35),
    }
    scores = _scores(pred, SITES)
    masks = _masks(SITES, [solve for solve, _ in pred])
    # Each fold's choice (the plain aATM) floored, though the loss never chose the floor...
    table = held_out(scores, masks, SITES, cap=True, floor=0.25)
    assert set(table.chosen) == {f"aatm-star-cap-floor0.25 | {STEP}"}
    assert set(table.pred_drop) == {0.4}
    # ...and the choice among the floored candidates alone.
    given = held_out(scores, masks, SITES, ("aatm-star-cap-floor0.25", "rpca-auto-cap-floor0.25"))
    assert set(given.chosen) == {f"rpca-auto-cap-floor0.25 | {STEP}"}


def test_a_floored_spec_is_capped_and_named_so() -> None:
    from cloudlab.candidates import FLOORED_SOLVES, SolveSpec

    spec = SolveSpec("aatm", "star", "", 1.4, cap=True, floor=0.25)
    assert spec.name == "aatm-starx1.4-cap-floor0.25" and spec in FLOORED_SOLVES
    assert not set(FLOORED_SOLVES) & set(SOLVES)  # scored with --floor only
    with pytest.raises(ValueError, match="capped"):
        SolveSpec("aatm", "star", floor=0.25)
    levelled = SolveSpec("aatm", "star", "", 1.4, cap=True, floor=0.25, level=True)
    assert levelled.name == "aatm-starx1.4-cap-floor0.25-level" and levelled in FLOORED_SOLVES
    assert capped(f"aatm-starx1.4 | {STEP}", 0.25, level=True) == f"{levelled.name} | {STEP}"
    assert uncapped(f"{levelled.name} | {STEP}") == f"aatm-starx1.4 | {STEP}"
    with pytest.raises(ValueError, match="floored"):
        SolveSpec("aatm", "star", cap=True, level=True)


def test_the_dates_level_is_taken_out_of_the_darkening() -> None:
    """With ``level`` a date darker on every pixel (its median residual below 0) is not dark."""
    from cloudlab.sitescore import Solved

    rng = np.random.default_rng(0)
    d, n = 400, 6
    L = rng.uniform(0.2, 0.4, (1, d, 1)) * np.ones((1, d, n))
    D = L + rng.normal(0, 0.002, (1, d, n))
    D[0, :, 2] -= 0.05  # date 2 darker everywhere, a lower sun
    D[0, :40, 4] -= 0.1  # a shadow on a tenth of date 4
    observed = np.ones((d, n), bool)
    plain = Solved(D, observed, L, (20, 20), cap=True, floor=0.25)
    level = Solved(D, observed, L, (20, 20), cap=True, floor=0.25, level=True)
    assert plain.dark[2].min() > 3 and level.dark[2].max() < 3  # the date's level, in σ
    shadow = level.dark[4].reshape(-1)
    # The shadow's date keeps its level (its median is the clear pixels', within the noise).
    assert shadow[:40].min() > 3
    assert np.abs(shadow[:40] - plain.dark[4].reshape(-1)[:40]).max() < 0.5


def test_a_capped_solve_is_the_pipelines_cap_of_the_shared_first_solve() -> None:
    """solve_specs caps a spec's ground as a pipeline tile does (σ first, then
    cloudcore.cap_ground of the clipped ground), from the plain spec's first solve."""
    from cloudcore.cap import cap_ground
    from cloudlab.candidates import SolveSpec
    from cloudlab.sites import load_site
    from cloudlab.sitescore import site_arrays, solve_specs

    site = load_site("s2_nrt_subset")
    D, _, _ = site_arrays(site)
    observed = np.isfinite(D).all(axis=0)
    plain, cap = SolveSpec("aatm", "star"), SolveSpec("aatm", "star", cap=True)
    assert plain.first == cap.first and cap.name == "aatm-star-cap"
    with pytest.raises(ValueError, match="unrefined"):
        SolveSpec("aatm", "star", "refine", cap=True)
    solved = solve_specs(D, observed, [plain, cap], site.series.frame)
    for b in range(len(D)):
        ground = solved[plain.name].ground[b].copy()
        cap_ground(ground, np.zeros_like(ground), observed)
        assert np.array_equal(solved[cap.name].ground[b], ground)
    assert not np.array_equal(solved[plain.name].ground, solved[cap.name].ground)
    assert np.all(solved[cap.name].ground <= solved[plain.name].ground)


def test_a_ground_from_another_solve_keeps_this_solves_mask() -> None:
    """``ground_from``: the mask scores (and so every rule's codes) are the plain solve's, the
    ground the other solve's, each exactly as solved alone; nested or refined is an error."""
    import dataclasses

    from cloudcore.masks import MaskRule
    from cloudlab.candidates import SolveSpec
    from cloudlab.sites import load_site
    from cloudlab.sitescore import site_arrays, solve_specs

    site = load_site("s2_nrt_subset")
    D, _, _ = site_arrays(site)
    observed = np.isfinite(D).all(axis=0)
    plain = SolveSpec("aatm", "star", scale=1.4, cap=True)
    other = SolveSpec("rpca", "auto", cap=True)
    mixed = dataclasses.replace(plain, ground_from=other)
    assert mixed.name == "aatm-starx1.4-cap@ground=rpca-auto-cap"
    with pytest.raises(ValueError, match="plain solve"):
        dataclasses.replace(mixed, ground_from=mixed)
    with pytest.raises(ValueError, match="plain solve"):
        SolveSpec("aatm", "star", "refine", ground_from=other)
    solved = solve_specs(D, observed, [mixed], site.series.frame)
    assert list(solved) == [mixed.name]
    alone = solve_specs(D, observed, [plain, other], site.series.frame)
    assert np.array_equal(solved[mixed.name].ground, alone[other.name].ground)
    assert not np.array_equal(alone[plain.name].ground, alone[other.name].ground)
    rule = MaskRule()
    seen = alone[plain.name].seen
    assert np.array_equal(solved[mixed.name].codes(rule, seen), alone[plain.name].codes(rule, seen))
    assert not np.array_equal(
        alone[other.name].codes(rule, seen), alone[plain.name].codes(rule, seen)
    )
    # A share of the other's ground: the mean of the two grounds, the same mask.
    half = dataclasses.replace(mixed, ground_weight=0.5)
    assert half.name == "aatm-starx1.4-cap@ground=rpca-auto-capx0.5"
    with pytest.raises(ValueError, match="share"):
        dataclasses.replace(plain, ground_weight=0.5)
    halved = solve_specs(D, observed, [half], site.series.frame)[half.name]
    mean = 0.5 * alone[other.name].ground + 0.5 * alone[plain.name].ground
    assert np.array_equal(halved.ground, mean)
    assert np.array_equal(halved.codes(rule, seen), alone[plain.name].codes(rule, seen))


def test_the_shadow_put_back_for_the_mask_only() -> None:
    """``shadow_out_of_mask``: one aatm-shadow solve; the mask's scores read off L − S (capped),
    the ground written is L capped, as the plain capped spec writes it; only for that method."""
    import dataclasses

    from cloudcore.masks import MaskRule
    from cloudlab.candidates import SolveSpec
    from cloudlab.sites import load_site
    from cloudlab.sitescore import Solved, site_arrays, solve_specs
    from pipeline.config import SolverConfig
    from pipeline.solve.tile import solve_matrix, solver_lambda

    site = load_site("p035r032-landsat")  # shadows: S > 0 in every band
    D, _, _ = site_arrays(site)
    observed = np.isfinite(D).all(axis=0)
    plain = SolveSpec("aatm-shadow", "star", shadow_weight=1.0, cap=True)
    split = dataclasses.replace(plain, shadow_out_of_mask=True)
    assert split.name == "aatm-shadow-stark1-cap-maskLS" and split.first == plain.first
    with pytest.raises(ValueError, match="plain aatm-shadow"):
        SolveSpec("aatm", "star", shadow_out_of_mask=True)
    solved = solve_specs(D, observed, [plain, split], site.series.frame)
    assert np.array_equal(solved[split.name].ground, solved[plain.name].ground)
    solver = SolverConfig(method="aatm-shadow", lam="star", lam_scale=1.0, shadow_weight=1.0)
    frame = site.series.frame
    lam = solver_lambda(solver, *observed.shape)
    firsts = [
        solve_matrix(np.where(observed, b, 0.0).astype(np.float32), observed, solver, frame, lam, 1)
        for b in D
    ]
    assert all(f.S is not None and f.S.max() > 0 for f in firsts)
    rule, seen = MaskRule(), solved[plain.name].seen
    codes = solved[split.name].codes(rule, seen)
    assert not np.array_equal(codes, solved[plain.name].codes(rule, seen))
    # The scores are those of a capped solve whose ground holds the shadow (L − S).
    held = np.stack([f.L - f.S for f in firsts]).astype(np.float64)
    scored = Solved(D, observed, held, frame, cap=True)
    assert np.array_equal(codes, scored.codes(rule, seen))


def test_beta_reaches_the_solve_as_the_pipelines_solver_beta() -> None:
    """solve_series's ``beta`` is ``solver.beta`` of a pipeline tile's solve: the pipeline's
    default when given as 1 (SolverConfig's), another ground when not
    (``benchmarks/tolerance.py --betas``)."""
    from cloudlab.candidates import SolveSpec
    from cloudlab.sites import load_site
    from cloudlab.sitescore import site_arrays, solve_series
    from pipeline.config import SolverConfig

    site = load_site("s2_nrt_subset")
    D, _, _ = site_arrays(site)
    observed = np.isfinite(D).all(axis=0)
    spec, frame = SolveSpec("aatm", "star"), site.series.frame
    default = solve_series(D, observed, spec, frame)
    same = solve_series(D, observed, spec, frame, beta=SolverConfig().beta)
    assert np.array_equal(default.ground, same.ground)
    other = solve_series(D, observed, spec, frame, beta=0.3)
    assert not np.array_equal(default.ground, other.ground)


def test_loss_is_relative_to_the_median_and_pays_for_changed_clear_pixels() -> None:
    pred = {("rpca-auto", STEP): {s: 0.25 for s in SITES}}
    scores = _scores(pred, SITES)
    assert np.allclose(loss(scores, SITES).to_numpy(), 0.5)  # 0.25 / 0.5, fidelity 0.01 ok
    scores.loc[scores.solve == "rpca-auto", "fid"] = 0.13
    assert np.allclose(loss(scores, SITES).to_numpy(), 0.5 + 10 * 0.10)


def test_the_grid_holds_the_pipeline_settings_and_every_solve() -> None:
    from cloudlab.candidates import (
        PostStep,
        SolveSpec,
        between_of,
        flat_dark_of,
        near_of,
        persist_of,
        white_clouds_of,
    )
    from pipeline.config import MaskConfig, SolverConfig

    solver, mask = SolverConfig(), MaskConfig()
    default_step = PostStep.of(mask)
    assert default_step.name.endswith("+offset8+between")
    # The pipeline's default: a step of the grid with its third stage's white clouds, its
    # fourth stage's shadow beside its cloud (ground that stays, the fifth's, off), its
    # sixth stage's departure from the clear dates and its seventh's shadow dark in every
    # band; the grid itself has none of them.
    third = {v.name: v for step in post_steps() for v in white_clouds_of(step)}
    fourth = {n.name: n for v in third.values() for n in near_of(v)[1:]}
    fifth = {q.name for n in fourth.values() for q in persist_of(n)[1:]}
    sixth = {b.name: b for n in fourth.values() for b in between_of(n)[1:]}
    seventh = {f.name for b in sixth.values() for f in flat_dark_of(b)[1:]}
    assert default_step.name in seventh
    assert default_step.name not in {*third, *fourth, *fifth, *sixth}
    assert not any(
        s.rule.shadow_near or s.rule.persist or s.between or s.rule.shadow_flat
        for s in post_steps()
    )
    assert SolveSpec.of(solver) in SOLVES
    names = {step.name for step in post_steps()}
    assert "c6 h- s- r0 g0 keep:ground" in names and "ground" in names
    # Every rule with each whiteness ratio: once more per ratio.
    plain = {step.name for step in post_steps((0.0,))}
    assert not any(" w0" in name for name in plain) and plain < names
    assert "c6 h- s3 r0 g0 w0.2 keep:ground+offset8" in names
    assert len(names) == 3 * len(plain) - 2  # "ground" (keep_clear off) is one step either way
    assert {s.name for s in SOLVES} >= {
        "rpca-auto+refine",
        "aatm-star",
        "aatm-starx1.4",
        "aatm-starx2",
        "rpca-auto+joint",
    }


def test_refined_from_the_shared_first_solve_equals_the_pipelines_refined_solve() -> None:
    """solve_specs derives ``+refine`` from the plain spec's first solve: the same result as
    the pipeline's solve_matrix with ``refine: true``, bit for bit (the same arithmetic)."""
    from cloudlab.candidates import SolveSpec
    from cloudlab.sites import load_site
    from cloudlab.sitescore import site_arrays, solve_specs
    from pipeline.config import SolverConfig
    from pipeline.solve.tile import resolve_lambda, solve_matrix

    site = load_site("s2_nrt_subset")
    D, _, _ = site_arrays(site)
    D = D[:, :, :12]
    observed = np.isfinite(D).all(axis=0)
    specs = [SolveSpec("rpca", "auto"), SolveSpec("rpca", "auto", "refine")]
    solved = solve_specs(D, observed, specs, site.series.frame)
    solver = SolverConfig(method="rpca", lam="auto", refine=True)
    lam = resolve_lambda("auto", *observed.shape)
    for b, band in enumerate(D):
        data = np.where(observed, band, 0.0).astype(np.float32)
        ref = solve_matrix(data, observed, solver, site.series.frame, lam, threads=1)
        got = solved["rpca-auto+refine"].ground[b]
        assert np.array_equal(got, np.clip(ref.L.astype(np.float64), 0.0, 1.0))
    assert not np.array_equal(solved["rpca-auto"].ground, solved["rpca-auto+refine"].ground)


@pytest.mark.slow
def test_one_site_scores_end_to_end() -> None:
    """score_site on the smallest bundled site, one pair: every candidate and baseline scored,
    and the scores mean what they say. The post-steps without the whiteness test (a third of
    the grid: the steps given are the steps scored)."""
    from cloudlab.candidates import post_steps
    from cloudlab.heldout import pooled, score_site

    steps = post_steps(whites=(0.0,))
    rows, masks, facts = score_site("s2_nrt_subset", pairs=1, steps=steps)
    assert facts["pairs"] == 1 and facts["dates"] >= 12
    scores = pooled(pd.DataFrame(rows))
    assert set(scores.protocol) == {"drop-source", "keep-source"}
    assert np.isfinite(scores.pred).all() and np.isfinite(scores.fid).all()
    drop = scores[scores.protocol == "drop-source"].set_index(["solve", "step"])
    # The nearest-clear oracle returns the target itself where it is clear: fidelity 0.
    assert drop.loc[("nearest-clear", ""), "fid"] == 0.0
    # Keeping the observation where the mask says clear can only bring clear pixels closer to
    # what was observed than the ground alone, for the same solve.
    ground = drop.loc[("aatm-star", "ground"), "fid"]
    kept = drop.loc[("aatm-star", "c6 h- s2 r0 g0 keep:ground"), "fid"]
    assert kept <= ground
    # Every solve has every post-step; the masks are scored per solve and rule.
    per_solve = drop.reset_index().groupby("solve").size()
    assert (per_solve[[s.name for s in SOLVES]] == len({s.name for s in steps})).all()
    assert {"cloud+haze_tp", "shadow_fn"} <= set(pd.DataFrame(masks).columns)


class _FixedCodes:
    """A solve whose mask is given: what :func:`cloudlab.sitescore.mask_rows` reads of one."""

    def __init__(self, codes: np.ndarray):
        self._codes = codes

    def codes(self, rule, seen, date=None) -> np.ndarray:
        return self._codes


@pytest.mark.parametrize(("name", "buffer"), [("p035r032-landsat", 3), ("elsewhere", 0)])
def test_the_mask_is_also_scored_grown_as_its_reference_grows_its_own(name, buffer) -> None:
    """Fmask grows a detected cloud by a 7 x 7 square: a mask that finds the cloud's centre
    agrees with it fully once grown the same way, and a grown shadow is a shadow only where the
    grown cloud is not; a site whose reference grows nothing scores the grown classes as the
    plain ones."""
    from cloudcore.masks import CLOUD as SAID_CLOUD
    from cloudcore.masks import SHADOW as SAID_SHADOW
    from cloudlab.candidates import PostStep
    from cloudlab.realdata import CLEAR, CLOUD, RealSeries
    from cloudlab.sites import Site
    from cloudlab.sitescore import mask_rows
    from pipeline.config import MaskConfig

    reference = np.full((2, 15, 15), CLEAR, np.uint8)
    reference[0, 4:11, 4:11] = CLOUD  # one pixel grown by 3
    said = np.zeros_like(reference)
    said[0, 7, 7] = SAID_CLOUD
    said[0, 5, 7] = SAID_SHADOW
    series = RealSeries(
        values=np.zeros((2, 1, 15, 15)),
        reference=reference,
        dates=np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"),
        bands=("red",),
        scene_ids=("", ""),
        crs="",
        transform=(1.0, 0.0, 0.0, 0.0, -1.0, 0.0),
    )
    site = Site(name, series, "test", 30.0, "Fmask")
    default, grown = PostStep.of(MaskConfig()), PostStep.of(MaskConfig(grow=buffer or 1))
    row, row_of_grown_rule = mask_rows(site, {"s": _FixedCodes(said)}, [default, grown])
    # A rule that grows its mask itself is grown by what is left of the buffer: by nothing
    # here (the codes are given, so the counts are the plain ones).
    assert all(
        row_of_grown_rule[f"{c}_grown_{k}"] == row_of_grown_rule[f"{c}_{k}"]
        for c in ("cloud+haze", "shadow")
        for k in ("tp", "fp", "fn")
    )
    f1 = {
        c: 2 * row[f"{c}_tp"] / (2 * row[f"{c}_tp"] + row[f"{c}_fp"] + row[f"{c}_fn"])
        for c in ("cloud+haze", "cloud+haze_grown")
    }
    assert f1["cloud+haze"] == pytest.approx(2 / 50)
    if buffer:
        assert f1["cloud+haze_grown"] == 1.0
        # The shadow grown to 7 x 7 (rows 2-8), less its 5 rows under the grown cloud (4-10).
        assert row["shadow_fp"] == 1 and row["shadow_grown_fp"] == 2 * 7
    else:
        assert all(
            row[f"{c}_grown_{k}"] == row[f"{c}_{k}"]
            for c in ("cloud+haze", "shadow")
            for k in ("tp", "fp", "fn")
        )


def test_a_run_scored_before_a_mask_class_reports_it_as_nan() -> None:
    from cloudlab.sitescore import MASK_F1_CLASSES

    masks = _masks(SITES, ["aatm-star"])  # no grown counts, as a run of before them
    scores = _scores({("aatm-star", STEP): dict.fromkeys(SITES, 0.2)}, SITES)
    table = held_out(scores, masks, SITES)
    assert table["f1_shadow_grown"].isna().all() and table["f1_cloud+haze_grown"].isna().all()
    assert (table["f1_shadow"] == 2 / 4).all()
    assert {f"f1_{c}" for c in MASK_F1_CLASSES if c != "clear"} <= set(table.columns)


def test_the_cli_offers_the_scale_statistics_cloudcore_has() -> None:
    from cloudcore.anomaly import SCALE_STATISTICS
    from cloudlab.cli import _parser

    action = next(a for a in _parser()._actions if a.dest == "command")
    heldout = action.choices["heldout"]  # type: ignore[index]
    scale = next(a for a in heldout._actions if a.dest == "scale_statistic")
    assert tuple(scale.choices) == SCALE_STATISTICS and scale.default == "median"


def test_rho_reaches_every_solve_of_the_workers_and_is_recorded(tmp_path, monkeypatch) -> None:
    """``heldout --rho 3`` starts its worker processes with ``set_mu_growth(3.0)``, which makes
    every solve there take fewer iterations; without it the workers set no study's ρ, so the
    solves take the pipeline's (``solver.rho``); the run records the ρ it solved with
    (``settings.json``)."""
    import json

    import cloudcore
    import cloudlab.heldout as heldout
    from cloudcore._growth import PAPER_RHO, set_mu_growth, study_growth
    from cloudlab.cli import main
    from pipeline.config import SolverConfig

    started: list[tuple] = []

    class Pool:  # the process pool, run in this process: the initializer, then the map
        def __init__(self, max_workers, initializer, initargs) -> None:
            started.append((initializer, initargs))
            initializer(*initargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def map(self, fn, names, *args):
            return [([], [], {"site": n}) for n in names]

    monkeypatch.setattr(heldout, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(heldout, "pooled", lambda rows: rows)  # no scores to pool
    monkeypatch.setattr(heldout, "summarise", lambda out, seconds=None: {"pipeline_default": "-"})
    rng = np.random.default_rng(0)
    D = np.clip(rng.random((400, 1)) @ np.ones((1, 6)) + 0.3 * (rng.random((400, 6)) > 0.9), 0, 1)
    try:
        assert main(["heldout", "--site", "s2_nrt_subset", "--out", str(tmp_path / "a")]) == 0
        assert study_growth() is None
        slow = cloudcore.decompose(D, "aatm").iterations  # cloudcore's own: the paper's ρ
        assert main(["heldout", "--rho", "3", "--out", str(tmp_path / "b")]) == 0
        assert started == [(set_mu_growth, (None,)), (set_mu_growth, (3.0,))]
        assert study_growth() == 3.0
        fast = cloudcore.decompose(D, "aatm").iterations
    finally:
        set_mu_growth(None)
    assert fast < slow
    assert cloudcore.decompose(D, "aatm").iterations == slow  # the study's ρ is gone
    a = json.loads((tmp_path / "a" / "settings.json").read_text())
    b = json.loads((tmp_path / "b" / "settings.json").read_text())
    assert a["rho"] == SolverConfig().rho != PAPER_RHO and b["rho"] == 3.0
    # the command the report names, options at their defaults left out
    assert a["command"] == f"python -m cloudlab heldout --out {tmp_path / 'a'} --site s2_nrt_subset"
    assert b["command"] == f"python -m cloudlab heldout --out {tmp_path / 'b'} --rho 3"


def test_the_scored_solves_take_a_study_s_growth_else_the_pipeline_s() -> None:
    """:func:`cloudlab.sitescore.solve_specs` solves as the pipeline does, with ``solver.rho``,
    unless a study set another ρ (``mu_growth``): then with that one."""
    from cloudcore._growth import PAPER_RHO, mu_growth
    from cloudlab.candidates import SolveSpec
    from cloudlab.sitescore import solve_specs

    rng = np.random.default_rng(1)
    ground = rng.random((1, 144, 1)) @ np.ones((1, 1, 6)) * 0.5 + 0.2
    D = np.clip(ground + 0.4 * (rng.random((2, 144, 6)) > 0.9), 0, 1)
    observed = np.ones((144, 6), dtype=bool)
    spec = SolveSpec("aatm", "star", scale=1.4)

    def iterations() -> tuple[int, ...]:
        return tuple(solve_specs(D, observed, [spec], (12, 12))[spec.name].iterations)

    pipeline_s = iterations()
    with mu_growth(PAPER_RHO):
        paper_s = iterations()
    with mu_growth(3.0):
        faster = iterations()
    assert sum(faster) < sum(pipeline_s) < sum(paper_s)
    assert iterations() == pipeline_s


@pytest.mark.parametrize("rethreshold", [False, True])
def test_the_run_scores_the_third_stage_after_the_grid_and_keeps_one_baseline(
    rethreshold, tmp_path, monkeypatch
) -> None:
    """``run_heldout`` scores the grid, then the white clouds of the candidates chosen on it
    (:func:`cloudlab.heldout.third_stage`), on the chosen solves only; their rows join the
    grid's, the second pass's baselines and grid steps left out (each is scored once). With
    ``rethreshold``, a third pass scores the eighth stage's variants of the choices the first
    seven made on the first two passes' rows, on the same solves."""
    import cloudlab.heldout as heldout
    from cloudlab.candidates import (
        between_of,
        flat_dark_of,
        near_of,
        step_named,
        white_clouds_of,
    )

    sites = ["a", "b", "c"]
    calls: list[tuple] = []

    def rows(site: str, solve: str, step: str, pred: float) -> list[dict]:
        sums = {"pred_num": pred**2, "pred_den": 1.0, "fid_num": 1e-4, "fid_den": 1.0}
        return [
            {"site": site, "protocol": p, "pair": 0, "solve": solve, "step": step, **sums}
            for p in ("drop-source", "keep-source")
        ]

    class Pool:  # the process pool, in this process: each map answers from `rows`
        def __init__(self, max_workers, initializer, initargs) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def map(self, fn, names, pairs, seeds, solves, stats, *steps):
            calls.append((tuple(s.name for s in solves[0]), steps))
            out = []
            for n in names:
                r = rows(n, "temporal-median", "", 0.5) + rows(n, "nearest-clear", "", 0.4)
                if steps:  # the third stage: its variants, and a baseline that must not count
                    r = rows(n, "temporal-median", "", 9.0)
                    for solve in solves[0]:
                        r += [x for v in steps[0][0] for x in rows(n, solve.name, v.name, 0.1)]
                else:
                    r += rows(n, "aatm-starx1.4", STEP, 0.2) + rows(n, "rpca-auto", STEP, 0.3)
                out.append((r, [], {"site": n}))
            return out

    monkeypatch.setattr(heldout, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(heldout, "site_names", lambda: sites)
    monkeypatch.setattr(heldout, "summarise", lambda out, seconds=None: {"pipeline_default": "-"})
    monkeypatch.setattr(heldout, "_mean_f1", lambda masks, s, c: [0.0] * len(c))
    heldout.run_heldout(tmp_path, rethreshold=rethreshold)
    assert len(calls) == 2 + rethreshold and calls[1][0] == ("aatm-starx1.4", "aatm-starx1.4-cap")
    clouds = white_clouds_of(step_named(STEP))
    variants = clouds[1:] + [n for v in clouds for n in near_of(v)[1:]]  # stages three, four
    variants += [between_of(n)[1] for v in clouds for n in near_of(v)]  # and six
    variants += [  # and seven
        f for v in clouds for n in near_of(v) for b in between_of(n) for f in flat_dark_of(b)[1:]
    ]
    assert [v.name for v in calls[1][1][0][0]] == [v.name for v in variants]
    scores = pd.read_csv(tmp_path / "scores.csv", keep_default_na=False)
    median = scores[scores.solve == "temporal-median"]
    assert len(median) == 2 * len(sites) and np.allclose(median.pred, 0.5)  # once, the grid's
    scored = set(zip(scores.solve, scores.step, strict=True))
    assert {("aatm-starx1.4-cap", v.name) for v in variants} <= scored
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings["rethreshold"] is rethreshold  # summarise chooses with the stage then
    if rethreshold:
        assert calls[2][0] == calls[1][0]
        seventh = {v.name for v in calls[2][1][0][0]}
        first_two = scores[~scores.step.isin(seventh)]
        expected = heldout.threshold_stage(first_two, pd.DataFrame(), sites)  # pooled already
        assert seventh == {v.name for v in expected} and len(seventh) >= 26
        assert not seventh & {v.name for v in variants}  # not scored twice
        assert {("aatm-starx1.4-cap", s) for s in seventh} <= scored


@pytest.mark.parametrize("rho", ["1", "0.5", "nan", "inf", "abc"])
def test_a_growth_that_does_not_grow_is_refused_before_anything_runs(rho, tmp_path, capsys) -> None:
    from cloudlab.cli import main
    from cloudlab.heldout import run_heldout

    with pytest.raises(SystemExit) as exit_:
        main(["heldout", "--rho", rho, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "--rho" in capsys.readouterr().err
    if rho != "abc":
        with pytest.raises(ValueError, match="rho must be > 1"):
            run_heldout(tmp_path / "api", rho=float(rho))
    assert not (tmp_path / "out").exists() and not (tmp_path / "api").exists()


def test_the_envelope_holds_written_values_within_the_kept_observations() -> None:
    """``PostStep.envelope``: what the step writes lies within each pixel's kept observations
    (where it has three or more), what it keeps is the observation, and outside the envelope's
    reach the output is the default step's."""
    import dataclasses

    from cloudcore.kept import kept_codes
    from cloudlab.scene_choice import DEFAULT_SOLVE, DEFAULT_STEP
    from cloudlab.sites import load_site
    from cloudlab.sitescore import site_arrays, solve_specs, written_target

    site = load_site("s2_nrt_subset")
    D, _, days = site_arrays(site)
    observed = np.isfinite(D).all(axis=0)
    solved = solve_specs(D, observed, [DEFAULT_SOLVE], site.series.frame)[DEFAULT_SOLVE.name]
    step = dataclasses.replace(DEFAULT_STEP, envelope=(0.0, 1.0))
    assert step.name == DEFAULT_STEP.name + "+env0-1"
    every = solved.codes(step.rule, solved.seen)
    kept = kept_codes(every).reshape(every.shape[0], -1)
    values = np.where(kept.T[None], D, np.nan)  # (bands, pixels, dates), kept only
    enough = np.isfinite(values).sum(axis=2) >= 3
    with np.errstate(invalid="ignore"):
        low, high = np.nanmin(values, axis=2), np.nanmax(values, axis=2)
    moved = 0
    for target in range(D.shape[2]):
        codes = solved.codes(step.rule, solved.seen[target : target + 1], target)
        args = (D, days, target, solved, codes)
        plain = written_target(*args, DEFAULT_STEP, site.series.frame)
        held = written_target(*args, step, site.series.frame)
        here = kept[target] & np.isfinite(D[:, :, target])
        np.testing.assert_array_equal(held[here], D[:, :, target][here])
        inside = ~here & enough
        assert np.all(held[inside] >= low[inside]) and np.all(held[inside] <= high[inside])
        unreached = ~inside
        np.testing.assert_array_equal(held[unreached], plain[unreached])
        moved += int((held != plain).sum())
    assert moved > 0  # the default writes outside the envelope somewhere on this site


def test_every_solve_of_the_grid_is_found_by_its_name() -> None:
    """``solve_named`` reads a held-out run's solve names back as the grid's specs."""
    from cloudlab.candidates import FLOORED_SOLVES, SHADOW_SOLVES, SOLVES, solve_named

    for spec in SOLVES + SHADOW_SOLVES + FLOORED_SOLVES:
        assert solve_named(spec.name) is spec
    with pytest.raises(KeyError, match="no solve of the grid is named 'aatm-starx9'"):
        solve_named("aatm-starx9")
