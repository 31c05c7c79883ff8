"""Zero arrays whose memory is paid for only where they are written.

Why: ``np.zeros_like`` allocates with ``empty_like`` and then writes a zero into every byte,
so a 1280² × 7 float32 array of zeros is 44 MiB of resident memory at once (measured with
NumPy 2.4: RSS +43 MiB). ``np.zeros`` asks the C library for zeroed memory; for arrays of
this size that is a fresh anonymous mapping, whose pages stay the system's shared zero page
until written. The RPCA variants never write N, and the refinement's haze is written only on
pixels observed on no date: made this way they cost next to nothing at a tile's memory peak.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lazy_zeros_like"]


def lazy_zeros_like(like: np.ndarray) -> np.ndarray:
    """Zeros of ``like``'s shape, dtype and memory order (as ``np.zeros_like``), unwritten.

    Parameters
    ----------
    like
        The array to match; C- or Fortran-ordered (a transposed view gives Fortran order, as
        ``np.zeros_like`` would).

    Returns
    -------
    numpy.ndarray
        A new zero array, none of whose pages is touched yet.
    """
    fortran = like.flags.f_contiguous and not like.flags.c_contiguous
    return np.zeros(like.shape, like.dtype, order="F" if fortran else "C")
