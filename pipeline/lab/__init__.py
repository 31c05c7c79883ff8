"""The lab: the paper's simulation experiments, re-run (``python -m pipeline experiment|report``).

An experiment simulates cloudy series from a clear image and runs every method × λ (with and
without the MC post-step) on each, so that the paper's λ study can be repeated and set beside
its numbers:

* :mod:`~pipeline.lab.config`: the experiment's YAML configuration and the images it names;
* :mod:`~pipeline.lab.trials`: one randomised trial (image, n, repeat), its seed and λ grid;
* :mod:`~pipeline.lab.run`: all trials on Dask, one task each, into ``results.csv`` and
  ``trials.csv``;
* :mod:`~pipeline.lab.summary`: mean and sd over trials per λ;
* :mod:`~pipeline.lab.bestlambda`: the best λ and its fit in n;
* :mod:`~pipeline.lab.stats`: the paired t-tests and the failure and clamping zones;
* :mod:`~pipeline.lab.paper`: the numbers the paper reports;
* :mod:`~pipeline.lab.tables`, :mod:`~pipeline.lab.plots`: markdown tables and figures;
* :mod:`~pipeline.lab.report`: one run's ``tables.md``, figures and statistics as CSV;
* :mod:`~pipeline.lab.document`: the generated block of ``docs/EXPERIMENTS.md``.
"""

from pipeline.lab.bestlambda import best_lambdas, fit_best_lambda, fit_table
from pipeline.lab.config import (
    BUNDLED_IMAGES,
    ExperimentConfig,
    LambdaGridConfig,
    MCConfig,
    SolverSettings,
    image_label,
    load_experiment_config,
    resolve_image,
)
from pipeline.lab.document import BEGIN, END, write_experiments_md
from pipeline.lab.paper import PAPER
from pipeline.lab.report import write_report
from pipeline.lab.run import ExperimentResult, run_experiment
from pipeline.lab.stats import PairedTest, mc_ttests, method_comparison, paired_ttest, zones
from pipeline.lab.summary import load_run, summarise
from pipeline.lab.trials import (
    TrialResult,
    TrialSpec,
    lambda_grid,
    run_trial,
    trial_seed,
    trials_of,
)

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
    "SolverSettings",
    "TrialResult",
    "TrialSpec",
    "best_lambdas",
    "fit_best_lambda",
    "fit_table",
    "image_label",
    "lambda_grid",
    "load_experiment_config",
    "load_run",
    "mc_ttests",
    "method_comparison",
    "paired_ttest",
    "resolve_image",
    "run_experiment",
    "run_trial",
    "summarise",
    "trial_seed",
    "trials_of",
    "write_experiments_md",
    "write_report",
    "zones",
]
