"""The lab: the paper's simulation experiments, re-run (``python -m cloudlab experiment|report``).

An experiment simulates cloudy series from a clear image and runs every method × λ (with and
without the MC post-step) on each, so that the paper's λ study can be repeated and set beside
its numbers:

* :mod:`~cloudlab.config`: the experiment's YAML configuration and the images it names;
* :mod:`~cloudlab.trials`: one randomised trial (image, n, repeat), its seed and λ grid;
* :mod:`~cloudlab.run`: all trials on Dask, one task each, into ``results.csv`` and
  ``trials.csv``;
* :mod:`~cloudlab.summary`: mean and sd over trials per λ;
* :mod:`~cloudlab.bestlambda`: the best λ and its fit in n;
* :mod:`~cloudlab.stats`: the paired t-tests and the failure and clamping zones;
* :mod:`~cloudlab.paper`: the numbers the paper reports;
* :mod:`~cloudlab.tables`, :mod:`~cloudlab.plots`: markdown tables and figures;
* :mod:`~cloudlab.report`: one run's ``tables.md``, figures and statistics as CSV;
* :mod:`~cloudlab.document`: the generated block of ``docs/EXPERIMENTS.md``.

The real-cloud experiment (``kind: real-clouds``, docs/REAL-CLOUDS.md) scores the same solvers
on real clouds with a reference mask: :mod:`~cloudlab.realdata` (the bundled Landsat
series), :mod:`~cloudlab.realconfig`, :mod:`~cloudlab.realpaste` (pasting clouds,
baselines), :mod:`~cloudlab.realscores`, :mod:`~cloudlab.realclouds` (the run) and
:mod:`~cloudlab.realreport`.

The names below are imported on first use (PEP 562): a worker that runs a trial unpickles
:func:`~cloudlab.trials.run_trial` through this package, and should not pay for pandas,
scipy.stats and matplotlib, which only the report needs.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and the module of this package that defines it.
_WHERE = {
    "BEGIN": "document",
    "BUNDLED_IMAGES": "config",
    "END": "document",
    "ExperimentConfig": "config",
    "ExperimentResult": "run",
    "LambdaGridConfig": "config",
    "MCConfig": "config",
    "PAPER": "paper",
    "PairedTest": "stats",
    "RealCloudsConfig": "realconfig",
    "RealCloudsResult": "realclouds",
    "RealSeries": "realdata",
    "SolverSettings": "config",
    "TrialResult": "trials",
    "TrialSpec": "trials",
    "best_lambdas": "bestlambda",
    "experiment_kind": "realconfig",
    "fit_best_lambda": "bestlambda",
    "fit_table": "bestlambda",
    "image_label": "config",
    "lambda_grid": "trials",
    "load_experiment_config": "config",
    "load_real_clouds_config": "realconfig",
    "load_real_series": "realdata",
    "load_run": "summary",
    "mc_ttests": "stats",
    "method_comparison": "stats",
    "paired_ttest": "stats",
    "resolve_image": "config",
    "run_experiment": "run",
    "run_real_clouds": "realclouds",
    "run_trial": "trials",
    "summarise": "summary",
    "trial_seed": "trials",
    "trials_of": "trials",
    "write_experiments_md": "document",
    "write_report": "report",
    "zones": "stats",
}

__all__ = [
    "BEGIN",
    "BUNDLED_IMAGES",
    "END",
    "PAPER",
    "ExperimentConfig",
    "ExperimentResult",
    "LambdaGridConfig",
    "MCConfig",
    "PairedTest",
    "RealCloudsConfig",
    "RealCloudsResult",
    "RealSeries",
    "SolverSettings",
    "TrialResult",
    "TrialSpec",
    "best_lambdas",
    "experiment_kind",
    "fit_best_lambda",
    "fit_table",
    "image_label",
    "lambda_grid",
    "load_experiment_config",
    "load_real_clouds_config",
    "load_real_series",
    "load_run",
    "mc_ttests",
    "method_comparison",
    "paired_ttest",
    "resolve_image",
    "run_experiment",
    "run_real_clouds",
    "run_trial",
    "summarise",
    "trial_seed",
    "trials_of",
    "write_experiments_md",
    "write_report",
    "zones",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'cloudlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"cloudlab.{module}"), name)
    globals()[name] = value
    return value
