"""Inputs: the acquisitions of a series, from GF-4 products, GeoTIFFs or a simulation.

:func:`pipeline.inputs.discovery.discover` turns an ``inputs`` section into
:class:`Acquisition` objects in time order; one module per kind of input
(:mod:`~pipeline.inputs.gf4`, :mod:`~pipeline.inputs.geotiff`, :mod:`~pipeline.inputs.synthetic`),
and the DN scaling they share (:mod:`~pipeline.inputs.scaling`). A new kind of input is a new
module here, a new member of :data:`pipeline.config.InputsConfig`, and a branch in
:func:`~pipeline.inputs.discovery.discover`.

This package imports nothing but :class:`Acquisition`: Dask workers unpickle acquisitions in
every staging task, and should not pay for the discovery's imports (pydantic, the simulator).
"""

from pipeline.inputs.acquisition import Acquisition, check_series

__all__ = ["Acquisition", "check_series"]
