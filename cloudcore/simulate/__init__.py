"""Semi-realistic simulation of cloudy image series (paper, "Simulation and performance indicator").

A cloud-free grey image ``I`` in [0, 1] is the truth; each date ``t`` gets a cloud (opacity) field
``C_t`` in [0, 1] and is observed through the scattering model ``I_t = C_t + (1 − C_t)∘I``
(CONVENTIONS §4).

* :mod:`~cloudcore.simulate.noise`: gradient (Perlin) noise, :func:`perlin_noise`;
* :mod:`~cloudcore.simulate.clouds`: cloud fields (:func:`reference_clouds`, the reference
  experiments' recipe; :func:`cloud_field`, Perlin clouds with coverage, thickness and softness
  controls) and cloud time series (:func:`cloud_series`, including clouds that move and evolve);
* :mod:`~cloudcore.simulate.series`: the scattering model and whole simulations
  (:func:`apply_clouds`, :func:`simulate_series`, :func:`paper_case`);
* :mod:`~cloudcore.simulate.realistic`: a multi-band ground that changes between dates under
  thin and thick clouds and their shadows (``realistic_case``), where a darkest-pixel rule is
  no oracle.

Every random draw goes through the ``numpy.random.Generator`` passed as ``rng``, so a simulation is
reproducible from its seed and independent of any global state. This package needs scikit-image;
``import cloudcore`` does not import it until a simulator name is used.
"""

from cloudcore.frames import stack_frames, unstack_frames
from cloudcore.simulate.clouds import CloudStyle, cloud_field, cloud_series, reference_clouds
from cloudcore.simulate.noise import perlin_noise
from cloudcore.simulate.series import (
    RGB2GRAY_WEIGHTS,
    SimulatedSeries,
    apply_clouds,
    paper_case,
    simulate_series,
    to_grey,
    unit_scale,
)

__all__ = [
    "RGB2GRAY_WEIGHTS",
    "CloudStyle",
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
]
