"""Tests of the randomised-trial runner: λ grid, seeds, config validation, one trial, Dask runs."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from cloudcore import lambda_star, recovery_error
from cloudlab import (
    ExperimentConfig,
    LambdaGridConfig,
    lambda_grid,
    load_experiment_config,
    resolve_image,
    run_experiment,
    run_trial,
    trial_seed,
    trials_of,
)
from cloudlab.cli import main
from pipeline.errors import ConfigError

# Small enough for a 2-core CI box: 32² pixels, 3 dates, 2 repeats, 3 λ, 2 methods ± MC.
TINY = {
    "name": "tiny",
    "size": 32,
    "ns": [3],
    "repeats": 2,
    "seed": 11,
    "methods": ["aatm", "rpca"],
    "lambdas": {"low": 0.5, "high": 2.0, "count": 3, "keep_center": 3},
    "solver": {"max_iter": 200},
}


def _write_config(folder: Path, data: dict[str, Any]) -> Path:
    """``data`` as the config file ``folder/x.yaml``."""
    path = folder / "x.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def _config(folder: Path, data: dict[str, Any]) -> ExperimentConfig:
    """``data`` written as a config file in ``folder`` and loaded the way the CLI loads it."""
    return load_experiment_config(_write_config(folder, data))


# --------------------------------------------------------------------------------------------
# λ grid, seeds, trials
# --------------------------------------------------------------------------------------------


def test_paper_grid_has_lambda0_in_the_middle() -> None:
    d = 1024 * 1024
    grid = lambda_grid(LambdaGridConfig(), d)
    lams = np.array([lam for lam, _ in grid])
    assert len(grid) == 51 and {kind for _, kind in grid} == {"grid"}
    assert lams[25] == pytest.approx(1 / 1024)
    assert lams[0] == pytest.approx(9.7656e-05, rel=1e-4)  # the paper's range
    assert lams[-1] == pytest.approx(0.0098, rel=1e-2)
    # The paper's table columns: 0.6162e-3 … 1.2874e-3.
    assert lams[20] == pytest.approx(0.6162e-3, rel=1e-3)
    assert lams[28] == pytest.approx(1.2874e-3, rel=1e-3)
    np.testing.assert_allclose(np.diff(np.log(lams)), math.log(100) / 50)


def test_stride_keeps_ends_and_the_nine_around_lambda0() -> None:
    d, n = 128 * 128, 7
    grid = lambda_grid(LambdaGridConfig(stride=5, include_star=True), d, n)
    full = [lam for lam, _ in lambda_grid(LambdaGridConfig(), d)]
    kept = [lam for lam, kind in grid if kind == "grid"]
    expected = sorted({*range(0, 51, 5), *range(20, 30)})
    assert kept == [full[i] for i in expected]
    assert grid[-1] == (pytest.approx(lambda_star(d, n)), "star")


def test_trial_seeds_are_deterministic_and_distinct(tmp_path: Path) -> None:
    assert trial_seed(0, "tyrol", 7, 3) == trial_seed(0, "tyrol", 7, 3)
    seeds = {
        trial_seed(s, im, n, k)
        for s in (0, 1)
        for im in ("a", "b")
        for n in (7, 15)
        for k in range(5)
    }
    assert len(seeds) == 40
    cfg = _config(tmp_path, {**TINY, "ns": [3, 4]})
    assert [(t.n, t.repeat) for t in trials_of(cfg)] == [(3, 0), (3, 1), (4, 0), (4, 1)]


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"repeat": 3}, "unknown key `repeat`: did you mean `repeats`?"),
        ({"lambdas": {"cout": 5}}, "unknown key `lambdas.cout`: did you mean `lambdas.count`?"),
        ({"ns": [1, 7]}, "key `ns`"),
        ({"methods": ["aatm", "pca"]}, "key `methods.1`"),
        ({"lambdas": {"low": 3.0, "high": 2.0}}, "`lambdas.low` must not exceed `lambdas.high`"),
        ({"images": ["bundled:paris"]}, "unknown bundled image 'bundled:paris'"),
        ({"images": ["nowhere.tif"]}, "nowhere.tif not found"),
        ({"base_dir": "/"}, "unknown key `base_dir`"),
        ({"solver": {"dtype": "float16"}}, "key `solver.dtype`"),
    ],
)
def test_config_errors_name_the_key(patch: dict, needle: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _config(tmp_path, {**TINY, **patch})
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_config_file_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    shutil.copy(resolve_image("bundled:tyrol"), folder / "mine.tif")
    (folder / "e.yaml").write_text("images: [mine.tif]\nns: 5\nrepeats: 1\n", encoding="utf-8")
    cfg = load_experiment_config(folder / "e.yaml")
    assert cfg.ns == (5,) and resolve_image(cfg.images[0], cfg.base_dir) == folder / "mine.tif"
    (folder / "bad.yaml").write_text("ns: [7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_experiment_config(folder / "bad.yaml")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_experiment_config(folder / "missing.yaml")


def test_committed_configs_validate() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    for name in ("paper", "reduced", "bestlambda", "bestlambda-reduced"):
        cfg = load_experiment_config(root / f"experiment-{name}.yaml")
        assert cfg.images == ("bundled:tyrol",)
    paper = load_experiment_config(root / "experiment-paper.yaml")
    assert (paper.size, paper.ns, paper.repeats, paper.lambdas.count) == (1024, (7, 15), 50, 51)


def test_cli_config_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "experiment", "missing.yaml", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "missing.yaml" in err


def test_cli_runs_the_trials_and_names_the_failed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.tif").write_bytes(b"not a tiff")
    data = {
        **TINY,
        "images": ["bundled:tyrol", "broken.tif"],
        "repeats": 1,
        "cluster": {"kind": "local", "n_workers": 1, "dashboard": False},
    }
    config = _write_config(tmp_path, data)
    out = tmp_path / "o"
    assert main(["-q", "experiment", str(config), "--out", str(out), "--no-report"]) == 3
    captured = capsys.readouterr()
    assert captured.out.startswith("1 trials, 15 rows in ") and captured.out.endswith(f"-> {out}\n")
    assert "error: trial broken-n3-r0 failed: " in captured.err and "cannot be read" in captured.err
    assert (out / "results.csv").is_file() and not (out / "tables.md").exists()


# --------------------------------------------------------------------------------------------
# one trial (no cluster)
# --------------------------------------------------------------------------------------------


def test_run_trial_rows_and_baselines(tmp_path: Path) -> None:
    from cloudcore.simulate import paper_case
    from cloudlab.trials import read_image

    cfg = _config(tmp_path, TINY)
    trial = trials_of(cfg)[0]
    result = run_trial(trial, cfg)
    rows = pd.DataFrame(result.rows)
    # 3 baselines + 3 λ × 2 methods × (without, with MC).
    assert len(rows) == 3 + 3 * 2 * 2
    assert set(rows.method) == {"cloudy", "median", "min", "aatm", "rpca"}
    assert rows[rows.method == "aatm"].mc.sum() == 3
    # The trial's series can be re-simulated from its seed alone.
    sim = paper_case(
        read_image(str(resolve_image("bundled:tyrol"))),
        3,
        size=32,
        rng=np.random.default_rng(trial.seed),
    )
    cloudy = rows[rows.method == "cloudy"].r.item()
    assert cloudy == pytest.approx(recovery_error(sim.D, sim.truth.ravel()))
    assert result.info["r_cloudy"] == pytest.approx(cloudy)
    assert result.info["lower"] == pytest.approx(1 / math.sqrt(32 * 32 * 3))
    assert rows[rows.method == "median"].r.item() < cloudy
    # The darkest date: clouds only brighten the paper's static ground (issue #44).
    darkest = recovery_error(sim.D.min(axis=1, keepdims=True), sim.truth.ravel())
    assert rows[rows.method == "min"].r.item() == pytest.approx(darkest)
    assert (rows.r >= 0).all() and rows.lam_sqrt_d.dropna().round(6).nunique() == 3


# --------------------------------------------------------------------------------------------
# Dask runs on a real LocalCluster
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def test_runner_is_deterministic_one_task_per_trial(client, tmp_path: Path) -> None:
    from distributed import get_task_stream

    cfg = _config(tmp_path, {**TINY, "ns": [3, 4]})
    with get_task_stream(client) as stream:
        first = run_experiment(cfg, output=tmp_path / "a", client=client, report=True)
    trial_tasks = {t["key"] for t in stream.data if str(t["key"]).startswith("trial-")}
    assert first.ok and first.trials == 4 and len(trial_tasks) == 4
    second = run_experiment(cfg, output=tmp_path / "b", client=client, report=False)
    a = pd.read_csv(first.results_csv)
    b = pd.read_csv(second.results_csv)
    assert len(a) == 4 * (3 + 3 * 2 * 2)
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
    ta = pd.read_csv(first.trials_csv).drop(columns="seconds")
    pd.testing.assert_frame_equal(ta, pd.read_csv(second.trials_csv).drop(columns="seconds"))
    # Different n means different clouds: the per-trial seeds are all distinct.
    assert ta.seed.nunique() == 4
    out = tmp_path / "a"
    for name in (
        "tables.md",
        "summary.csv",
        "ttests.csv",
        "zones.csv",
        "config.yaml",
        "figures/r-tyrol-n3.png",
        "figures/time-tyrol-n4.png",
    ):
        assert (out / name).is_file(), name


def test_a_failing_trial_is_reported_not_fatal(client, tmp_path: Path) -> None:
    cfg = _config(tmp_path, {**TINY, "solver": {"beta": 1.0, "max_iter": 200}})
    bad = cfg.model_copy(update={"images": ("bundled:tyrol", "broken.tif")})
    (tmp_path / "broken.tif").write_bytes(b"not a tiff")
    bad = bad.model_copy(update={"base_dir": tmp_path})
    result = run_experiment(bad, output=tmp_path / "out", client=client, report=False)
    assert not result.ok and result.trials == 2
    assert set(result.failures) == {"broken-n3-r0", "broken-n3-r1"}
    assert "cannot be read" in next(iter(result.failures.values()))
