"""Cloud and haze removal numerics: NumPy (pixels × dates) matrices in, NumPy out.

Public API: :func:`decompose` (aATM, ATM, RPCA, non-negative RPCA), :func:`complete` (the MC
post-step), :func:`refine` (the masked re-solve), the λ rules, the matrix layout
(:func:`stack_frames`), the cloud simulator (:mod:`cloudcore.simulate`) and
:func:`recovery_error`. :mod:`cloudcore.reference` holds the
literal NumPy port of the reference solvers, the oracle of the tests. Nothing here imports
rasterio, zarr or dask, and solving does not import scikit-image: the simulator's names
(:func:`paper_case`, :func:`simulate_series`, …) are attributes of this package that import
:mod:`cloudcore.simulate` on first use.

"CONVENTIONS §n" in the docstrings is section n of ``docs/CONVENTIONS.md``, where the project
records how it settles what the paper leaves open.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cloudcore.complete import cloud_mask, complete
from cloudcore.frames import stack_frames, unstack_frames
from cloudcore.lam import LambdaBounds, lambda_bounds, lambda_default, lambda_star
from cloudcore.masks import MaskRule, anomaly_scale, classify, classify_result
from cloudcore.metrics import recovery_error
from cloudcore.refine import RefineRule, refine
from cloudcore.result import ConvergenceWarning, Decomposition
from cloudcore.solvers import METHODS, SHADOW_METHODS, decompose

if TYPE_CHECKING:  # resolved lazily at run time, see __getattr__
    from cloudcore import simulate
    from cloudcore.simulate import (
        SimulatedSeries,
        apply_clouds,
        cloud_field,
        cloud_series,
        paper_case,
        perlin_noise,
        reference_clouds,
        simulate_series,
        to_grey,
        unit_scale,
    )

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "SHADOW_METHODS",
    "ConvergenceWarning",
    "Decomposition",
    "LambdaBounds",
    "MaskRule",
    "RefineRule",
    "SimulatedSeries",
    "__version__",
    "anomaly_scale",
    "apply_clouds",
    "classify",
    "classify_result",
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
    "refine",
    "simulate",
    "simulate_series",
    "stack_frames",
    "to_grey",
    "unit_scale",
    "unstack_frames",
]


def __getattr__(name: str) -> Any:
    """Import the simulator on first use of ``cloudcore.simulate`` or one of its names (PEP 562).

    The simulator needs scikit-image, which no solver uses and whose import adds about 0.3 s (a
    third of ``import cloudcore``), so worker processes that only solve never pay for it. Every
    public name not bound above is the simulator or one of its names.
    """
    if name not in __all__:
        raise AttributeError(f"module 'cloudcore' has no attribute {name!r}")
    module = importlib.import_module("cloudcore.simulate")
    return module if name == "simulate" else getattr(module, name)


def __dir__() -> list[str]:
    """Public names, the lazy ones included (for ``dir()`` and tab completion)."""
    return sorted({*globals(), *__all__})
