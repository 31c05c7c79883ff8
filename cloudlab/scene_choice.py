"""The scene chooses its own solve: its own mask's clouds pasted on its own clear dates (#44).

The held-out benchmark (:mod:`cloudlab.heldout`) chooses one solve for every scene. A scene can
instead ask itself the benchmark's question without a reference mask: solve the whole series
once with the default, take the default's own mask as the reference, pick (clear target,
cloudy source) pairs from it by the benchmark's rules (:data:`cloudlab.sitescore.PAIRS`), paste
the source's flagged pixels on the target in every band, drop the source, and solve that series
again with each candidate. Each candidate's loss on these pseudo-pairs is the benchmark's
(:func:`cloudlab.heldout.loss`), with "clear" meaning the scene's own mask's clear.

**The rule** (:func:`spread_choice`), the benchmark's own preference for the paper's model
applied within the scene: the default (aATM) is kept unless another candidate's loss is lower
by more than the spread, the standard error over the pseudo-pairs of its per-pair loss
difference to the default; among the candidates that are, the one of least pooled loss. The
rule has no parameter of its own, and it reads neither the site's reference nor any other site,
so a site's reference scores of the scene's choice are held-out figures for the choice.

:data:`CANDIDATES` is the grid both λ rules span in the held-out benchmark (λ̂* and 1/√d, each
×1, ×1.4, ×2; docs/REAL-CLOUDS.md), every one unrefined with its ground capped, as the
pipeline's default solves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cloudlab.candidates import PostStep, SolveSpec
from cloudlab.heldout import loss, pooled
from cloudlab.realpaste import choose_pairs
from cloudlab.sitescore import PAIRS, WholeSeries, pasted_pair, solve_series, solve_specs
from pipeline.config import MaskConfig, SolverConfig

__all__ = [
    "CANDIDATES",
    "DEFAULT_KEY",
    "DEFAULT_SOLVE",
    "DEFAULT_STEP",
    "OWN",
    "PROTOCOL",
    "beyond_spread",
    "candidate_label",
    "fold_choice",
    "own_codes",
    "own_pairs",
    "pair_losses",
    "scene_rows",
    "scored_rows",
    "spread_choice",
    "unanimous_choice",
]

#: The pipeline's default solve and post-step.
DEFAULT_SOLVE = SolveSpec.of(SolverConfig())
DEFAULT_STEP = PostStep.of(MaskConfig())
#: The protocol the choice scores: the source date dropped (the benchmark's primary).
PROTOCOL = "drop-source"
#: What a scene's own pairs are filed under: the site's name and this.
OWN = " (own pairs)"
#: The key the default is filed under among :data:`CANDIDATES`.
DEFAULT_KEY = f"aatm x{DEFAULT_SOLVE.scale:g}"


def _candidates() -> dict[str, SolveSpec]:
    """λ̂* (aATM, the default's rule) and 1/√d (RPCA), each ×1, ×1.4 and ×2, capped."""
    rpca = SolveSpec("rpca", "auto", cap=True)
    out = {}
    for scale in (1.0, 1.4, 2.0):
        out[f"aatm x{scale:g}"] = dataclasses.replace(DEFAULT_SOLVE, scale=scale)
        out[f"rpca x{scale:g}"] = dataclasses.replace(rpca, scale=scale)
    return out


#: The solves a scene chooses among, by key.
CANDIDATES: dict[str, SolveSpec] = _candidates()


def candidate_label(key: str, step: PostStep) -> str:
    """The candidate label (:func:`cloudlab.heldout.loss`'s index) of ``key`` with ``step``."""
    return f"{key} | {step.name}"


def own_codes(D: np.ndarray, series: WholeSeries, frame: tuple[int, int]) -> np.ndarray:
    """The default's own mask of the whole series ``(pixels, dates)``, in the reference's codes
    (clear, cloud, shadow, no data): what the scene knows of its clouds."""
    solved = solve_series(D, series.observed, DEFAULT_SOLVE, frame)
    return series.codes(solved, DEFAULT_STEP.rule)


def scored_rows(
    D: np.ndarray,
    codes: np.ndarray,
    days: np.ndarray,
    frame: tuple[int, int],
    pairs: Sequence[tuple[int, int]],
    specs: Mapping[str, SolveSpec],
    steps: Sequence[PostStep],
    site: str,
) -> list[dict[str, Any]]:
    """The error sums (:func:`cloudlab.sitescore.pair_rows`) of every spec of ``specs`` with
    every post-step of ``steps`` on each pair of ``pairs``: the source's ``codes`` cloud and
    shadow pasted on the target, the source dropped; filed under ``site`` with the pair's index
    (``pair``), the baselines once a pair (the loss reads the temporal median's). The specs of
    a pair are solved together (:func:`cloudlab.sitescore.solve_specs`), so a first solve they
    share, such as a mixed spec's own (:attr:`~cloudlab.candidates.SolveSpec.ground_from`), runs
    once."""
    rows = []
    for index, (target, source) in enumerate(pairs):
        kept = pasted_pair(D, codes, target, source).kept(days, PROTOCOL)
        solved = solve_specs(kept.D, kept.observed, list(dict.fromkeys(specs.values())), frame)
        by_key = {key: solved[spec.name] for key, spec in specs.items()}
        for row in kept.rows(frame, by_key, list(steps)):
            rows.append({"site": site, "protocol": PROTOCOL, "pair": index, **row})
    return rows


def pair_losses(rows: pd.DataFrame, site: str) -> pd.DataFrame:
    """The loss (:func:`cloudlab.heldout.loss`) of every candidate on each pair of ``site``'s
    rows (:func:`scored_rows`) alone: candidates by pairs."""
    per_pair = {}
    for index, one in rows[rows.site == site].groupby("pair"):
        one = one.assign(site="pair")
        per_pair[index] = loss(pooled(one), ["pair"])["pair"]
    return pd.DataFrame(per_pair)


def spread_choice(
    rows: pd.DataFrame, site: str, step: PostStep, keys: Sequence[str] = tuple(CANDIDATES)
) -> tuple[str, pd.DataFrame]:
    """The scene's choice among ``keys`` with post-step ``step`` from its own pairs' rows
    (:func:`scored_rows` filed under ``site``): the default (:data:`DEFAULT_KEY`) unless
    another's loss is lower by more than the spread (module docstring).

    Returns
    -------
    tuple
        The key chosen, and per key the pooled loss (``loss``), the mean per-pair loss
        difference to the default (``difference``) and its standard error (``spread``).
    """
    mine = rows[rows.site == site]
    if mine.empty:  # no clear target or no cloudy source in the scene's own mask
        return DEFAULT_KEY, pd.DataFrame(columns=["loss", "difference", "spread"])
    pooled_loss = loss(pooled(mine), [site])[site]
    per_pair = pair_losses(mine, site)
    base = per_pair.loc[candidate_label(DEFAULT_KEY, step)]
    table = []
    for key in keys:
        label = candidate_label(key, step)
        diff = per_pair.loc[label] - base
        known = int(diff.count())  # a pair with no clear pixel scored has no loss
        spread = float(diff.std(ddof=1) / np.sqrt(known)) if known > 1 else np.inf
        table.append(
            {"key": key, "loss": pooled_loss[label], "difference": diff.mean(), "spread": spread}
        )
    frame = pd.DataFrame(table).set_index("key")
    better = beyond_spread(frame.difference, frame.spread)
    chosen = DEFAULT_KEY if better.empty else str(frame.loss[better].idxmin())
    return chosen, frame


def own_pairs(codes: np.ndarray, count: int, seed: int = 0) -> list[tuple[int, int]]:
    """The (target, source) pairs of the benchmark's rules (:data:`PAIRS`) in ``codes``."""
    return choose_pairs(codes, count=count, seed=seed, **PAIRS)


def unanimous_choice(
    rows: pd.DataFrame,
    sites: Sequence[str],
    step: PostStep,
    keys: Sequence[str] = tuple(CANDIDATES),
) -> str:
    """The candidate :func:`spread_choice` takes on every one of ``sites`` (the scene's own
    pairs drawn several times, each filed under its own name), else the default: a choice that
    depends on which pairs were drawn is not the scene's (docs/REAL-CLOUDS.md, "The solve chosen
    by the scene itself"; read off that section's tables, so not scored on those sites)."""
    choices = {spread_choice(rows, site, step, keys)[0] for site in sites}
    return choices.pop() if len(choices) == 1 else DEFAULT_KEY


def scene_rows(
    label: str,
    frame: tuple[int, int],
    D: np.ndarray,
    reference: np.ndarray,
    days: np.ndarray,
    own: np.ndarray,
    draws: int = 4,
    draw_pairs: int = 16,
    one_draw_pairs: int | None = None,
    specs: Mapping[str, SolveSpec] = CANDIDATES,
) -> pd.DataFrame:
    """A scene scored for :func:`unanimous_choice` with the default post-step: the reference's
    four pairs (filed under ``label``) and ``draws`` draws of ``draw_pairs`` of its ``own``
    mask's pairs (:func:`own_codes`; filed under ``label`` + :data:`OWN` + the draw), every
    candidate on each; with ``one_draw_pairs``, also one draw of that
    many (``label`` + :data:`OWN` + ``one``) for :func:`spread_choice`.

    Parameters
    ----------
    label
        The scene's name in the rows.
    frame
        (rows, cols) of one image.
    D, reference, days
        ``(bands, pixels, dates)`` NaN where not observed, the reference codes ``(pixels,
        dates)`` and the dates as day numbers (:func:`cloudlab.sitescore.site_arrays`).
    own
        The scene's own mask, in the reference's codes.
    draws, draw_pairs, one_draw_pairs
        How many draws of how many own pairs.
    specs
        The candidates, by key (:data:`CANDIDATES`).

    Returns
    -------
    pandas.DataFrame
        :func:`scored_rows`' rows of every side.
    """
    step = [DEFAULT_STEP]
    rows = scored_rows(D, reference, days, frame, own_pairs(reference, 4), specs, step, label)
    for draw in range(draws):
        pairs = own_pairs(own, draw_pairs, draw)
        rows += scored_rows(D, own, days, frame, pairs, specs, step, f"{label}{OWN}{draw}")
    if one_draw_pairs is not None:
        pairs = own_pairs(own, one_draw_pairs, 0)
        rows += scored_rows(D, own, days, frame, pairs, specs, step, f"{label}{OWN}one")
    return pd.DataFrame(rows)


def fold_choice(site_loss: pd.DataFrame, left_out: str) -> str:
    """A fold's choice of solve, leaving out the site ``left_out``: the default
    (:data:`DEFAULT_KEY`) unless another's mean loss over the other sites is lower by more
    than the spread (the standard error over those sites of the per-site loss difference to
    the default), then the one of least mean loss among those.

    Parameters
    ----------
    site_loss
        Each site's loss (rows) of each candidate key (columns), e.g. the mean over its years.
    left_out
        The site the fold scores, not read.

    Returns
    -------
    str
        The key chosen.
    """
    train = site_loss.drop(index=left_out)
    diff = train.sub(train[DEFAULT_KEY], axis=0)
    better = beyond_spread(diff.mean(), diff.std(ddof=1) / np.sqrt(len(train)))
    return DEFAULT_KEY if better.empty else str(train[better].mean().idxmin())


def beyond_spread(difference: pd.Series, spread: pd.Series) -> pd.Index:
    """The keys other than the default whose mean loss difference to the default is negative by
    more than its spread (``difference + spread < 0``): the rule of :func:`spread_choice` and
    :func:`fold_choice`, the benchmark's preference for the paper's model."""
    better = (difference.index != DEFAULT_KEY) & (difference + spread < 0)
    return difference.index[better]
