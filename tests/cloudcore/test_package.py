"""The package surface: what ``import cloudcore`` loads, and the public names it offers."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cloudcore
import cloudcore.simulate
from cloudcore import frames


def run_python(code: str) -> None:
    """Run ``code`` in a fresh interpreter (nothing imported yet) and require success."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_import_does_not_load_scikit_image():
    run_python("import cloudcore, sys; assert 'skimage' not in sys.modules")


def test_solving_does_not_load_scikit_image():
    run_python(
        "import sys\n"
        "import numpy as np\n"
        "import cloudcore\n"
        "D = np.random.default_rng(0).random((300, 5))\n"
        "res = cloudcore.decompose(D, 'aatm')\n"
        "assert res.converged and res.L.shape == (300, 5)\n"
        "assert 'skimage' not in sys.modules, 'solving imported scikit-image'\n"
    )


def test_simulator_names_load_on_first_use():
    run_python(
        "import sys, cloudcore\n"
        "assert 'cloudcore.simulate' not in sys.modules\n"
        "f = cloudcore.paper_case\n"
        "assert 'skimage' in sys.modules\n"
        "from cloudcore.simulate import paper_case\n"
        "assert f is paper_case\n"
    )


def test_import_does_not_load_numba():
    run_python("import cloudcore, sys; assert 'numba' not in sys.modules")


def test_functions_named_like_their_modules_stay_the_functions():
    # complete and refine share their modules' names; importing the modules first (as the
    # pipeline may) must not turn cloudcore.refine into a module.
    run_python(
        "import cloudcore.complete, cloudcore.refine, cloudcore\n"
        "from cloudcore import complete, refine\n"
        "from cloudcore.refine import refine as f\n"
        "from cloudcore.complete import complete as g\n"
        "assert refine is cloudcore.refine is f and complete is cloudcore.complete is g\n"
    )


def test_every_public_name_resolves():
    for name in cloudcore.__all__:
        assert getattr(cloudcore, name) is not None
    assert set(cloudcore.__all__) <= set(dir(cloudcore))
    assert cloudcore.simulate is sys.modules["cloudcore.simulate"]
    assert cloudcore.simulate_series is cloudcore.simulate.simulate_series
    with pytest.raises(AttributeError, match="no attribute 'solve_everything'"):
        _ = cloudcore.solve_everything


def test_simulate_keeps_its_public_names():
    before = {
        "RGB2GRAY_WEIGHTS",
        "SimulatedSeries",
        "apply_clouds",
        "cloud_field",
        "cloud_series",
        "paper_case",
        "perlin_noise",
        "reference_clouds",
        "simulate_series",
        "stack_frames",
        "to_grey",
        "unit_scale",
        "unstack_frames",
    }
    assert before <= set(cloudcore.simulate.__all__)
    assert all(hasattr(cloudcore.simulate, name) for name in cloudcore.simulate.__all__)
    assert cloudcore.simulate.stack_frames is frames.stack_frames is cloudcore.stack_frames


def test_names_the_pipeline_uses():
    from cloudcore.complete import complete
    from cloudcore.simulate import cloud_series, paper_case

    assert callable(complete) and callable(cloud_series) and callable(paper_case)
    for name in (
        "decompose",
        "ConvergenceWarning",
        "lambda_bounds",
        "lambda_default",
        "lambda_star",
        "recovery_error",
        "Decomposition",
        "METHODS",
        "__version__",
    ):
        assert hasattr(cloudcore, name)
