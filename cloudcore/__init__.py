"""Cloud and haze removal numerics: NumPy (pixels × dates) matrices in, NumPy out.

Public API: :func:`decompose` (aATM, ATM, RPCA, non-negative RPCA), :func:`complete` (the MC
post-step), :func:`refine` (the masked re-solve), :func:`cap_ground` (overcast dates out of the
ground), the λ rules, the matrix layout
(:func:`stack_frames`), the cloud simulator (:mod:`cloudcore.simulate`) and
:func:`recovery_error`. :mod:`cloudcore.catalog` says what the package offers (methods, the
layers each writes, the mask's defaults) without importing numba. :mod:`cloudcore.reference`
holds the literal NumPy port of the reference solvers, the oracle of the tests. Nothing here
imports rasterio, zarr or dask.

Every public name is an attribute that imports its module on first use (PEP 562): ``import
cloudcore.catalog`` (the pipeline's configuration) loads no numba, solving loads no
scikit-image (only the simulator needs it), and ``from cloudcore import decompose`` works as
ever.

"CONVENTIONS §n" in the docstrings is section n of ``docs/CONVENTIONS.md``, where the project
records how it settles what the paper leaves open.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # resolved lazily at run time, see __getattr__
    from cloudcore import simulate
    from cloudcore.anomaly import anomaly_scale
    from cloudcore.cap import cap_ground
    from cloudcore.catalog import METHODS, SHADOW_METHODS
    from cloudcore.complete import cloud_mask, complete
    from cloudcore.compose import compose
    from cloudcore.frames import stack_frames, unstack_frames
    from cloudcore.lam import LambdaBounds, lambda_bounds, lambda_default, lambda_star
    from cloudcore.masks import (
        MaskRule,
        classify,
        classify_result,
        classify_scores,
    )
    from cloudcore.metrics import recovery_error
    from cloudcore.refine import RefineRule, refine
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
        to_grey,
        unit_scale,
    )
    from cloudcore.solvers import decompose

#: Part of every tile's id (``pipeline.ids.code_version``): raised when a solve's output changes
#: for the same settings, so that a rerun does not keep tiles solved the old way. 0.1.1: the
#: ground's cap only where observed (an entry a provider's mask flags keeps its completion).
__version__ = "0.1.1"

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
    "cap_ground",
    "classify",
    "classify_result",
    "classify_scores",
    "cloud_field",
    "cloud_mask",
    "cloud_series",
    "complete",
    "compose",
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

# The module of every public name that is not the simulator's (those live in cloudcore.simulate).
_HOME = {
    "METHODS": "catalog",
    "cap_ground": "cap",
    "SHADOW_METHODS": "catalog",
    "cloud_mask": "complete",
    "complete": "complete",
    "stack_frames": "frames",
    "unstack_frames": "frames",
    "LambdaBounds": "lam",
    "lambda_bounds": "lam",
    "lambda_default": "lam",
    "lambda_star": "lam",
    "MaskRule": "masks",
    "anomaly_scale": "anomaly",
    "classify": "masks",
    "classify_result": "masks",
    "classify_scores": "masks",
    "compose": "compose",
    "recovery_error": "metrics",
    "RefineRule": "refine",
    "refine": "refine",
    "ConvergenceWarning": "result",
    "Decomposition": "result",
    "decompose": "solvers",
}


def __getattr__(name: str) -> Any:
    """Import the module that holds public ``name`` on its first use (PEP 562).

    The solvers import numba and compile (or load) their kernels; the simulator imports
    scikit-image, which no solver uses and whose import adds about 0.3 s. So ``import
    cloudcore`` loads neither: a worker that only solves never pays for the simulator, and the
    configuration, which reads :mod:`cloudcore.catalog`, never pays for numba.
    """
    if name not in __all__:
        raise AttributeError(f"module 'cloudcore' has no attribute {name!r}")
    module = importlib.import_module(f"cloudcore.{_HOME.get(name, 'simulate')}")
    value = module if name == "simulate" else getattr(module, name)
    globals()[name] = value  # found once: later look-ups do not come back here
    return value


def __dir__() -> list[str]:
    """Public names, the lazy ones included (for ``dir()`` and tab completion)."""
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """This package's module: the names ``complete`` and ``refine`` stay the functions."""

    def __setattr__(self, name: str, value: Any) -> None:
        # Importing a submodule binds it on its package, whenever that happens. The functions
        # complete and refine share their modules' names, and the package's names mean the
        # functions (as they did when this file imported them eagerly).
        if isinstance(value, types.ModuleType) and _HOME.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
