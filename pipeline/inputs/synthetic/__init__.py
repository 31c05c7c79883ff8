"""Simulated GF-4-like products and GeoTIFF series, for tests and the demo.

The cloud-free ground (the *truth*) is the bundled tyrol-w1 RGB image laid on a lon/lat grid.
Each date of a GF-4-like series is an L1A frame: a uint16 image without CRS or geotransform
whose ``.rpb`` RPC maps ground to image. Each date's RPC is shifted by a few pixels (as
separately pointed GF-4 frames are), so stacking the raw files misaligns, and only warping every
date through its own RPC onto a common grid puts the ground back in place. Clouds come from
:func:`cloudcore.simulate.cloud_series` and are mixed as ``I_t = C_t + (1 - C_t)·I``
(docs/CONVENTIONS.md §4); DN = round(I_t · max DN).

One module per job:

- :mod:`~pipeline.inputs.synthetic.ground`: the truth, the clouds and their DN;
- :mod:`~pipeline.inputs.synthetic.rpc`: the RPC model of a simulated frame and its ``.rpb``;
- :mod:`~pipeline.inputs.synthetic.sampling`: the ground seen through a frame's RPC;
- :mod:`~pipeline.inputs.synthetic.gf4_files`: the files of one GF-4 sensor image;
- :mod:`~pipeline.inputs.synthetic.gf4_series`: a series of GF-4 products;
- :mod:`~pipeline.inputs.synthetic.geotiff_series`: a series of GeoTIFFs, and one date of it.
"""

from pipeline.inputs.synthetic.geotiff_series import make_geotiff_series, write_scene
from pipeline.inputs.synthetic.gf4_series import make_gf4_series
from pipeline.inputs.synthetic.ground import SimulatedProducts, load_demo_truth, truth_bands

__all__ = [
    "SimulatedProducts",
    "load_demo_truth",
    "make_geotiff_series",
    "make_gf4_series",
    "truth_bands",
    "write_scene",
]
