"""Cloud and haze removal numerics: NumPy (pixels × dates) matrices in, NumPy out.

Public API: :func:`decompose` (aATM, ATM, RPCA, non-negative RPCA), :func:`complete` (the MC
post-step), the λ rules, the cloud simulator (:mod:`cloudcore.simulate`) and
:func:`recovery_error`. Nothing here imports rasterio, zarr or dask.
"""

from cloudcore.complete import cloud_mask, complete
from cloudcore.lam import LambdaBounds, lambda_bounds, lambda_default, lambda_star
from cloudcore.metrics import recovery_error
from cloudcore.result import ConvergenceWarning, Decomposition
from cloudcore.simulate import (
    SimulatedSeries,
    apply_clouds,
    cloud_field,
    cloud_series,
    paper_case,
    perlin_noise,
    reference_clouds,
    simulate_series,
    stack_frames,
    to_grey,
    unit_scale,
    unstack_frames,
)
from cloudcore.solvers import METHODS, decompose

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "ConvergenceWarning",
    "Decomposition",
    "LambdaBounds",
    "SimulatedSeries",
    "__version__",
    "apply_clouds",
    "cloud_field",
    "cloud_mask",
    "cloud_series",
    "complete",
    "decompose",
    "lambda_bounds",
    "lambda_default",
    "lambda_star",
    "paper_case",
    "perlin_noise",
    "recovery_error",
    "reference_clouds",
    "simulate_series",
    "stack_frames",
    "to_grey",
    "unit_scale",
    "unstack_frames",
]
