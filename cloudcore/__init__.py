"""Cloud and haze removal numerics: NumPy (pixels × dates) matrices in, NumPy out.

Public API: :func:`decompose` (aATM, ATM, RPCA, non-negative RPCA), :func:`complete` (the MC
post-step), the λ rules, and :func:`recovery_error`. Nothing here imports rasterio, zarr or dask.
"""

from cloudcore.complete import cloud_mask, complete
from cloudcore.lam import LambdaBounds, lambda_bounds, lambda_default, lambda_star
from cloudcore.metrics import recovery_error
from cloudcore.result import ConvergenceWarning, Decomposition
from cloudcore.solvers import METHODS, decompose

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "ConvergenceWarning",
    "Decomposition",
    "LambdaBounds",
    "__version__",
    "cloud_mask",
    "complete",
    "decompose",
    "lambda_bounds",
    "lambda_default",
    "lambda_star",
    "recovery_error",
]
