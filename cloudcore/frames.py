"""The solvers' matrix layout: frames ``(n, height, width)`` ↔ matrix ``D`` of shape ``(d, n)``.

Column ``t`` of ``D`` is frame ``t`` flattened in C order (row after row), so row ``y·width + x``
is pixel ``(y, x)`` and d = height·width.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from cloudcore._checks import check_shape

__all__ = ["stack_frames", "unstack_frames"]


def stack_frames(frames: ArrayLike) -> np.ndarray:
    """Frames ``(n, height, width)`` to the solvers' matrix ``D`` of shape ``(height·width, n)``.

    Parameters
    ----------
    frames
        One frame per date, ``(n, height, width)``.

    Returns
    -------
    numpy.ndarray
        A C-contiguous copy of shape ``(height·width, n)``: column ``t`` is frame ``t`` flattened
        in C order (row after row), so row ``y·width + x`` is pixel ``(y, x)``.
    """
    f = np.asarray(frames)
    if f.ndim != 3:
        raise ValueError(f"stack_frames: frames must be (n, height, width), got shape {f.shape}")
    return np.ascontiguousarray(f.reshape(f.shape[0], -1).T)


def unstack_frames(D: ArrayLike, shape: tuple[int, int]) -> np.ndarray:
    """Inverse of :func:`stack_frames`: ``(height·width, n)`` to frames ``(n, height, width)``.

    Parameters
    ----------
    D
        Matrix with one row per pixel and one column per date.
    shape
        ``(height, width)`` of one frame; ``D`` must have ``height·width`` rows.

    Returns
    -------
    numpy.ndarray
        A C-contiguous array ``(n, height, width)``.
    """
    h, w = check_shape(shape, "unstack_frames")
    m = np.asarray(D)
    if m.ndim != 2 or m.shape[0] != h * w:
        raise ValueError(
            f"unstack_frames: D of shape {m.shape} does not hold frames of shape {(h, w)}; "
            f"it needs {h * w} rows, one per pixel"
        )
    return np.ascontiguousarray(m.T.reshape(m.shape[1], h, w))
