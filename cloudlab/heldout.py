"""The held-out real-cloud benchmark: every candidate on every site, defaults by leave-one-site-out.

``python -m cloudlab heldout --out runs/heldout`` scores every candidate of
:mod:`cloudlab.candidates` and every baseline on every site of :mod:`cloudlab.sites`
(:mod:`cloudlab.sitescore`), then chooses the default **without the site it is scored on**: for
each site, the candidate with the least loss on the other sites is scored on it. The loss of a
candidate on a set of sites is the mean over them of

    r_pred / r_median + 10 · max(0, r_fid − 0.03)

with r_pred its prediction r (source date dropped), r_median the temporal median's on that site
and r_fid its fidelity r on the target's clear pixels: a candidate is judged by how much better
than the median it fills clouds, and pays for changing clear pixels by more than 0.03. Where the
best aATM-based candidate's loss is within the spread of the best's (the standard error of their
per-site difference), the aATM one is taken: it is the paper's model.

Writes ``scores.csv`` (every candidate, site and protocol), ``masks.csv``, ``heldout.csv`` (the
choice for each left-out site and its scores there), ``default.json`` (the choice on all sites),
``settings.json`` (the solves' growth of μ and the run's command) and ``report.md``.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cloudcore._growth import check_growth, set_mu_growth
from cloudcore.catalog import GROUND_FLOOR
from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.candidates import (
    CAPPED_SOLVES,
    FLOORED_SOLVES,
    SHADOW_SOLVES,
    SOLVES,
    WHITE_RATIOS,
    PostStep,
    SolveSpec,
    between_of,
    flat_dark_of,
    ground_suffix,
    near_of,
    persist_of,
    post_steps,
    step_named,
    thresholds_of,
    white_clouds_of,
    without_ground_suffix,
)
from cloudlab.heldout_report import FlooredTable, write_report
from cloudlab.sites import Site, load_site, site_names
from cloudlab.sitescore import (
    MASK_F1_CLASSES,
    mask_rows,
    pasted_pair,
    site_arrays,
    site_pairs,
    solve_specs,
)
from pipeline.config import SolverConfig

__all__ = [
    "FIDELITY_LIMIT",
    "choose",
    "least_loss",
    "least_of",
    "loss",
    "mask_f1",
    "read_picks",
    "run_command",
    "run_heldout",
    "runs_in_pipeline",
    "score_site",
    "summarise",
    "threshold_stage",
    "white_of",
    "with_white",
]

log = logging.getLogger(__name__)

#: r on clear pixels above which a candidate pays in the loss (the issue's bound).
FIDELITY_LIMIT = 0.03
PROTOCOLS = ("drop-source", "keep-source")


def score_site(
    name: str,
    pairs: int = 4,
    seed: int = 0,
    solves: tuple[SolveSpec, ...] = SOLVES,
    scale_statistic: str = "median",
    steps: list[PostStep] | None = None,
) -> tuple[list[dict], list[dict], dict]:
    """Every candidate (``solves`` × the post-steps ``steps``, None: :func:`post_steps`) and
    baseline on one site: prediction/fidelity sums, mask counts, facts; ``scale_statistic``
    that of the anomaly scale (:func:`cloudcore.anomaly.anomaly_scale`)."""
    site = load_site(name)
    series = site.series
    n = series.dates.size
    frame = series.frame
    D_all, reference, days = site_arrays(site)
    steps = post_steps() if steps is None else steps
    rows: list[dict[str, Any]] = []
    chosen = site_pairs(site, pairs, seed)
    started = time.perf_counter()
    for k, (t, s) in enumerate(chosen):
        pair = pasted_pair(D_all, reference, t, s)
        for protocol in PROTOCOLS:
            kept = pair.kept(days, protocol)
            solved = solve_specs(
                kept.D, kept.observed, solves, frame, scale_statistic=scale_statistic
            )
            for row in kept.rows(frame, solved, steps):
                rows.append({"site": name, "protocol": protocol, "pair": k, **row})
    observed = series.observed.reshape(n, -1).T
    solved = solve_specs(D_all, observed, solves, frame, scale_statistic=scale_statistic)
    masks = [{"site": name, **row} for row in mask_rows(site, solved, steps)]
    facts = _facts(site, chosen, time.perf_counter() - started)
    log.info("site %s: %d pairs in %.0f s", name, len(chosen), facts["seconds"])
    return rows, masks, facts


def _facts(site: Site, pairs: list[tuple[int, int]], seconds: float) -> dict[str, Any]:
    s = site.series
    ref = s.reference
    seen = ref != 255
    return {
        "site": site.name,
        "sensor": site.sensor,
        "gsd_m": site.gsd,
        "reference": site.reference_source,
        "dates": int(s.dates.size),
        "bands": ",".join(s.bands),
        "size": f"{s.frame[0]}x{s.frame[1]}",
        "cloud_pct": round(100 * float((ref == 2).sum() / max(seen.sum(), 1)), 1),
        "shadow_pct": round(100 * float((ref == 3).sum() / max(seen.sum(), 1)), 1),
        "pairs": len(pairs),
        "seconds": round(seconds, 1),
    }


def pooled(rows: pd.DataFrame) -> pd.DataFrame:
    """r per (site, protocol, solve, step), pooled over pairs and bands."""
    keys = ["site", "protocol", "solve", "step"]
    sums = rows.groupby(keys, sort=False)[["pred_num", "pred_den", "fid_num", "fid_den"]].sum()
    out = pd.DataFrame(
        {
            "pred": np.sqrt(sums.pred_num / sums.pred_den),
            "fid": np.sqrt(sums.fid_num / sums.fid_den),
        }
    )
    return out.reset_index()


def loss(scores: pd.DataFrame, sites: list[str]) -> pd.Series:
    """The loss (module docstring) of every candidate on ``sites``, per site: a frame indexed by
    candidate ``solve | step`` with one column per site."""
    drop = scores[(scores.protocol == "drop-source") & scores.site.isin(sites)]
    median = drop[drop.solve == "temporal-median"].set_index("site").pred
    cand = drop[drop.step != ""].copy()
    cand["loss"] = cand.pred / cand.site.map(median) + 10 * np.maximum(
        0.0, cand.fid - FIDELITY_LIMIT
    )
    cand["candidate"] = cand.solve + " | " + cand.step
    return cand.pivot(index="candidate", columns="site", values="loss")


def runs_in_pipeline(solve: str) -> bool:
    """Whether the pipeline runs a scored solve (``solver.method``, ``lam``, ``lam_scale``,
    ``refine``): the default is chosen among these. The ``+joint`` re-solve needs every band's
    first solve before any band's second (a phase the pipeline does not have yet); it is scored
    for the record; so is each date's level taken out of the darkening (``…-level``, a benchmark
    variant of the floor)."""
    return not solve.endswith(("+joint", "-level"))


def choose(
    scores: pd.DataFrame,
    sites: list[str],
    solves: tuple[str, ...] | None = None,
    masks: pd.DataFrame | None = None,
    rethreshold: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The candidate chosen on ``sites``, in seven stages, eight with ``rethreshold``: among the
    candidates without the mask's whiteness test, the one of least mean loss
    (:func:`least_loss`); then that candidate with each whiteness ratio scored, the one of least
    mean loss (no test on a tie); then that one with white clouds
    (:func:`cloudlab.candidates.white_clouds_of`) where they are scored, the one of least mean
    loss (as it is on a tie) with the solve's ground bounded as the pipeline bounds it
    (:func:`capped`), where that is scored; then that one with a shadow beside its cloud
    (:func:`cloudlab.candidates.near_of`) where scored, chosen the same way; then that one with
    ground that stays (:func:`cloudlab.candidates.persist_of`) where scored (``--persist``), the
    same way; then that one with each pixel's own departure interpolated from its clear dates
    (:func:`cloudlab.candidates.between_of`), the same way; then that one with a shadow dark
    in every band (:func:`cloudlab.candidates.flat_dark_of`), the same way; then that one with
    each of the
    mask's thresholds again (:func:`cloudlab.candidates.thresholds_of`) where scored, the same
    way (only with ``rethreshold``, the run's ``--rethreshold``: where the later stages add
    nothing the variants are the grid's own steps, so a run without it, or a choice made to know
    what the eighth stage must score, would otherwise take them).

    Each stage is one step added to a default chosen without it: offered in the same grid as
    every other setting at once, the folds' choices scattered (thresholds lowered because the
    whiteness test then removed their false clouds) and did worse held out
    (docs/REAL-CLOUDS.md)."""
    later = (
        scores.step.map(_has_white_clouds)
        | scores.step.map(_has_near)
        | scores.step.map(_has_persist)
        | scores.step.map(_has_between)
        | scores.step.map(_has_flat)
    )
    plain = scores[(scores.step.map(white_of) == 0.0) & ~later]
    best, info = least_loss(plain, sites, solves, masks)
    table = loss(scores, sites).dropna()
    whites = [with_white(best, w) for w in WHITE_RATIOS]
    best, info["white"] = least_of(table, whites, lambda c: f"{white_of(c.split(' | ')[1]):g}")
    # White clouds are set for the candidate as the pipeline runs it, its ground bounded as by
    # default (capped: docs/REAL-CLOUDS.md, "White clouds"), where that solve is scored.
    best, info["white_clouds"] = _least_as_run(table, _stage_variants(best, white_clouds_of))
    best, info["shadow_near"] = _least_as_run(table, _stage_variants(best, near_of))
    best, info["persist"] = _least_as_run(table, _stage_variants(best, persist_of))
    best, info["between"] = _least_as_run(table, _stage_variants(best, between_of))
    best, info["shadow_flat"] = _least_as_run(table, _stage_variants(best, flat_dark_of))
    if rethreshold:
        best, info["thresholds"] = _least_as_run(table, _stage_variants(best, thresholds_of))
    return best, info


def _least_as_run(table: pd.DataFrame, variants: list[str]) -> tuple[str, dict[str, float]]:
    """Of a candidate's ``variants`` (itself first), the one of least mean loss as the
    pipeline runs it (:func:`_as_run`) where that is scored, else as named; itself on a tie.
    Returns it and each variant's mean loss (:func:`least_of`)."""
    run = [_as_run(v) for v in variants]
    ranked = run if all(r in table.index for r in run) else variants
    chosen, losses = least_of(table, ranked, lambda c: c.split(" | ")[1])
    return variants[ranked.index(chosen)], losses


def _as_run(candidate: str) -> str:
    """A candidate as the pipeline runs it: its ground capped (and floored) as by default where
    its solve bounds no ground yet; as it is where it does (``…-cap``, ``…-cap-floor…``)."""
    solve = candidate.split(" | ")[0]
    return capped(candidate, GROUND_FLOOR) if without_ground_suffix(solve) == solve else candidate


def least_of(
    table: pd.DataFrame, options: list[str], label: Callable[[str], str]
) -> tuple[str, dict[str, float]]:
    """Of the ``options`` scored in ``table`` (:func:`loss`), the one of least mean loss, the
    first of equal ones (the first option alone where the others are not scored), and each
    one's mean loss by ``label`` (empty with one option).

    Parameters
    ----------
    table
        :func:`loss`'s table: a row per candidate, a column per site.
    options
        Candidates, in the order ties are broken.
    label
        Names a candidate in the returned losses.

    Returns
    -------
    tuple
        The candidate chosen and the mean losses.
    """
    scored = [c for c in dict.fromkeys(options) if c in table.index]
    if len(scored) < 2:
        return options[0], {}
    means = table.loc[scored].mean(axis=1)
    return str(means.idxmin()), {label(c): float(means[c]) for c in scored}


def _stage_variants(candidate: str, variants_of: Callable[[PostStep], list[PostStep]]) -> list[str]:
    """A candidate's variants in one stage of :func:`choose`: its post-step's
    ``variants_of`` (the step itself first), on its solve.

    Parameters
    ----------
    candidate
        ``solve | step``, as :func:`loss` indexes them.
    variants_of
        A stage's variants of a post-step (:func:`cloudlab.candidates.white_clouds_of`,
        :func:`cloudlab.candidates.near_of`).

    Returns
    -------
    list of str
        ``candidate`` first; ``candidate`` alone where its step is not one
        :func:`cloudlab.candidates.step_named` knows (nothing to vary).
    """
    solve, step = candidate.split(" | ")
    try:
        steps = variants_of(step_named(step))
    except KeyError:
        return [candidate]
    return [f"{solve} | {v.name}" for v in steps]


def _has_near(step: str) -> bool:
    return any(part.startswith("n") and "x" in part for part in str(step).split(" "))


def _has_persist(step: str) -> bool:
    return any(part.startswith("p") and part[1:2].isdigit() for part in str(step).split(" "))


def _has_flat(step: str) -> bool:
    return any(part.startswith("f") and "x" in part for part in str(step).split(" "))


def _has_between(step: str) -> bool:
    return str(step).endswith("+between")


def _has_white_clouds(step: str) -> bool:
    return any(part.startswith("wc") for part in str(step).split(" "))


def white_of(step: str) -> float:
    """The whiteness ratio of a post-step's label.

    Parameters
    ----------
    step
        A :attr:`cloudlab.candidates.PostStep.name`, e.g. ``c6 h- s3 r0 g0 w0.2 keep:ground``.

    Returns
    -------
    float
        The ratio after ``w`` (0 without the test).
    """
    for part in str(step).split(" "):
        if part.startswith("w") and part[1:].replace(".", "", 1).isdigit():
            return float(part[1:])
    return 0.0


def with_white(candidate: str, white: float) -> str:
    """A candidate with another whiteness ratio.

    Parameters
    ----------
    candidate
        ``solve | step``, as :func:`loss` indexes them.
    white
        The ratio to set (0: no test).

    Returns
    -------
    str
        The candidate with its mask rule's ratio set; unchanged for ``ground`` (keep_clear
        off: the mask does not change the output).
    """
    solve, step = candidate.split(" | ")
    if step == "ground":
        return candidate
    rule, keep = step.rsplit(" ", 1)
    rule = " ".join(p for p in rule.split(" ") if white_of(p) == 0.0)
    return f"{solve} | {rule}{f' w{white:g}' if white > 0 else ''} {keep}"


def least_loss(
    scores: pd.DataFrame,
    sites: list[str],
    solves: tuple[str, ...] | None = None,
    masks: pd.DataFrame | None = None,
) -> tuple[str, dict[str, Any]]:
    """The candidate of least mean loss on ``sites`` among ``solves`` (None: every scored solve
    the pipeline runs, :func:`runs_in_pipeline`), the aATM one if within the spread.
    Candidates whose outputs score the same (e.g. haze kept as observed, or no haze class at
    all) are told apart by the mean cloud + haze F1 of their mask on ``sites`` (``masks``), then
    by name, so the choice does not depend on the order of the rows."""
    table = loss(scores, sites).dropna()
    solve_of = [c.split(" | ")[0] for c in table.index]
    table = table[[runs_in_pipeline(s) if solves is None else s in solves for s in solve_of]]
    order = pd.DataFrame({"loss": table.mean(axis=1).round(12)})
    order["f1"] = _mean_f1(masks, sites, order.index) if masks is not None else 0.0
    order["name"] = order.index
    order = order.sort_values(["loss", "f1", "name"], ascending=[True, False, True])
    mean = table.mean(axis=1)[order.index]
    best = str(mean.index[0])
    aatm = [c for c in mean.index if c.startswith("aatm")]
    info: dict[str, Any] = {"best": best, "best_loss": float(mean.iloc[0])}
    if aatm and not best.startswith("aatm"):
        a = aatm[0]
        diff = table.loc[a] - table.loc[best]
        spread = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0
        info.update(aatm=a, aatm_loss=float(mean[a]), spread=spread)
        if float(diff.mean()) <= spread:
            return a, info
    return best, info


def _mean_f1(masks: pd.DataFrame, sites: list[str], candidates: pd.Index) -> list[float]:
    """Each candidate's mean cloud + haze F1 over ``sites`` (0 where none is known)."""
    f1 = mask_f1(masks)
    f1 = f1[f1.site.isin(sites)].groupby(["solve", "rule"])["f1_cloud+haze"].mean()
    out = []
    for cand in candidates:
        solve, step = cand.split(" | ")
        value = f1.get((solve, step.rsplit(" ", 1)[0]), np.nan)
        out.append(0.0 if pd.isna(value) else float(value))
    return out


def read_picks(heldout: Path) -> tuple[dict[str, str], str]:
    """Each site's capped fold choice (``heldout-capped.csv``) and the pipeline's default
    (``default.json``) of a held-out run's folder ``heldout``; exits with a one-line message
    naming the command that writes them when they are not there."""
    table = heldout / "heldout-capped.csv"
    if not table.is_file():
        raise SystemExit(
            f"{table}: not found; run `python -m cloudlab heldout --out {heldout}` first"
        )
    capped = pd.read_csv(table)
    default = json.loads((heldout / "default.json").read_text())["pipeline_default"]
    return dict(zip(capped.site, capped.chosen, strict=True)), str(default)


def mask_f1(masks: pd.DataFrame) -> pd.DataFrame:
    """The F1 of every class of :data:`~cloudlab.sitescore.MASK_F1_CLASSES` (``f1_{class}``)
    per row of a run's mask counts (:func:`~cloudlab.sitescore.mask_rows`): site, solve, rule."""
    out = masks[["site", "solve", "rule"]].copy()
    out["rule"] = out.rule.str.strip()
    for cls in MASK_F1_CLASSES:
        if f"{cls}_tp" not in masks:  # a run scored before the class was (NaN)
            out[f"f1_{cls}"] = np.nan
            continue
        tp, fp, fn = (masks[f"{cls}_{k}"] for k in ("tp", "fp", "fn"))
        out[f"f1_{cls}"] = 2 * tp / (2 * tp + fp + fn).replace(0, np.nan)
    return out


#: The solves the lab also scores capped (and floored): :data:`cloudlab.candidates.CAPPED_SOLVES`
#: without their ground's suffix.
_CAPPABLE = frozenset(without_ground_suffix(s.name) for s in CAPPED_SOLVES)


def capped(candidate: str, floor: float | None = None, level: bool = False) -> str:
    """A candidate with its solve's ground capped (``…-cap``, :data:`cloudlab.candidates.
    CAPPED_SOLVES`) and with ``floor`` floored at that quantile (``…-cap-floor0.25``,
    :data:`cloudlab.candidates.FLOORED_SOLVES`), whatever its own ground was; unchanged if the
    lab scores no capped variant of its solve (refined, joint, ``aatm-shadow``).

    Parameters
    ----------
    candidate
        ``solve | step``, as :func:`loss` indexes them.
    floor
        The floor's quantile; None: capped only.
    level
        With ``floor``, each date's own level taken out of the darkening (``…-level``).

    Returns
    -------
    str
        The capped candidate.
    """
    solve, step = candidate.split(" | ")
    if without_ground_suffix(solve) not in _CAPPABLE:
        return candidate
    return f"{without_ground_suffix(solve)}{ground_suffix(True, floor, level)} | {step}"


def uncapped(candidate: str) -> str:
    """A candidate with its solve's ground neither capped nor floored (the inverse of
    :func:`capped`)."""
    solve, step = candidate.split(" | ")
    return f"{without_ground_suffix(solve)} | {step}"


def fold_choices(
    scores: pd.DataFrame,
    masks: pd.DataFrame,
    sites: list[str],
    solves: tuple[str, ...] | None = None,
    rethreshold: bool = False,
) -> dict[str, str]:
    """Each site's candidate chosen on the other sites (:func:`choose`, among ``solves``, with
    its eighth stage with ``rethreshold``)."""
    others = {site: [s for s in sites if s != site] for site in sites}
    return {site: choose(scores, others[site], solves, masks, rethreshold)[0] for site in sites}


def held_out(
    scores: pd.DataFrame,
    masks: pd.DataFrame,
    sites: list[str],
    solves: tuple[str, ...] | None = None,
    cap: bool | None = None,
    picks: dict[str, str] | None = None,
    floor: float | None = None,
    level: bool = False,
    rethreshold: bool = False,
) -> pd.DataFrame:
    """For each site, the candidate chosen on the others (``picks``, else
    :func:`fold_choices` among ``solves``; with ``cap`` True its ground then capped and with
    ``floor`` floored, :func:`capped`, False neither, :func:`uncapped`; None as chosen) and its
    scores on the site."""
    f1_table = mask_f1(masks)
    if picks is None:
        picks = fold_choices(scores, masks, sites, solves, rethreshold)
    rows = []
    for site in sites:
        pick = picks[site]
        pick = pick if cap is None else capped(pick, floor, level) if cap else uncapped(pick)
        solve, step = pick.split(" | ")
        here = scores[(scores.site == site) & (scores.solve == solve) & (scores.step == step)]
        base = scores[(scores.site == site) & (scores.step == "")]
        rule = step.rsplit(" ", 1)[0] if step != "ground" else ""
        f1 = f1_table[(f1_table.site == site) & (f1_table.solve == solve) & (f1_table.rule == rule)]
        row: dict[str, Any] = {"site": site, "chosen": pick}
        for protocol in ("drop-source", "keep-source"):
            tag = "drop" if protocol == "drop-source" else "keep"
            row[f"pred_{tag}"] = float(here[here.protocol == protocol].pred.iloc[0])
            for b in ("temporal-median", "nearest-clear"):
                row[f"{b}_{tag}"] = float(
                    base[(base.protocol == protocol) & (base.solve == b)].pred.iloc[0]
                )
        row["fid"] = float(here[here.protocol == "drop-source"].fid.iloc[0])
        for cls in MASK_F1_CLASSES:
            if cls != "clear":  # the tables report the classes a mask finds
                row[f"f1_{cls}"] = float(f1[f"f1_{cls}"].iloc[0]) if len(f1) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def run_heldout(
    out: Path,
    sites: list[str] | None = None,
    pairs: int = 4,
    workers: int = 2,
    shadow_model: bool = False,
    scale_statistic: str = "median",
    floor: bool = False,
    rho: float | None = None,
    persist: bool = False,
    rethreshold: bool = False,
) -> dict[str, Any]:
    """Score every site, choose by leave-one-site-out, write the tables (module docstring).

    Parameters
    ----------
    out
        Output folder.
    sites
        Site names (None: every bundled site).
    pairs
        (target, source) pairs per site.
    workers
        Sites scored at once (processes).
    shadow_model
        Also score aATM with a shadow layer (:data:`cloudlab.candidates.SHADOW_SOLVES`), and
        choose among them too.
    floor
        Also score every capped solve floored (:data:`cloudlab.candidates.FLOORED_SOLVES`),
        and report the floored tables.
    scale_statistic
        The statistic of the masks' anomaly scale (:func:`cloudcore.anomaly.anomaly_scale`):
        ``median``, the pipeline's, or ``quartile`` (measured, not the default).
    rho
        The ALM's growth of μ per iteration in every solve (None: the pipeline's,
        ``solver.rho``); another changes the iterations and the result (docs/REAL-CLOUDS.md,
        "The ALM's growth ρ").
    persist
        Also score ground that stays (:func:`cloudlab.candidates.persist_of`) for the fifth
        stage of :func:`choose` (measured, not among the defaults' candidates: the loss cannot
        see the real clouds it keeps where they are in place on other days;
        docs/REAL-CLOUDS.md, "Ground that stays").
    rethreshold
        Also score the eighth stage of :func:`choose`: the mask's thresholds again
        (:func:`cloudlab.candidates.thresholds_of`) of each fold's choice and of the choice on
        all sites after the first seven, once those are scored.

    Returns
    -------
    dict
        The default chosen on all sites and the run's time.
    """
    if rho is not None:
        check_growth(rho)  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    names = site_names() if sites is None else list(sites)
    started = time.perf_counter()
    with ProcessPoolExecutor(
        max_workers=workers, initializer=set_mu_growth, initargs=(rho,)
    ) as pool:
        solves = (
            SOLVES + (SHADOW_SOLVES if shadow_model else ()) + (FLOORED_SOLVES if floor else ())
        )
        count = len(names)
        args = [pairs] * count, [0] * count, [solves] * count, [scale_statistic] * count
        results = list(pool.map(score_site, names, *args))
        rows = pd.DataFrame([r for res in results for r in res[0]])
        masks = pd.DataFrame([r for res in results for r in res[1]])
        # The third stage's variants, of the candidates the first two chose (choose).
        stage_solves, stage_steps = third_stage(pooled(rows), masks, names, solves, persist)
        args = [pairs] * count, [0] * count, [stage_solves] * count, [scale_statistic] * count
        if stage_steps:
            staged = list(pool.map(score_site, names, *args, [stage_steps] * count))
            rows, masks = _with_staged(rows, masks, staged, stage_steps)
        # The eighth stage's, of the choices the first seven made once their steps are scored.
        last_steps = threshold_stage(pooled(rows), masks, names) if rethreshold else []
        if last_steps:
            last = list(pool.map(score_site, names, *args, [last_steps] * count))
            rows, masks = _with_staged(rows, masks, last, last_steps)
    pooled(rows).to_csv(out / "scores.csv", index=False)
    masks.to_csv(out / "masks.csv", index=False)
    pd.DataFrame([res[2] for res in results]).to_csv(out / "sites.csv", index=False)
    # The solves' growth of μ, which no table shows: a run with --rho is told apart by it; and
    # the command, which the report names.
    command = run_command(
        out,
        sites=sites,
        pairs=pairs,
        shadow_model=shadow_model,
        floor=floor,
        scale_statistic=scale_statistic,
        rho=rho,
        persist=persist,
        rethreshold=rethreshold,
    )
    # And whether the eighth stage of choose was scored (summarise chooses with it then).
    growth = SolverConfig().rho if rho is None else rho
    settings = {"rho": growth, "command": command, "rethreshold": rethreshold}
    (out / "settings.json").write_text(json.dumps(settings))
    return summarise(out, seconds=time.perf_counter() - started)


def _with_staged(
    rows: pd.DataFrame, masks: pd.DataFrame, staged: list[Any], steps: list[PostStep]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The grid's ``rows`` and ``masks`` with a later stage's (``staged``: :func:`score_site`'s
    results for ``steps``), its rows of those steps only (not the baselines again)."""
    extra = pd.DataFrame([r for res in staged for r in res[0]])
    if extra.empty:
        return rows, masks
    rows = pd.concat([rows, extra[extra.step.isin({s.name for s in steps})]])
    return rows, pd.concat([masks, pd.DataFrame([r for res in staged for r in res[1]])])


def threshold_stage(scores: pd.DataFrame, masks: pd.DataFrame, sites: list[str]) -> list[PostStep]:
    """What the eighth stage of :func:`choose` needs scored: the mask's thresholds again
    (:func:`cloudlab.candidates.thresholds_of`) of each fold's choice and of the choice on all
    ``sites``, as the first seven stages make them on ``scores`` (the grid's pooled scores and
    the third stage's, :func:`third_stage`). Empty with fewer than two sites.

    Parameters
    ----------
    scores, masks
        Pooled scores (:func:`pooled`) and mask counts.
    sites
        The sites.

    Returns
    -------
    list of PostStep
        The variants, each once, without the choices themselves (already scored).
    """
    if scores.empty or len(sites) < 2:
        return []
    picks = _staged_choices(scores, masks, sites)
    steps = [v for c in picks for v in thresholds_of(step_named(c.split(" | ")[1]))[1:]]
    return list({s.name: s for s in steps}.values())


def run_command(out: Path, **options: Any) -> str:
    """The ``python -m cloudlab heldout`` command line of :func:`run_heldout` run with these
    keyword ``options``, each flag as the CLI spells it (``--site`` once a site); those at
    run_heldout's own defaults are left out, and ``workers``, which changes no score."""
    defaults = inspect.signature(run_heldout).parameters
    words = ["python -m cloudlab heldout", f"--out {out}"]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if name == "workers" or value == defaults[name].default:
            continue
        if name == "sites":
            words += [f"--site {site}" for site in value]
        elif value is True:
            words.append(flag)
        else:
            words.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    return " ".join(words)


def _staged_choices(scores: pd.DataFrame, masks: pd.DataFrame, sites: list[str]) -> list[str]:
    """Each fold's choice and the choice on all ``sites``, through the first seven stages of
    :func:`choose`: the candidates whose later stages a run scores next."""
    return [*fold_choices(scores, masks, sites).values(), choose(scores, sites, masks=masks)[0]]


def third_stage(
    scores: pd.DataFrame,
    masks: pd.DataFrame,
    sites: list[str],
    solves: tuple[SolveSpec, ...],
    persist: bool = False,
) -> tuple[tuple[SolveSpec, ...], list[PostStep]]:
    """What the third to seventh stages of :func:`choose` need scored beyond the grid: the
    white clouds (:func:`cloudlab.candidates.white_clouds_of`) of each fold's choice and of the
    choice on all ``sites``, and each of those (and the choice itself) with a shadow beside its
    cloud (:func:`cloudlab.candidates.near_of`), and each of all those with ground that stays
    (:func:`cloudlab.candidates.persist_of`), with the departure from the clear dates
    (:func:`cloudlab.candidates.between_of`) and with a shadow dark in every band
    (:func:`cloudlab.candidates.flat_dark_of`), on every solve of ``solves`` that shares a
    chosen solve's method and λ (its ground capped, floored or not: the held-out tables score
    each way). Only these: a table whose folds choose among other solves (the joint
    re-solve's, a floor's own choice) gets no third or fourth stage where its choice differs
    (:func:`choose` keeps it as it is).

    Parameters
    ----------
    scores, masks
        The grid's pooled scores (:func:`pooled`) and mask counts.
    sites
        The sites.
    solves
        The solves scored.
    persist
        Also the fifth stage's ground that stays (``--persist``).

    Returns
    -------
    tuple
        The solves and the post-steps to score.
    """
    if scores.empty or len(sites) < 2:  # no fold to choose on
        return (), []
    picks = _staged_choices(scores, masks, sites)
    bases = {without_ground_suffix(c.split(" | ")[0]) for c in picks}
    chosen = tuple(s for s in solves if without_ground_suffix(s.name) in bases)
    clouds = [white_clouds_of(step_named(c.split(" | ")[1])) for c in picks]
    steps = [v for variants in clouds for v in variants[1:]]
    # The fourth stage's too, of every white-cloud variant: which one the third stage takes is
    # known only once they are scored.
    near_lists = [near_of(v) for variants in clouds for v in variants]
    steps += [n for variants in near_lists for n in variants[1:]]
    nears = [n for variants in near_lists for n in variants]
    if persist:  # and the fifth's, of every one of those (with the shadow or not), likewise
        steps += [q for n in nears for q in persist_of(n)[1:]]
    # And the sixth's, of every step a fold can reach by then (the fifth's only with --persist).
    reached = [q for n in nears for q in (persist_of(n) if persist else [n])]
    betweens = [between_of(q) for q in reached]
    steps += [b for pair in betweens for b in pair[1:]]
    # And the seventh's, of every one of those, with the departure or without.
    steps += [f for pair in betweens for b in pair for f in flat_dark_of(b)[1:]]
    return chosen, list(dict.fromkeys(steps))


def summarise(out: Path, seconds: float | None = None) -> dict[str, Any]:
    """Choose and report from the tables a run wrote in ``out`` (``scores.csv``, ``masks.csv``,
    ``sites.csv``): ``heldout.csv``, ``heldout-joint.csv``, ``heldout-capped.csv``,
    ``heldout-uncapped.csv``, with floored solves scored ``heldout-floor<q>.csv`` and
    ``heldout-floor<q>-chosen.csv`` for each floor quantile, ``default.json``, ``report.md``."""
    read = {"keep_default_na": False, "na_values": ["nan", "NaN"]}
    scores = pd.read_csv(out / "scores.csv", **read)
    masks = pd.read_csv(out / "masks.csv", **read)
    facts = pd.read_csv(out / "sites.csv", **read)
    names = list(facts.site)
    # Runs from before --rethreshold was recorded did not score the eighth stage.
    settings = out / "settings.json"
    recorded = json.loads(settings.read_text()) if settings.exists() else {}
    rethreshold = bool(recorded.get("rethreshold", False))
    # The capped tables change only the solve.
    picks = fold_choices(scores, masks, names, rethreshold=rethreshold)
    table = held_out(scores, masks, names, picks=picks)
    table.to_csv(out / "heldout.csv", index=False)
    every = tuple(sorted(set(scores.solve) - set(MULTIBAND_BASELINES)))
    joint = held_out(scores, masks, names, every, rethreshold=rethreshold)
    joint.to_csv(out / "heldout-joint.csv", index=False)
    # The pipeline's default caps the ground (solver.cap_ground), adopted by conditions on the
    # held-out scores written before they were run, not by the loss, which never sees an
    # overcast date (docs/REAL-CLOUDS.md, "Overcast dates"): each fold's choice, capped.
    with_cap = held_out(scores, masks, names, cap=True, picks=picks)
    with_cap.to_csv(out / "heldout-capped.csv", index=False)
    without = held_out(scores, masks, names, cap=False, picks=picks)
    without.to_csv(out / "heldout-uncapped.csv", index=False)
    # With --floor (solver.floor_ground), judged two ways (docs/REAL-CLOUDS.md, "Shadows: the
    # ground floored"): each fold's choice capped and floored at q, and each fold's choice
    # among the floored candidates at q alone (its mask thresholds chosen given the floor).
    scored = set(scores.solve)
    # The plain floors first, then those with the date's level taken out (the report's order).
    variants = sorted({(s.level, s.floor) for s in FLOORED_SOLVES if s.name in scored})
    floored: list[tuple[FlooredTable, pd.DataFrame]] = []
    for level, q in variants:
        assert q is not None  # FLOORED_SOLVES are floored
        suffix = ground_suffix(True, q, level)
        at_q = tuple(sorted(s for s in scored if s.endswith(suffix)))
        floored += [
            (
                FlooredTable(q, level, chosen=False),
                held_out(scores, masks, names, cap=True, picks=picks, floor=q, level=level),
            ),
            (
                FlooredTable(q, level, chosen=True),
                held_out(scores, masks, names, at_q, rethreshold=rethreshold),
            ),
        ]
    for key, t in floored:
        t.to_csv(out / f"heldout-{key.stem}.csv", index=False)
    # Runs from before the command was recorded ran the benchmark of record's.
    command = recorded.get("command")
    default, info = choose(scores, names, masks=masks, rethreshold=rethreshold)
    # The pipeline's ground as it bounds it by default (solver.cap_ground, solver.floor_ground).
    pipeline_default = capped(default, GROUND_FLOOR)
    summary: dict[str, Any] = {"default": default, "pipeline_default": pipeline_default, **info}
    if seconds is not None:
        summary["seconds"] = round(seconds, 1)
    (out / "default.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    tables = {"plain": table, "joint": joint, "capped": with_cap, "uncapped": without}
    write_report(out, facts, scores, tables, summary, floored, command=command or run_command(out))
    return summary
