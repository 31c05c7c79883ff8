"""Score every candidate and baseline on one site of the held-out benchmark.

Per site, for each chosen (clear target, cloudy source) pair
(:func:`cloudlab.realpaste.choose_pairs`) and protocol (the source date dropped or kept),
the source's reference cloud and shadow pixels are pasted onto the target in every band.
Each solve of :data:`cloudlab.candidates.SOLVES` is run once on the pasted series (all bands,
as the pipeline runs a tile), and every post-step is applied to its result. Two sums per
(pair, candidate), pooled over the bands:

* **prediction**: on the pasted pixels where the target was clear, Σ(out − truth)² and Σ truth²;
* **fidelity**: on the target's other reference-clear pixels, Σ(out − observation)² and
  Σ observation².

The mask of every rule is also scored against the reference on the unmodified series (every
date): counts of true and false positives and misses of cloud, cloud-or-haze, shadow and clear,
and of cloud-or-haze and shadow grown as the site's reference grows its own (Fmask's buffer).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import cloudcore
from cloudcore._growth import study_growth
from cloudcore._morphology import dilate
from cloudcore.anomaly import anomaly_scale
from cloudcore.cap import cap_ground
from cloudcore.catalog import MASK_FLAT_RATIO
from cloudcore.compose import compose
from cloudcore.departure import raised_ground
from cloudcore.kept import kept_codes
from cloudcore.mask_scores import Shade
from cloudcore.masks import CLEAR as MASK_CLEAR
from cloudcore.masks import CLOUD as MASK_CLOUD
from cloudcore.masks import HAZE as MASK_HAZE
from cloudcore.masks import SHADOW as MASK_SHADOW
from cloudcore.masks import (
    BandMean,
    MaskRule,
    Neighbours,
    Whiteness,
    classify_scores,
    neighbour_scores,
    other_day_neighbours,
    whiteness_tests,
)
from cloudlab.baselines import MULTIBAND_BASELINES
from cloudlab.candidates import JOINT_RULE, PostStep, SolveSpec
from cloudlab.envelope import kept_envelope, within_envelope
from cloudlab.realdata import CLEAR, CLOUD, NODATA, SHADOW, SNOW
from cloudlab.realpaste import choose_pairs, paste_clouds
from cloudlab.sites import Site, load_site
from pipeline.config import SolverConfig
from pipeline.solve.tile import refine_matrix, solve_matrix, solver_lambda

__all__ = [
    "MASK_F1_CLASSES",
    "DroppedPair",
    "KeptSeries",
    "PastedPair",
    "Solved",
    "compose_target",
    "dropped_pairs",
    "error_sums",
    "kept_dates",
    "mask_rows",
    "pair_rows",
    "pasted_pair",
    "site_arrays",
    "site_pairs",
    "solve_series",
    "solve_specs",
]

#: The classes whose agreement with the reference :func:`mask_rows` counts: as the mask says
#: them, and cloud-or-haze and shadow grown as the reference grows its own.
MASK_F1_CLASSES = ("cloud", "cloud+haze", "shadow", "clear", "cloud+haze_grown", "shadow_grown")

#: Pair selection: a target has at most 2 % cloud or shadow and 90 % of its pixels observed; a
#: source 5–60 % cloud or shadow.
PAIRS = {"clear_max": 0.02, "min_observed": 0.9, "cloudy_min": 0.05, "cloudy_max": 0.6}


class Solved:
    """One solve of a series: the ground of every band and the bands' mean anomalies.

    Attributes
    ----------
    ground
        ``(bands, pixels, dates)`` clipped to [0, 1].
    bright, dark
        ``(dates, rows, cols)`` the bands' mean of max(D − L, 0)/σ and max(L − D, 0)/σ.
    whiteness
        A :class:`~cloudcore.masks.Whiteness` of the bands' D − L, for the mask's whiteness
        test, ``short_band`` the shortest (every site's bands are in the order of their
        wavelengths: the first, checked in tests/cloudlab/test_sites.py).
    shade
        A :class:`~cloudcore.mask_scores.Shade` of the observations against the ground their
        layers imply where observed (capped with ``cap``), for the shadow dark in every band.

    Each band's σ is :func:`~cloudcore.anomaly.anomaly_scale` with ``scale_statistic``, of the
    solve's own residual; with ``cap`` the ground is then capped at each pixel's median date
    (:func:`~cloudcore.cap_ground`), with ``floor`` also raised to that quantile of its dates,
    and the anomalies are read off the capped ground; with ``level`` each date's median residual,
    where negative, is taken out of its darkening.
    iterations
        The solve's iterations per band, where known (the plain solves of :func:`solve_specs`).

    A rule with ground that stays (``MaskRule.persist``) reads each date's neighbours: the
    dates before and after it in the series (every site's dates are days apart, checked in
    tests/cloudlab/test_sites.py, so they are :func:`~cloudcore.masks.other_day_neighbours`).
    """

    def __init__(
        self,
        D: np.ndarray,
        observed: np.ndarray,
        L: np.ndarray,
        frame: tuple[int, int],
        iterations: Sequence[int] = (),
        short_band: int = 0,
        scale_statistic: str = "median",
        cap: bool = False,
        floor: float | None = None,
        level: bool = False,
    ):
        self.iterations = tuple(iterations)
        n = D.shape[2]
        self.ground = np.clip(L, 0.0, 1.0)
        bright, dark = BandMean((n, *frame)), BandMean((n, *frame))
        self.whiteness = Whiteness((n, *frame), lowest=True)  # every rule's test, once
        # The ratio every variant scored reads (cloudlab.candidates.FLAT_DARK); codes() checks.
        self.shade = Shade((n, *frame), MASK_FLAT_RATIO)
        for b, (band, low) in enumerate(zip(D, L, strict=True)):
            residual = np.where(observed, band - low, np.nan)
            sigma = anomaly_scale(residual, observed, scale_statistic)
            if cap:  # after σ, as a pipeline tile (pipeline.solve.tile.solve_tile)
                cap_ground(self.ground[b], residual, observed, threads=1, floor=floor)
            frames = residual.T.reshape(n, *frame)
            bright.add(frames, sigma)
            if level:  # each date's own level below the ground is not a shadow
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # a date seen nowhere
                    own = np.minimum(np.nan_to_num(np.nanmedian(residual, axis=0)), 0.0)
                dark.add(own[:, None, None] - frames, sigma)
            else:
                dark.add(-frames, sigma)
            self.whiteness.add(frames, short=b == short_band)
            # The observation against the ground its layers imply where observed, D − (D − L)
            # after the cap, as the pipeline's mask pass reads it (pipeline.outputs.mask_layer).
            seen_values = np.where(observed, band, np.nan)
            self.shade.add(seen_values.T.reshape(n, *frame), residual.T.reshape(n, *frame), sigma)
        self.bright, self.dark = bright.mean(), dark.mean()
        self.bands = bright.count  # bands with a value, for the white clouds' test
        self.seen = observed.T.reshape(n, *frame)
        self._neighbours: Neighbours | None = None  # read by ground that stays, once

        # The whiteness tests of each rule's ratios, once (the grid's ~100 rules share a few).
        self._tests: dict[tuple[float, float, bool, float], tuple[Any, Any]] = {}
        # The entries dark in every band at each flat-shadow threshold, once (the rules share
        # two or three; each is a division of the shade's sums and a comparison).
        self._dark_everywhere: dict[float, np.ndarray] = {}

    def with_ground(self, other: Solved, weight: float = 1.0) -> Solved:
        """This solve's mask with another solve's ground (:attr:`SolveSpec.ground_from`).

        Parameters
        ----------
        other
            The solve whose (bounded) ground is written where the mask fills.
        weight
            ``other``'s share of the ground (:attr:`SolveSpec.ground_weight`): 1 its ground,
            else ``weight`` × its + (1 − ``weight``) × this solve's.

        Returns
        -------
        Solved
            A shallow copy: this solve's scores, σ, iterations and cached tests, ``other``'s
            ``ground``. The caches are shared on purpose: they are read off the scores alone,
            never off the ground (a cache that came to read the ground would have to be reset
            here).
        """
        mixed = copy.copy(self)
        if weight == 1:
            mixed.ground = other.ground
        else:
            mixed.ground = weight * other.ground + (1 - weight) * self.ground
        return mixed

    def codes(self, rule: MaskRule, seen: np.ndarray, date: int | None = None) -> np.ndarray:
        """The mask of ``rule`` (:func:`~cloudcore.masks.classify_scores`) from this solve's
        scores, its whiteness test included.

        Parameters
        ----------
        rule
            The mask rule.
        seen
            ``(dates, rows, cols)`` observed, or ``(1, rows, cols)`` with ``date``.
        date
            None: every date; else this date alone.

        Returns
        -------
        numpy.ndarray
            ``(dates, rows, cols)`` or ``(1, rows, cols)`` uint8 codes.
        """
        pick = slice(None) if date is None else slice(date, date + 1)
        key = (rule.white, rule.every_band, rule.white_cloud > 0, rule.white_cloud_ratio)
        if key not in self._tests:
            self._tests[key] = whiteness_tests(self.whiteness, rule, self.bands)
        white, flat = (None if t is None else t[pick] for t in self._tests[key])
        around = None
        if rule.persist > 0:
            if self._neighbours is None:
                days = other_day_neighbours(np.arange(self.seen.shape[0]))
                self._neighbours = neighbour_scores(self.bright, self.seen, days)
            around = self._neighbours.dates(pick)
        shade = None
        if rule.shadow_flat > 0:
            if rule.flat_ratio != self.shade.ratio:
                raise ValueError(
                    f"the benchmark's solves hold the shade at flat_ratio {self.shade.ratio:g}, "
                    f"not {rule.flat_ratio:g}"
                )
            if rule.shadow_flat not in self._dark_everywhere:
                self._dark_everywhere[rule.shadow_flat] = self.shade.dark(rule.shadow_flat)
            shade = self._dark_everywhere[rule.shadow_flat][pick]
        return classify_scores(
            self.bright[pick], self.dark[pick], seen, rule, white, flat, around, shade
        )


def solve_series(
    D: np.ndarray,
    observed: np.ndarray,
    spec: SolveSpec,
    frame: tuple[int, int],
    tol: float | None = None,
    beta: float | None = None,
) -> Solved:
    """Solve every band of a series as a pipeline tile would (float32, threads 1).

    Parameters
    ----------
    D
        ``(bands, pixels, dates)``, NaN where not observed.
    observed
        ``(pixels, dates)`` booleans, one for all bands.
    spec
        The solve.
    frame
        (rows, cols) of one image.
    tol
        The solver's tolerance; None: the pipeline's default.
    beta
        aATM's haze weight (``solver.beta``); None: the pipeline's default.
    """
    return solve_specs(D, observed, [spec], frame, tol, beta=beta)[spec.name]


def solve_specs(
    D: np.ndarray,
    observed: np.ndarray,
    specs: Sequence[SolveSpec],
    frame: tuple[int, int],
    tol: float | None = None,
    short_band: int = 0,
    scale_statistic: str = "median",
    beta: float | None = None,
) -> dict[str, Solved]:
    """:func:`solve_series` of every spec, by name, solving each first decomposition once
    (:attr:`~cloudlab.candidates.SolveSpec.first`: method, λ rule, scale, κ): ``+refine`` and
    ``+joint`` start from the same first solve as the plain spec (as the pipeline's refinement
    does), so three specs of one method cost one first solve. ``short_band``: the band of
    shortest wavelength (the mask's whiteness test, :class:`Solved`); ``scale_statistic``: that
    of the bands' anomaly scale (:class:`Solved`); ``tol`` and ``beta``: the solver's, None for
    the pipeline's default; the growth of μ is a study's (:func:`cloudcore._growth.study_growth`)
    or the pipeline's. A spec with :attr:`~cloudlab.candidates.SolveSpec.ground_from` is its
    plain solve's scores with the other solve's ground (:meth:`Solved.with_ground`)."""
    plain_specs = [dataclasses.replace(s, ground_from=None, ground_weight=1.0) for s in specs]
    grounds = [s.ground_from for s in specs if s.ground_from is not None]
    every = list(dict.fromkeys(plain_specs + grounds))
    solved = _plain_solves(D, observed, every, frame, tol, short_band, scale_statistic, beta)
    # The specs without another's ground in the order they were solved (by first solve, as
    # before ground_from existed: the held-out benchmark's files keep their row order), then
    # the mixed ones; a solve needed only as a mixed spec's part is not returned.
    wanted = {s.name for s in specs if s.ground_from is None}
    out = {name: result for name, result in solved.items() if name in wanted}
    for spec, plain in zip(specs, plain_specs, strict=True):
        if spec.ground_from is not None:
            other = solved[spec.ground_from.name]
            out[spec.name] = solved[plain.name].with_ground(other, spec.ground_weight)
    return out


def _plain_solves(
    D: np.ndarray,
    observed: np.ndarray,
    specs: Sequence[SolveSpec],
    frame: tuple[int, int],
    tol: float | None,
    short_band: int,
    scale_statistic: str,
    beta: float | None,
) -> dict[str, Solved]:
    """:func:`solve_specs` of specs without another's ground."""
    out: dict[str, Solved] = {}
    d, n = observed.shape
    data = [np.where(observed, band, 0.0).astype(np.float32) for band in D]
    for first in dict.fromkeys(s.first for s in specs):
        method, lam_rule, scale, kappa = first
        settings: dict[str, Any] = {"method": method, "lam": lam_rule, "lam_scale": scale}
        settings |= {} if kappa is None else {"shadow_weight": kappa}
        settings |= {} if tol is None else {"tol": tol}
        settings |= {} if beta is None else {"beta": beta}
        # A study's growth of μ (heldout --rho, the benchmarks' mu_growth), else the pipeline's.
        settings |= {} if (rho := study_growth()) is None else {"rho": rho}
        solver = SolverConfig.model_validate(settings)
        lam = solver_lambda(solver, d, n)
        firsts = [solve_matrix(x, observed, solver, frame, lam, threads=1) for x in data]
        group = [s for s in specs if s.first == first]
        out |= _from_first(
            D, observed, data, firsts, solver, group, frame, short_band, scale_statistic
        )
    return out


def _from_first(
    D: np.ndarray,
    observed: np.ndarray,
    data: list[np.ndarray],
    firsts: list[cloudcore.Decomposition],
    solver: SolverConfig,
    specs: Sequence[SolveSpec],
    frame: tuple[int, int],
    short_band: int,
    scale_statistic: str,
) -> dict[str, Solved]:
    """The :class:`Solved` of each of ``specs``, which share the first solves ``firsts`` of
    the bands ``data`` (:func:`_plain_solves`)."""
    out: dict[str, Solved] = {}
    L = np.stack([f.L for f in firsts]).astype(np.float64)
    args = (frame, [f.iterations for f in firsts], short_band, scale_statistic)
    # The first solve's ground as each spec bounds it (cap, floor, level), scored once
    # however many specs read it, and only if one does: (False, None, False) is the plain.
    bounded: dict[tuple[bool, float | None, bool], Solved] = {}

    def bound(cap: bool, floor: float | None, level: bool) -> Solved:
        key = (cap, floor, level)
        if key not in bounded:
            bounded[key] = Solved(D, observed, L, *args, cap=cap, floor=floor, level=level)
        return bounded[key]

    for spec in specs:
        if spec.shadow_out_of_mask:  # scores off L − S, the ground L (SolveSpec)
            S = np.stack([_shadow_layer(f) for f in firsts]).astype(np.float64)
            scored = Solved(
                D, observed, L - S, *args, cap=spec.cap, floor=spec.floor, level=spec.level
            )
            out[spec.name] = scored.with_ground(bound(spec.cap, spec.floor, spec.level))
        elif spec.cap:  # the same first solve, its ground capped (SolveSpec: never refined)
            out[spec.name] = bound(True, spec.floor, spec.level)
        elif spec.refine == "refine":
            refined = [
                refine_matrix(x, observed, f, solver, frame, threads=1).L
                for x, f in zip(data, firsts, strict=True)
            ]
            refined_L = np.stack(refined).astype(np.float64)
            out[spec.name] = Solved(D, observed, refined_L, frame, (), short_band, scale_statistic)
        elif spec.refine == "joint":
            plain = bound(False, None, False)
            out[spec.name] = _joint(
                D, observed, L, plain, frame, short_band, scale_statistic, rho=solver.rho
            )
        else:
            out[spec.name] = bound(False, None, False)
    return out


def _shadow_layer(result: cloudcore.Decomposition) -> np.ndarray:
    """The shadow layer S of a shadow model's decomposition (an error for another method's)."""
    if result.S is None:
        raise ValueError("the mask's ground L − S needs a solve with a shadow layer")
    return result.S


def _joint(
    D: np.ndarray,
    observed: np.ndarray,
    L: np.ndarray,
    first: Solved,
    frame: tuple[int, int],
    short_band: int = 0,
    scale_statistic: str = "median",
    rho: float | None = None,
) -> Solved:
    """The ``+joint`` re-solve: RPCA 3/√d of every band on the entries the first solve's
    (``first``, ground ``L``) :data:`JOINT_RULE` mask calls clear, ``L`` kept where it returns
    no value; μ grows by ``rho`` (the first solve's; None: cloudcore's)."""
    d, n = observed.shape
    codes = first.codes(JOINT_RULE, observed.T.reshape(n, *frame))
    keep = observed & (codes.reshape(n, d).T == CLEAR)
    lam2 = 3.0 / math.sqrt(d)
    again = []
    for band, low in zip(D, L, strict=True):
        data = np.where(observed, band, 0.0).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cloudcore.ConvergenceWarning)
            res = cloudcore.decompose(data, "rpca", lam=lam2, mask=keep, threads=1, rho=rho)
        new = res.L.astype(np.float64)
        again.append(np.where(np.isfinite(new), new, low))
    return Solved(D, observed, np.stack(again), frame, (), short_band, scale_statistic)


def site_arrays(site: Site) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A site's series as the benchmarks read it: ``D`` (bands, pixels, dates), NaN where not
    observed; its reference codes (pixels, dates); the dates as day numbers."""
    s = site.series
    n = s.dates.size
    D = np.stack([s.matrix(b)[0] for b in range(len(s.bands))])
    return D, s.reference.reshape(n, -1).T, s.dates.astype(np.int64)


class WholeSeries(NamedTuple):
    """A site's whole series, nothing pasted (:func:`whole_series`)."""

    frame: tuple[int, int]
    D: np.ndarray  # (bands, pixels, dates), NaN where not observed
    reference: np.ndarray  # (pixels, dates) codes
    observed: np.ndarray  # (pixels, dates), observed in every band

    @property
    def scored_reference(self) -> np.ndarray:
        """The reference as the benchmark's mask scores read it: snow as no data (neither
        cloud nor clear, :func:`mask_rows`)."""
        return np.where(self.reference == SNOW, NODATA, self.reference)

    def codes(self, solved: Solved, rule: MaskRule) -> np.ndarray:
        """``solved``'s mask of ``rule`` on every date, ``(pixels, dates)`` as the reference."""
        n = self.D.shape[2]
        return solved.codes(rule, self.observed.T.reshape(n, *self.frame)).reshape(n, -1).T


def whole_series(name: str) -> WholeSeries:
    """The whole series of the site ``name``, as the in-sample benchmarks solve it."""
    return series_of(load_site(name))


def series_of(site: Site) -> WholeSeries:
    """A site's series (one year of it, :func:`cloudlab.sites.year_of`, or its window) as a
    :class:`WholeSeries`, nothing pasted."""
    D, reference, _ = site_arrays(site)
    return WholeSeries(site.series.frame, D, reference, np.isfinite(D).all(axis=0))


def site_pairs(site: Site, count: int, seed: int) -> list[tuple[int, int]]:
    """The (target, source) pairs of a site (:data:`PAIRS`)."""
    n = site.series.dates.size
    return choose_pairs(site.series.reference.reshape(n, -1).T, count=count, seed=seed, **PAIRS)


def _frames(x: np.ndarray, frame: tuple[int, int]) -> np.ndarray:
    """``(..., pixels)`` → ``(..., rows, cols)``."""
    return x.reshape(*x.shape[:-1], *frame)


@dataclass(frozen=True)
class PastedPair:
    """A site's series with the source date's clouds pasted on the target in every band.

    Attributes
    ----------
    D
        ``(bands, pixels, dates)`` the pasted series (every date).
    reference
        ``(pixels, dates)`` its reference codes, the target's with the pasted flags.
    truth
        ``(bands, pixels)`` the target before pasting.
    scored, clear
        ``(pixels,)``: the pasted pixels where the target was clear (prediction); the target's
        other observed reference-clear pixels (fidelity).
    target, source
        The dates' indices in ``D``.
    """

    D: np.ndarray
    reference: np.ndarray
    truth: np.ndarray
    scored: np.ndarray
    clear: np.ndarray
    target: int
    source: int

    def kept(self, days: np.ndarray, protocol: str) -> KeptSeries:
        """The series a protocol solves (:func:`kept_dates`) with ``days`` the dates' day
        numbers."""
        keep = kept_dates(self.D.shape[2], self.source, protocol)
        D = self.D[:, :, keep]
        return KeptSeries(
            pair=self,
            keep=keep,
            D=D,
            reference=self.reference[:, keep],
            days=days[keep],
            observed=np.isfinite(D).all(axis=0),
            target=int(np.flatnonzero(keep == self.target)[0]),
        )


@dataclass(frozen=True)
class KeptSeries:
    """A pasted pair's series as one protocol keeps it: the dates ``keep`` of ``pair``, their
    ``D`` ``(bands, pixels, dates)``, reference codes, day numbers, the entries every band
    observed ``(pixels, dates)``, and the target's index among them."""

    pair: PastedPair
    keep: np.ndarray
    D: np.ndarray
    reference: np.ndarray
    days: np.ndarray
    observed: np.ndarray
    target: int

    def rows(
        self, frame: tuple[int, int], solved: dict[str, Solved], steps: list[PostStep]
    ) -> list[dict[str, Any]]:
        """:func:`pair_rows` of this series."""
        p = self.pair
        return pair_rows(
            self.D,
            self.reference,
            self.days,
            self.target,
            p.truth,
            p.scored,
            p.clear,
            frame,
            solved,
            steps,
        )


def pasted_pair(D: np.ndarray, reference: np.ndarray, target: int, source: int) -> PastedPair:
    """:func:`cloudlab.realpaste.paste_clouds` in every band of ``D`` ``(bands, pixels, dates)``,
    with the pixels each score reads."""
    pasted = [paste_clouds(band, reference, target, source) for band in D]
    first = pasted[0]
    observed = np.isfinite(D[:, :, target]).all(axis=0)
    return PastedPair(
        D=np.stack([p.D for p in pasted]),
        reference=first.reference,
        truth=np.stack([p.truth for p in pasted]),
        scored=first.scored,
        clear=(reference[:, target] == CLEAR) & ~first.pasted & observed,
        target=target,
        source=source,
    )


def kept_dates(n: int, source: int, protocol: str) -> np.ndarray:
    """The dates a protocol keeps: all (``keep-source``) or all but the source
    (``drop-source``, the primary protocol: real clouds move, a pasted copy does not)."""
    return np.arange(n) if protocol == "keep-source" else np.flatnonzero(np.arange(n) != source)


class DroppedPair(NamedTuple):
    """One pasted pair of :func:`dropped_pairs`: the pair, its series without the source, and
    that series solved with each spec (by name)."""

    pair: PastedPair
    kept: KeptSeries
    solved: dict[str, Solved]


def dropped_pairs(site: Site, specs: Sequence[SolveSpec], count: int = 4) -> Iterator[DroppedPair]:
    """Each of the site's ``count`` pairs (:func:`site_pairs`, seed 0) pasted, its source
    dropped (the primary protocol) and solved with ``specs`` (:func:`solve_specs`), as the
    in-sample benchmarks read them."""
    D, reference, days = site_arrays(site)
    for target, source in site_pairs(site, count, 0):
        pair = pasted_pair(D, reference, target, source)
        kept = pair.kept(days, "drop-source")
        yield DroppedPair(pair, kept, solve_specs(kept.D, kept.observed, specs, site.series.frame))


def compose_target(
    observation: np.ndarray,
    ground: np.ndarray,
    codes: np.ndarray,
    step: PostStep,
    frame: tuple[int, int],
) -> np.ndarray:
    """One date's output ``(bands, pixels)`` as the post-step ``step`` composes it
    (:func:`cloudcore.compose.compose`) from ``codes`` ``(1, rows, cols)``: its
    ``observation`` ``(bands, pixels)`` where kept, its ``ground`` (the same shape, plus the
    date's offset) where filled."""
    out = compose(
        _frames(observation, frame)[:, None],
        _frames(ground, frame)[:, None],
        codes,
        haze=step.haze_fill,
        offset=step.offset,
    )
    return out[:, 0].reshape(out.shape[0], -1)


def written_target(
    D: np.ndarray,
    days: np.ndarray,
    target: int,
    solved: Solved,
    codes: np.ndarray,
    step: PostStep,
    frame: tuple[int, int],
) -> np.ndarray:
    """The target's output ``(bands, pixels)`` as the post-step ``step`` writes it from
    ``codes`` ``(1, rows, cols)``: :func:`compose_target` of its observation in ``D``
    ``(bands, pixels, dates)`` and of the ground :func:`written_ground` gives (raised by the
    pixels' own departure with :attr:`PostStep.between`), then with :attr:`PostStep.envelope`
    every value written held within the pixel's kept observations
    (:func:`cloudlab.envelope.within_envelope`). Where a caller composes one ground with
    several masks it calls the two itself."""
    if step.envelope is None:
        ground = written_ground(D, days, target, solved, step)
        return compose_target(D[:, :, target], ground, codes, step, frame)
    every = solved.codes(step.rule, solved.seen)  # once, for the ground and the envelope
    ground = written_ground(D, days, target, solved, step, every)
    out = compose_target(D[:, :, target], ground, codes, step, frame)
    kept = _kept_entries(every, step)
    low, high = kept_envelope(np.moveaxis(D, 2, 1), kept, step.envelope)  # dates second
    written = ~(kept[target] & np.isfinite(D[:, :, target]))
    return within_envelope(out, low, high, written)


def _kept_entries(every: np.ndarray, step: PostStep) -> np.ndarray:
    """``(dates, pixels)``: the entries ``step`` keeps as observed, from its mask ``every``
    ``(dates, rows, cols)`` on every date."""
    kept = kept_codes(every, keep_haze=step.haze_fill == "observed")
    return kept.reshape(every.shape[0], -1)


def written_ground(
    D: np.ndarray,
    days: np.ndarray,
    target: int,
    solved: Solved,
    step: PostStep,
    every: np.ndarray | None = None,
) -> np.ndarray:
    """The ground ``(bands, pixels)`` the post-step ``step`` writes on the target where the
    mask does not keep the observation (before the date's offset, which
    :func:`compose_target` adds): the solve's; with :attr:`PostStep.between` raised by each
    pixel's own departure from it on its nearest dates the step keeps, before and after
    (:func:`cloudcore.departure.raised_ground`, ``mask.interpolate``), clipped to [0, 1]; with
    :attr:`PostStep.shadow_floor` raised where the mask calls the target shadow by what its
    ground lacks of the pixel's quantile over the dates.
    ``D`` is the series solved ``(bands, pixels, dates)``, ``days`` its dates' day numbers;
    ``every`` the step's mask on every date where the caller has it (None: computed here)."""
    written = solved.ground[:, :, target]
    if not step.between and step.shadow_floor is None:
        return written
    codes = solved.codes(step.rule, solved.seen) if every is None else every
    if step.between:
        observation, ground = (np.moveaxis(x, 2, 1) for x in (D, solved.ground))  # dates second
        raised = raised_ground(observation, ground, _kept_entries(codes, step), days)
        written = np.clip(raised[:, target], 0.0, 1.0)
    if step.shadow_floor is not None:
        shadow = codes[target].reshape(-1) == MASK_SHADOW
        own = solved.ground[:, shadow]
        floor = np.nanquantile(own, step.shadow_floor, axis=2)
        lift = np.maximum(floor - own[:, :, target], 0.0)  # the ground's deficit, not the departure
        written = written.copy()
        written[:, shadow] = np.clip(written[:, shadow] + np.nan_to_num(lift), 0.0, 1.0)
    return written


def error_sums(
    out: np.ndarray, truth: np.ndarray, scored: np.ndarray, clear: np.ndarray
) -> dict[str, float]:
    """Σ(out − truth)² and Σ truth² over the ``scored`` pixels (prediction) and the ``clear``
    ones (fidelity), pooled over the bands of ``(bands, pixels)``; a NaN output counts as 0 (a
    missing answer is an error)."""
    out = np.nan_to_num(out, nan=0.0)
    return {
        "pred_num": float(((out - truth)[:, scored] ** 2).sum()),
        "pred_den": float((truth[:, scored] ** 2).sum()),
        "fid_num": float(((out - truth)[:, clear] ** 2).sum()),
        "fid_den": float((truth[:, clear] ** 2).sum()),
    }


def pair_rows(
    D: np.ndarray,
    reference: np.ndarray,
    days: np.ndarray,
    target: int,
    truth: np.ndarray,
    scored: np.ndarray,
    clear: np.ndarray,
    frame: tuple[int, int],
    solved: dict[str, Solved],
    steps: list[PostStep],
) -> list[dict[str, Any]]:
    """Prediction and fidelity sums of every candidate and baseline on one pasted series.

    Parameters
    ----------
    D
        ``(bands, pixels, dates)`` the pasted series.
    reference
        ``(pixels, dates)`` its reference codes (the oracles read them).
    days
        ``(dates,)`` day numbers.
    target
        The target's date index in ``D``.
    truth
        ``(bands, pixels)`` the target before pasting.
    scored, clear
        ``(pixels,)``: pasted pixels where the target was clear; the target's other clear pixels.
    frame
        (rows, cols).
    solved
        Solve name → its result on this series.
    steps
        The post-steps.
    """
    observed_t = np.isfinite(D[:, :, target]).all(axis=0)
    rows = []

    def sums(name: str, step: str, out: np.ndarray) -> None:
        rows.append({"solve": name, "step": step, **error_sums(out, truth, scored, clear)})

    seen = _frames(observed_t, frame)[None]
    for name, result in solved.items():
        ground = result.ground[:, :, target]
        codes_of: dict[Any, np.ndarray] = {}
        for step in steps:
            if not step.keep_clear:
                sums(name, step.name, ground)
                continue
            if step.rule not in codes_of:
                codes_of[step.rule] = result.codes(step.rule, seen, target)
            out = written_target(D, days, target, result, codes_of[step.rule], step, frame)
            sums(name, step.name, out)
    for base, rule in MULTIBAND_BASELINES.items():
        sums(base, "", rule(D, reference, days)[:, :, target])
    return rows


def mask_rows(site: Site, solved: dict[str, Solved], steps: list[PostStep]) -> list[dict[str, Any]]:
    """Agreement counts of every solve's mask rules with the reference on the whole series.

    Besides each class as the mask says it, ``cloud+haze_grown`` and ``shadow_grown`` count the
    mask grown as the site's reference grows its own (:attr:`Site.reference_buffer`, less the
    rule's own growth: Fmask dilates its clouds and shadows by a 7 × 7 square, shadows first,
    clouds over them), so that a mask is scored against such a reference like for like; with no
    buffer they equal ``cloud+haze`` and ``shadow``.

    Parameters
    ----------
    site
        The site, its reference and the reference's buffer.
    solved
        Its whole series solved, by solve name.
    steps
        The post-steps whose mask rules are scored (each rule once).

    Returns
    -------
    list of dict
        A row per solve and rule: ``solve``, ``rule`` and, for each of
        :data:`MASK_F1_CLASSES`, ``{class}_tp``, ``{class}_fp`` and ``{class}_fn``.
    """
    ref = site.series.reference
    valid = (ref != NODATA) & (ref != SNOW)  # snow is neither class
    seen = ref != NODATA
    # The reference's side of every count, once: the same for every solve and rule.
    classes = (("cloud", CLOUD), ("shadow", SHADOW), ("clear", CLEAR))
    truths = {k: (ref == code) & valid for k, code in classes}
    in_truth = {k: int(t.sum()) for k, t in truths.items()}
    rows = []
    for name, result in solved.items():
        done = set()
        for step in steps:
            if step.rule in done:
                continue
            done.add(step.rule)
            codes = result.codes(step.rule, seen)
            buffer = max(site.reference_buffer - step.rule.grow, 0)
            row: dict[str, Any] = {"solve": name, "rule": step.rule_name}
            for cls, (said, truth) in _agreement(codes, buffer).items():
                said = said & valid
                hits = int((said & truths[truth]).sum())
                row[f"{cls}_tp"] = hits
                row[f"{cls}_fp"] = int(said.sum()) - hits
                row[f"{cls}_fn"] = in_truth[truth] - hits
            rows.append(row)
    return rows


def _agreement(codes: np.ndarray, buffer: int) -> dict[str, tuple[np.ndarray, str]]:
    """For each of :data:`MASK_F1_CLASSES`, where the mask's ``codes`` say it and which of the
    reference's classes (``cloud``, ``shadow``, ``clear``) it is scored against."""
    cloud = (codes == MASK_CLOUD) | (codes == MASK_HAZE)
    shadow = codes == MASK_SHADOW
    grown_cloud, grown_shadow = cloud, shadow
    if buffer:
        grown_cloud = dilate(cloud, buffer)
        grown_shadow = dilate(shadow, buffer) & ~grown_cloud
    return {
        "cloud": (codes == MASK_CLOUD, "cloud"),
        "cloud+haze": (cloud, "cloud"),
        "shadow": (shadow, "shadow"),
        "clear": (codes == MASK_CLEAR, "clear"),
        "cloud+haze_grown": (grown_cloud, "cloud"),
        "shadow_grown": (grown_shadow, "shadow"),
    }
