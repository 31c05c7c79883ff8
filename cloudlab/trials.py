"""One randomised trial: its seed, its λ grid, and the rows it adds to ``results.csv``.

A *trial* is (image, n, repeat): the series is simulated once, from a seed derived from the
config seed and the trial's identity, and every method × λ (× with/without MC) is run on that same
series, so the methods are compared on identical clouds (paired samples).

Baselines recorded in every trial (λ-independent, ``lam`` empty in the table):

* ``cloudy``: the cloudy input itself taken as the ground (L = D), the level of the clamping zone;
* ``median``: the per-pixel temporal median of the observed frames, the composite users reach
  for instead of a decomposition (the same ground for every date).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from cloudlab.config import ExperimentConfig, LambdaGridConfig, image_label, resolve_image
from pipeline.errors import InputError
from pipeline.ids import seed_from

__all__ = [
    "RESULT_COLUMNS",
    "TrialResult",
    "TrialSpec",
    "lambda_grid",
    "read_image",
    "run_trial",
    "trial_seed",
    "trials_of",
]

#: Columns of ``results.csv``, in order.
RESULT_COLUMNS = (
    "image",
    "n",
    "repeat",
    "seed",
    "d",
    "method",
    "mc",
    "lam",
    "lam_kind",
    "lam_sqrt_d",
    "r",
    "seconds",
    "iterations",
    "converged",
    "c_nonzero",
    "l_rel",
)


# --------------------------------------------------------------------------------------------
# λ grid, trials, seeds
# --------------------------------------------------------------------------------------------


def lambda_grid(cfg: LambdaGridConfig, d: int, n: int | None = None) -> list[tuple[float, str]]:
    """The λ values of one trial, as ``(λ, kind)`` with kind ``"grid"`` or ``"star"``.

    λ = exp(linspace(ln(low·λ₀), ln(high·λ₀), count)), λ₀ = 1/√d; with the paper's defaults λ₀ is
    the middle value. ``stride`` thins the grid (the first value is always kept); the values
    around λ₀ in the *full* grid (see :class:`LambdaGridConfig`) are kept whatever the stride.
    With ``include_star`` and ``n`` given, λ̂*(d, n) (docs/CONVENTIONS.md §3) is appended.

    Parameters
    ----------
    cfg
        The ``lambdas`` section.
    d
        Pixels per frame.
    n
        Number of dates (needed for λ̂* only).

    Returns
    -------
    list of (float, str)
        Ascending grid values, then λ̂* if asked for.
    """
    from cloudcore import lambda_default, lambda_star

    lam0 = lambda_default(d)
    full = np.exp(np.linspace(math.log(cfg.low * lam0), math.log(cfg.high * lam0), cfg.count))
    keep = set(range(0, cfg.count, cfg.stride))
    if cfg.keep_center:
        centre = int(np.argmin(np.abs(np.log(full / lam0))))
        # The paper's tables put λ₀ 6th of 9 (5 values below, 3 above); keep one more above so
        # that a symmetric view around λ₀ is available too.
        lo = max(centre - cfg.keep_center // 2 - 1, 0)
        keep.update(range(lo, min(centre + cfg.keep_center // 2 + 1, cfg.count)))
    out = [(float(full[i]), "grid") for i in sorted(keep)]
    if cfg.include_star and n is not None:
        out.append((lambda_star(d, n), "star"))
    return out


@dataclass(frozen=True)
class TrialSpec:
    """One trial: which image, how many dates, which repeat, and its seed."""

    image: str
    n: int
    repeat: int
    seed: int

    @property
    def key(self) -> str:
        """Dask task key: readable and unique within an experiment."""
        return f"{image_label(self.image)}-n{self.n}-r{self.repeat}"


def trial_seed(seed: int, image: str, n: int, repeat: int) -> int:
    """Seed of one trial, a hash of (config seed, image, n, repeat).

    Hashing (rather than ``seed + repeat``) keeps trials of different n or images independent, and
    makes a trial's clouds independent of which other trials the config lists.

    Parameters
    ----------
    seed
        The config's ``seed``.
    image
        Image label (see :func:`image_label`), so moving the file does not change the clouds.
    n, repeat
        Dates and repeat index.

    Returns
    -------
    int
        A non-negative 63-bit seed.
    """
    return seed_from(f"cloudremoval-experiment:{seed}:{image}:{n}:{repeat}")


def trials_of(cfg: ExperimentConfig) -> list[TrialSpec]:
    """All trials of an experiment, in a fixed order (image, n, repeat).

    Parameters
    ----------
    cfg
        The experiment configuration.

    Returns
    -------
    list of TrialSpec
    """
    return [
        TrialSpec(ref, n, k, trial_seed(cfg.seed, image_label(ref), n, k))
        for ref in cfg.images
        for n in cfg.ns
        for k in range(cfg.repeats)
    ]


# --------------------------------------------------------------------------------------------
# one trial (runs on a worker)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialResult:
    """What one trial task returns: its result rows and its per-trial summary."""

    rows: list[dict[str, Any]]
    info: dict[str, Any]


class _Outcome(NamedTuple):
    """The measured columns of one ``results.csv`` row."""

    r: float
    seconds: float
    iterations: int
    converged: bool
    c_nonzero: float
    l_rel: float


@dataclass(frozen=True)
class _Series:
    """One trial's simulated series as the solvers see it, and the columns every row repeats."""

    D: np.ndarray
    truth: np.ndarray
    shape: tuple[int, int]
    norm_d: float
    base: dict[str, Any]

    def row(self, method: str, mc: bool, lam: float, kind: str, got: _Outcome) -> dict[str, Any]:
        """One ``results.csv`` row."""
        lam_sqrt_d = lam * math.sqrt(self.base["d"])
        head = {"method": method, "mc": mc, "lam": lam, "lam_kind": kind, "lam_sqrt_d": lam_sqrt_d}
        return {**self.base, **head, **got._asdict()}


@functools.lru_cache(maxsize=4)
def read_image(path: str) -> np.ndarray:
    """Channel-last pixels of an image file; cached per worker process (trials reuse it).

    Parameters
    ----------
    path
        Any image rasterio reads (a georeference is not needed).

    Returns
    -------
    numpy.ndarray
        The pixels as stored: (rows, cols, bands), or (rows, cols) for one band.
    """
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        try:
            with rasterio.open(path) as src:
                pixels = src.read()
        except rasterio.errors.RasterioIOError as exc:
            raise InputError(f"image {path}: cannot be read ({exc})") from None
    return np.moveaxis(pixels, 0, -1) if pixels.shape[0] > 1 else pixels[0]


def run_trial(trial: TrialSpec, cfg: ExperimentConfig, *, threads: int | None = 1) -> TrialResult:
    """Simulate one series and run every method × λ (× MC) and baseline on it.

    Parameters
    ----------
    trial
        Which image, n, repeat and seed.
    cfg
        The experiment configuration.
    threads
        numba threads per solver call (1: one single-threaded worker process per core).

    Returns
    -------
    TrialResult
        ``rows`` as in ``results.csv`` (``seconds`` is wall time of the solver calls, MC rows
        include the decomposition they start from); ``info`` with the λ bounds of the simulated D,
        r of the cloudy input and the mean cloud cover.
    """
    from cloudcore import ConvergenceWarning, lambda_bounds, recovery_error
    from cloudcore.simulate import paper_case

    started = time.perf_counter()
    image = read_image(str(resolve_image(trial.image, cfg.base_dir)))
    rng = np.random.default_rng(trial.seed)
    sim = paper_case(
        image, trial.n, size=cfg.size, style=cfg.cloud_style, rng=rng, max_dn=cfg.max_dn
    )
    D = np.ascontiguousarray(sim.D, dtype=cfg.solver.dtype)
    base = {
        "image": image_label(trial.image),
        "n": trial.n,
        "repeat": trial.repeat,
        "seed": trial.seed,
        "d": D.shape[0],
    }
    height, width = sim.truth.shape
    series = _Series(D, sim.truth.ravel(), (height, width), float(np.linalg.norm(D)), base)
    bounds = lambda_bounds(D)
    r_cloudy = recovery_error(D, series.truth)
    rows = _baseline_rows(series, cfg.baselines, r_cloudy)
    with warnings.catch_warnings():
        # Non-convergence is data here (the `converged` column), not something to shout about.
        warnings.simplefilter("ignore", ConvergenceWarning)
        for lam, kind in lambda_grid(cfg.lambdas, base["d"], trial.n):
            for method in cfg.methods:
                rows += _solver_rows(series, cfg, method, lam, kind, threads)
    info = {
        **base,
        "lower": bounds.lower,
        "upper": bounds.upper,
        "upper_asymptotic": bounds.upper_asymptotic,
        "lam0": 1.0 / math.sqrt(base["d"]),
        "r_cloudy": r_cloudy,
        "cloud_cover": float(sim.clouds.mean()),
        "seconds": time.perf_counter() - started,
    }
    return TrialResult(rows=rows, info=info)


def _baseline_rows(
    series: _Series, baselines: tuple[str, ...], r_cloudy: float
) -> list[dict[str, Any]]:
    """The λ-independent rows: the cloudy input, the temporal median and the temporal minimum
    (the simulation is one band, so its geometric median over dates is the median)."""

    rows = []
    if "cloudy" in baselines:
        got = _Outcome(r_cloudy, 0.0, 0, True, math.nan, 1.0)
        rows.append(series.row("cloudy", False, math.nan, "none", got))
    # The median and the darkest date per pixel (nearly an oracle where clouds only brighten a
    # static ground, as in the paper's simulation: issue #44).
    for name, reduce in (("median", np.median), ("min", np.min)):
        if name in baselines:
            rows.append(_composite_row(series, name, reduce))
    return rows


def _composite_row(series: _Series, name: str, reduce: Any) -> dict[str, Any]:
    """The row of a per-pixel composite over dates (one column standing for every date)."""
    from cloudcore import recovery_error

    t0 = time.perf_counter()
    composite = reduce(series.D, axis=1, keepdims=True)
    secs = time.perf_counter() - t0
    # The composite stands for every date: its ‖L‖_F is √n times that of one column.
    l_rel = float(np.linalg.norm(composite) * math.sqrt(series.base["n"]) / series.norm_d)
    got = _Outcome(recovery_error(composite, series.truth), secs, 0, True, math.nan, l_rel)
    return series.row(name, False, math.nan, "none", got)


def _solver_rows(
    series: _Series,
    cfg: ExperimentConfig,
    method: str,
    lam: float,
    kind: str,
    threads: int | None,
) -> list[dict[str, Any]]:
    """The row of one decomposition and, with MC enabled, the row of the completion after it."""
    from cloudcore import decompose, recovery_error
    from cloudcore.complete import complete

    D, solver = series.D, cfg.solver
    t0 = time.perf_counter()
    dec = decompose(
        D,
        method,
        lam=lam,
        beta=solver.beta,
        tol=solver.tol,
        max_iter=solver.max_iter,
        threads=threads,
    )
    t_dec = time.perf_counter() - t0
    # Zone diagnostics from the decomposition itself: C = 0 marks the clamping zone,
    # L ≈ 0 the failure zone (docs/CONVENTIONS.md §3).
    c_nonzero = float(np.count_nonzero(dec.C)) / dec.C.size
    l_rel = float(np.linalg.norm(dec.L)) / series.norm_d
    r = recovery_error(dec.ground, series.truth)
    got = _Outcome(r, t_dec, dec.iterations, dec.converged, c_nonzero, l_rel)
    rows = [series.row(method, False, lam, kind, got)]
    if not cfg.mc.enabled:
        return rows
    cloud = dec.C + dec.N if cfg.mc.cloud_layer == "c+n" else dec.C
    t0 = time.perf_counter()
    comp = complete(
        D,
        cloud,
        series.shape,
        gamma=cfg.mc.gamma,
        radius=cfg.mc.radius,
        alpha=cfg.mc.alpha,
        tol=solver.tol,
        max_iter=solver.max_iter,
        threads=threads,
    )
    t_mc = time.perf_counter() - t0
    r = recovery_error(comp.ground, series.truth)
    converged = dec.converged and comp.converged
    # MC's time includes the decomposition it starts from, as in the paper's time tables.
    got = _Outcome(r, t_dec + t_mc, comp.iterations, converged, c_nonzero, l_rel)
    rows.append(series.row(method, True, lam, kind, got))
    return rows
