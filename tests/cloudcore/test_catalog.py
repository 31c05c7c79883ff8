"""cloudcore.catalog: what the package offers, read without numba by the pipeline's config."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import numpy as np
import pytest

import cloudcore
from cloudcore import catalog
from cloudcore.catalog import (
    HAZE_METHODS,
    LAYERS,
    METHODS,
    SCENE_METHODS,
    SHADOW_LAYER,
    SHADOW_METHODS,
    layers,
    writes_haze,
)


def test_methods() -> None:
    assert METHODS == ("aatm", "aatm-shadow", "rpca", "nnrpca", "atm")
    assert get_args(catalog.Method) == METHODS  # the config's type is the same list
    assert cloudcore.METHODS is METHODS and cloudcore.SHADOW_METHODS is SHADOW_METHODS
    assert HAZE_METHODS == ("aatm", "aatm-shadow") and SHADOW_METHODS == ("aatm-shadow",)
    assert set(SHADOW_METHODS) <= set(HAZE_METHODS) <= set(METHODS)
    assert SCENE_METHODS == tuple(m for m in METHODS if m != "atm")
    assert catalog.SHADOW_WEIGHT == 4.0


@pytest.mark.parametrize("refine", [False, True])
@pytest.mark.parametrize("method", METHODS)
def test_layers_each_method_writes(method: str, refine: bool) -> None:
    got = layers(method, refine)
    assert got[:3] == LAYERS == ("clear", "cloud", "haze")
    # The shadow model writes S; a refined solve writes its residual below the ground as the
    # shadow layer, whatever the method.
    assert len(got) == (4 if method in SHADOW_METHODS or refine else 3)
    assert got[3:] in ((), (SHADOW_LAYER,)) and SHADOW_LAYER == "shadow"
    assert writes_haze(method, refine) == (method in HAZE_METHODS and not refine)


@pytest.mark.parametrize("method", METHODS)
def test_the_solvers_write_what_the_catalog_says(method: str) -> None:
    rng = np.random.default_rng(0)
    D = np.clip(rng.random((60, 1)) * rng.uniform(0.9, 1.1, (1, 5)), 0, 1)
    D[:10, 2] = 0.95  # a cloud, so that the sparse layers have something to hold
    res = cloudcore.decompose(D, method, max_iter=50)
    assert (res.S is not None) == (method in SHADOW_METHODS)
    assert bool(np.any(res.N)) == writes_haze(method)


def test_mask_defaults_are_the_catalogs() -> None:
    # The values are the held-out benchmark's choice (docs/REAL-CLOUDS.md); one place holds them.
    rule = cloudcore.MaskRule()
    fields = (rule.cloud, rule.haze, rule.shadow, rule.radius, rule.grow, rule.white)
    assert fields == (
        catalog.MASK_CLOUD,
        catalog.MASK_HAZE,
        catalog.MASK_SHADOW,
        catalog.MASK_RADIUS,
        catalog.MASK_GROW,
        catalog.MASK_WHITE,
    )
    assert (rule.shadow_edge, rule.edge_reach) == (
        catalog.MASK_SHADOW_EDGE,
        catalog.MASK_EDGE_REACH,
    )
    assert (rule.shadow_near, rule.near_reach) == (
        catalog.MASK_SHADOW_NEAR,
        catalog.MASK_NEAR_REACH,
    )
    assert catalog.MASK_SHADOW < catalog.MASK_HAZE <= catalog.MASK_CLOUD


def test_reading_the_catalog_and_the_config_loads_no_numba() -> None:
    code = (
        "import sys\n"
        "import cloudcore.catalog, pipeline.config, pipeline.store.layout\n"
        "assert 'numba' not in sys.modules, sorted(sys.modules)\n"
        "from cloudcore import decompose, refine, complete\n"  # the package still offers them
        "assert 'numba' in sys.modules and callable(refine) and callable(complete)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("method", METHODS)
def test_additive_methods_layers_add_up_to_the_residual(method: str) -> None:
    """The claim :mod:`cloudcore.offset` (through the pipeline's mask pass) relies on: for the
    methods of ``ADDITIVE_METHODS`` the layers add up to D − L, C + N − S, to the solver's
    tolerance; ATM's C is an opacity and does not."""
    rng = np.random.default_rng(1)
    D = np.clip(rng.random((80, 1)) * rng.uniform(0.8, 1.2, (1, 6)), 0, 1)
    D[:12, 2] = 0.9  # a cloud
    D[20:30, 4] *= 0.5  # a shadow
    tol = 1e-7
    res = cloudcore.decompose(D, method, tol=tol, max_iter=3000)
    layers = res.C + res.N - (res.S if res.S is not None else 0.0)
    gap = float(np.linalg.norm(D - res.L - layers) / np.linalg.norm(D))
    if method in catalog.ADDITIVE_METHODS:
        # The solver's own stopping rule (relative primal residual under tol), recomputed here
        # in float64: 1 % allows for the order of the sums.
        assert gap < 1.01 * tol
    else:
        assert gap > 1e-2


def test_the_offset_default_is_the_catalogs() -> None:
    from cloudcore.offset import OFFSET_SCALE
    from pipeline.config import MaskConfig

    assert OFFSET_SCALE == catalog.MASK_OFFSET == MaskConfig().offset
