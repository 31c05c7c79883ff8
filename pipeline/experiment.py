"""Randomised simulation trials of the paper's λ study: ``python -m pipeline experiment CONFIG``.

One *trial* is (image, n, repeat): the series is simulated once, from a seed derived from the
config seed and the trial's identity, and every method × λ (× with/without MC) is run on that same
series, so the methods are compared on identical clouds (paired samples). Each trial is one Dask
task. The results table (``results.csv``, one row per trial × method × λ) and the per-trial table
(``trials.csv``: λ bounds of the simulated D, r of the cloudy input) are written to the output
directory, followed by the markdown tables, figures and t-tests of :mod:`pipeline.report`.

Baselines recorded in every trial (λ-independent, ``lam`` empty in the table):

* ``cloudy``: the cloudy input itself taken as the ground (L = D), the level of the clamping zone;
* ``median``: the per-pixel temporal median of the observed frames, the composite users reach
  for instead of a decomposition (the same ground for every date).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import logging
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from pipeline.backends import ConfigSection
from pipeline.config import ClusterConfig, read_yaml, validate
from pipeline.errors import ConfigError, InputError

__all__ = [
    "BUNDLED_IMAGES",
    "ExperimentConfig",
    "ExperimentResult",
    "LambdaGridConfig",
    "MCConfig",
    "SolverSettings",
    "TrialSpec",
    "add_experiment_parser",
    "lambda_grid",
    "load_experiment_config",
    "parse_experiment_config",
    "run_experiment",
    "run_experiment_command",
    "run_trial",
    "trial_seed",
    "trials_of",
]

log = logging.getLogger(__name__)

#: ``bundled:NAME`` image references: files shipped in ``pipeline/data``.
BUNDLED_IMAGES: dict[str, str] = {"tyrol": "tyrol-w1_1k_rgb.tif"}

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

Method = Literal["aatm", "rpca", "nnrpca", "atm"]
Baseline = Literal["cloudy", "median"]


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


class LambdaGridConfig(ConfigSection):
    """The λ grid (``lambdas``), in units of λ₀ = 1/√d.

    The paper's grid is ``low: 0.1, high: 10, count: 51``: 51 values equally spaced in log scale
    with λ₀ in the middle (SPEC-NOTES §4). ``stride`` keeps every stride-th value to save time,
    but the values around λ₀ (``keep_center // 2 + 1`` steps below, ``keep_center // 2`` above) are
    always kept so the paper's tables (9 values, λ₀ 6th) can still be filled.
    """

    low: float = Field(default=0.1, gt=0)
    high: float = Field(default=10.0, gt=0)
    count: int = Field(default=51, ge=1)
    stride: int = Field(default=1, ge=1)
    keep_center: int = Field(default=9, ge=0)
    include_star: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> LambdaGridConfig:
        if self.high < self.low:
            raise ValueError("`lambdas.low` must not exceed `lambdas.high`: swap them")
        if self.count == 1 and self.high != self.low:
            raise ValueError("`lambdas.count` 1 needs `lambdas.low` == `lambdas.high`")
        return self


class MCConfig(ConfigSection):
    """The matrix-completion post-step (``mc``), see :func:`cloudcore.complete`."""

    enabled: bool = True
    gamma: float = Field(default=0.8, gt=0)
    radius: int = Field(default=3, ge=0)
    alpha: float | None = Field(default=None, gt=0)
    # aATM's cloud is C + N (the paper's "for aATM the cloud is the summation of C and N").
    cloud_layer: Literal["c+n", "c"] = "c+n"


class SolverSettings(ConfigSection):
    """Settings passed to every :func:`cloudcore.decompose` call (``solver``)."""

    beta: float = Field(default=1.0, gt=0)
    tol: float = Field(default=1e-7, gt=0)
    max_iter: int = Field(default=1000, ge=1)
    # float64 by default: fidelity to the paper's experiments matters more than speed here.
    dtype: Literal["float32", "float64"] = "float64"


class ExperimentConfig(ConfigSection):
    """A whole experiment; see ``configs/experiment-*.yaml`` for commented examples."""

    name: str = "experiment"
    images: tuple[str, ...] = ("bundled:tyrol",)
    size: int | None = Field(default=1024, ge=16)
    ns: tuple[int, ...] = (7,)
    repeats: int = Field(default=50, ge=1)
    seed: int = 0
    cloud_style: Literal["reference", "perlin", "moving"] = "reference"
    max_dn: float | None = Field(default=None, gt=0)
    methods: tuple[Method, ...] = ("aatm", "rpca", "nnrpca", "atm")
    baselines: tuple[Baseline, ...] = ("cloudy", "median")
    lambdas: LambdaGridConfig = LambdaGridConfig()
    mc: MCConfig = MCConfig()
    solver: SolverSettings = SolverSettings()
    output: Path = Path("experiment-output")
    cluster: ClusterConfig = ClusterConfig()
    #: Directory that relative image paths are resolved against (the config file's folder).
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("images", "ns", "methods", "baselines", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | int) and not isinstance(value, bool) else value

    @field_validator("ns")
    @classmethod
    def _ns_at_least_two(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise ValueError("expected at least one number of dates")
        if min(value) < 2:
            raise ValueError("expected numbers of dates >= 2 (λ̂* and the low-rank model need 2)")
        if len(set(value)) != len(value):
            raise ValueError("expected distinct numbers of dates")
        return value

    @field_validator("images", "methods")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("expected at least one entry")
        if len(set(value)) != len(value):
            raise ValueError("expected distinct entries")
        return value


def load_experiment_config(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment configuration.

    Relative image paths are resolved against the config file's folder (so the config can sit
    next to its data); ``output`` is relative to the working directory, like any command-line
    output path.

    Parameters
    ----------
    path
        The YAML file.

    Returns
    -------
    ExperimentConfig
        The frozen, validated configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown, missing or of the wrong type.
    """
    path = Path(path)
    data = read_yaml(path)
    return parse_experiment_config(data, source=str(path), base_dir=path.resolve().parent)


def parse_experiment_config(
    data: Any, *, source: str = "<config>", base_dir: str | Path = "."
) -> ExperimentConfig:
    """Validate an already parsed experiment configuration mapping.

    Parameters
    ----------
    data
        The mapping, as read from YAML.
    source
        Name of where it came from, used in error messages.
    base_dir
        Folder against which relative image paths are resolved.

    Returns
    -------
    ExperimentConfig
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with keys name, images, ns, ...")
    if "base_dir" in data:
        raise ConfigError(
            f"{source}: unknown key `base_dir`: image paths are resolved against "
            "the config file's folder, remove the key"
        )
    data = {key: value for key, value in data.items() if value is not None}
    data = {**data, "base_dir": Path(base_dir)}
    cfg = validate(ExperimentConfig, data, source, hidden={"base_dir"})
    for ref in cfg.images:
        resolve_image(ref, cfg.base_dir)  # fail at the door, not inside a worker
    return cfg


def resolve_image(ref: str, base_dir: str | Path = ".") -> Path:
    """The file behind an image reference: ``bundled:NAME`` or a path.

    Parameters
    ----------
    ref
        ``bundled:tyrol`` (the package's ``pipeline/data/tyrol-w1_1k_rgb.tif``) or a file path,
        relative paths taken against ``base_dir``.
    base_dir
        The config file's folder.

    Raises
    ------
    ConfigError
        Unknown bundled name or missing file.
    """
    if ref.startswith("bundled:"):
        name = ref.removeprefix("bundled:")
        if name not in BUNDLED_IMAGES:
            raise ConfigError(
                f"images: unknown bundled image {ref!r}; use one of "
                + ", ".join(f"bundled:{k}" for k in BUNDLED_IMAGES)
            )
        return Path(__file__).parent / "data" / BUNDLED_IMAGES[name]
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    if not path.is_file():
        raise ConfigError(
            f"images: file {path} not found; give a path relative to the config file or use "
            "`bundled:tyrol`"
        )
    return path


def image_label(ref: str) -> str:
    """Short name of an image for tables and seeds: ``tyrol`` or the file stem."""
    return ref.removeprefix("bundled:") if ref.startswith("bundled:") else Path(ref).stem


@functools.lru_cache(maxsize=4)
def _read_image(path: str) -> np.ndarray:
    """Channel-last pixels of an image file; cached per worker process (trials reuse it)."""
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


# --------------------------------------------------------------------------------------------
# λ grid, trials, seeds
# --------------------------------------------------------------------------------------------


def lambda_grid(cfg: LambdaGridConfig, d: int, n: int | None = None) -> list[tuple[float, str]]:
    """The λ values of one trial, as ``(λ, kind)`` with kind ``"grid"`` or ``"star"``.

    λ = exp(linspace(ln(low·λ₀), ln(high·λ₀), count)), λ₀ = 1/√d; with the paper's defaults λ₀ is
    the middle value. ``stride`` thins the grid (the first value is always kept); the values
    around λ₀ in the *full* grid (see :class:`LambdaGridConfig`) are kept whatever the stride.
    With ``include_star`` and ``n`` given, λ̂*(d, n) (SPEC-NOTES §3) is appended.

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
    """
    text = f"cloudremoval-experiment:{seed}:{image}:{n}:{repeat}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def trials_of(cfg: ExperimentConfig) -> list[TrialSpec]:
    """All trials of an experiment, in a fixed order (image, n, repeat)."""
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
    from cloudcore import ConvergenceWarning, decompose, lambda_bounds, recovery_error
    from cloudcore.complete import complete
    from cloudcore.simulate import paper_case

    started = time.perf_counter()
    image = _read_image(str(resolve_image(trial.image, cfg.base_dir)))
    rng = np.random.default_rng(trial.seed)
    sim = paper_case(
        image, trial.n, size=cfg.size, style=cfg.cloud_style, rng=rng, max_dn=cfg.max_dn
    )
    shape = sim.truth.shape
    D = np.ascontiguousarray(sim.D, dtype=cfg.solver.dtype)
    d = D.shape[0]
    truth = sim.truth.ravel()
    norm_d = float(np.linalg.norm(D))
    bounds = lambda_bounds(D)
    base = {
        "image": image_label(trial.image),
        "n": trial.n,
        "repeat": trial.repeat,
        "seed": trial.seed,
        "d": d,
    }
    rows: list[dict[str, Any]] = []

    def add(
        method: str,
        mc: bool,
        lam: float,
        kind: str,
        r: float,
        seconds: float,
        iterations: int,
        converged: bool,
        c_nonzero: float,
        l_rel: float,
    ) -> None:
        rows.append(
            {
                **base,
                "method": method,
                "mc": mc,
                "lam": lam,
                "lam_kind": kind,
                "lam_sqrt_d": lam * math.sqrt(d),
                "r": r,
                "seconds": seconds,
                "iterations": iterations,
                "converged": converged,
                "c_nonzero": c_nonzero,
                "l_rel": l_rel,
            }
        )

    r_cloudy = recovery_error(D, truth)
    if "cloudy" in cfg.baselines:
        add("cloudy", False, math.nan, "none", r_cloudy, 0.0, 0, True, math.nan, 1.0)
    if "median" in cfg.baselines:
        t0 = time.perf_counter()
        med = np.median(D, axis=1, keepdims=True)
        secs = time.perf_counter() - t0
        l_rel = float(np.linalg.norm(med) * math.sqrt(trial.n) / norm_d)
        add(
            "median",
            False,
            math.nan,
            "none",
            recovery_error(med, truth),
            secs,
            0,
            True,
            math.nan,
            l_rel,
        )

    with warnings.catch_warnings():
        # Non-convergence is data here (the `converged` column), not something to shout about.
        warnings.simplefilter("ignore", ConvergenceWarning)
        for lam, kind in lambda_grid(cfg.lambdas, d, trial.n):
            for method in cfg.methods:
                t0 = time.perf_counter()
                dec = decompose(
                    D,
                    method,
                    lam=lam,
                    beta=cfg.solver.beta,
                    tol=cfg.solver.tol,
                    max_iter=cfg.solver.max_iter,
                    threads=threads,
                )
                t_dec = time.perf_counter() - t0
                # Zone diagnostics from the decomposition itself: C = 0 marks the clamping zone,
                # L ≈ 0 the failure zone (SPEC-NOTES §3).
                c_nonzero = float(np.count_nonzero(dec.C)) / dec.C.size
                l_rel = float(np.linalg.norm(dec.L)) / norm_d
                add(
                    method,
                    False,
                    lam,
                    kind,
                    recovery_error(dec.ground, truth),
                    t_dec,
                    dec.iterations,
                    dec.converged,
                    c_nonzero,
                    l_rel,
                )
                if not cfg.mc.enabled:
                    continue
                cloud = dec.C + dec.N if cfg.mc.cloud_layer == "c+n" else dec.C
                t0 = time.perf_counter()
                comp = complete(
                    D,
                    cloud,
                    shape,
                    gamma=cfg.mc.gamma,
                    radius=cfg.mc.radius,
                    alpha=cfg.mc.alpha,
                    tol=cfg.solver.tol,
                    max_iter=cfg.solver.max_iter,
                    threads=threads,
                )
                t_mc = time.perf_counter() - t0
                add(
                    method,
                    True,
                    lam,
                    kind,
                    recovery_error(comp.ground, truth),
                    t_dec + t_mc,
                    comp.iterations,
                    dec.converged and comp.converged,
                    c_nonzero,
                    l_rel,
                )

    info = {
        **base,
        "lower": bounds.lower,
        "upper": bounds.upper,
        "upper_asymptotic": bounds.upper_asymptotic,
        "lam0": 1.0 / math.sqrt(d),
        "r_cloudy": r_cloudy,
        "cloud_cover": float(sim.clouds.mean()),
        "seconds": time.perf_counter() - started,
    }
    return TrialResult(rows=rows, info=info)


# --------------------------------------------------------------------------------------------
# the whole experiment (client side)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentResult:
    """What :func:`run_experiment` wrote."""

    output: Path
    results_csv: Path
    trials_csv: Path
    trials: int
    rows: int
    failures: dict[str, str]
    seconds: float

    @property
    def ok(self) -> bool:
        """True when every trial task succeeded."""
        return not self.failures


def run_experiment(
    cfg: ExperimentConfig,
    *,
    output: str | Path | None = None,
    client: Any | None = None,
    report: bool = True,
) -> ExperimentResult:
    """Run all trials of ``cfg`` on Dask (one task per trial) and write tables and report.

    Parameters
    ----------
    cfg
        The validated configuration.
    output
        Output directory; default ``cfg.output``.
    client
        A ``distributed.Client`` to use; default: start the cluster of ``cfg.cluster``.
    report
        Also write the markdown tables, figures and t-tests (:func:`pipeline.report.write_report`).

    Returns
    -------
    ExperimentResult
    """
    import pandas as pd

    from pipeline.cluster import Task, connect, run_tasks, solver_threads

    out = Path(output) if output is not None else cfg.output
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
    trials = trials_of(cfg)
    log.info(
        "experiment %s: %d trials (%d images x %d n x %d repeats) -> %s",
        cfg.name,
        len(trials),
        len(cfg.images),
        len(cfg.ns),
        cfg.repeats,
        out,
    )
    threads = solver_threads(cfg.cluster)
    tasks = [Task(t.key, run_trial, (t, cfg), {"threads": threads}) for t in trials]
    started = time.perf_counter()
    if client is not None:
        results, failures = run_tasks(client, tasks, stage="trial")
    else:
        with connect(cfg.cluster) as own:
            results, failures = run_tasks(own, tasks, stage="trial")
    seconds = time.perf_counter() - started

    # Fixed order (the trial order, then the order run_trial adds rows) so reruns compare equal.
    done = [results[t.key] for t in trials if t.key in results]
    rows = pd.DataFrame([row for res in done for row in res.rows], columns=list(RESULT_COLUMNS))
    infos = pd.DataFrame([res.info for res in done])
    results_csv, trials_csv = out / "results.csv", out / "trials.csv"
    rows.to_csv(results_csv, index=False)
    infos.to_csv(trials_csv, index=False)
    failed = {key: f"{type(exc).__name__}: {exc}" for key, exc in failures.items()}
    if report and done:
        from pipeline.report import write_report

        write_report(out, title=cfg.name, wall_seconds=seconds)
    log.info(
        "experiment %s: %d rows from %d trials in %.1f s", cfg.name, len(rows), len(done), seconds
    )
    return ExperimentResult(out, results_csv, trials_csv, len(done), len(rows), failed, seconds)


# --------------------------------------------------------------------------------------------
# command line (wired into ``python -m pipeline experiment`` by pipeline.cli)
# --------------------------------------------------------------------------------------------


def add_experiment_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``experiment`` sub-command to a ``python -m pipeline`` sub-parser set.

    Parameters
    ----------
    subparsers
        What ``ArgumentParser.add_subparsers`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The new sub-parser (its handler is :func:`run_experiment_command`).
    """
    parser = subparsers.add_parser(
        "experiment",
        help="randomised simulation trials over a λ grid (the paper's λ and MC study)",
    )
    parser.add_argument("config", type=Path, help="YAML experiment config (configs/experiment-*)")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: `output`)")
    parser.add_argument("--no-report", action="store_true", help="write only the CSV tables")
    parser.set_defaults(handler=run_experiment_command)
    return parser


def run_experiment_command(args: argparse.Namespace) -> int:
    """Handler of ``python -m pipeline experiment CONFIG``.

    Parameters
    ----------
    args
        Parsed arguments with ``config``, ``out`` and ``no_report``.

    Returns
    -------
    int
        0 when every trial succeeded, 3 when some failed (they are listed on stderr).

    Raises
    ------
    ConfigError
        Invalid configuration (the CLI prints it as one line, exit code 2).
    """
    import sys

    cfg = load_experiment_config(args.config)
    log.info("experiment configuration:\n%s", cfg.to_yaml())
    result = run_experiment(cfg, output=args.out, report=not getattr(args, "no_report", False))
    print(
        f"{result.trials} trials, {result.rows} rows in {result.seconds:.1f} s -> {result.output}"
    )
    if result.ok:
        return 0
    for key, message in sorted(result.failures.items()):
        print(f"error: trial {key} failed: {message}", file=sys.stderr)
    return 3


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m pipeline.experiment CONFIG``) until the CLI has it."""
    import sys

    # Under ``python -m`` this file is ``__main__``; use the importable module so the trial
    # function pickles by its real name for the workers.
    from pipeline import experiment
    from pipeline.errors import PipelineError

    parser = argparse.ArgumentParser(prog="python -m pipeline.experiment")
    sub = parser.add_subparsers(dest="command", required=True)
    experiment.add_experiment_parser(sub)
    args = parser.parse_args(["experiment", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("distributed").setLevel(logging.WARNING)
    try:
        return int(args.handler(args))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
