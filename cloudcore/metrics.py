"""Recovery metric of the paper (eq. goodnessofrecovery, CONVENTIONS §4)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["recovery_error"]


def recovery_error(recovered: ArrayLike, truth: ArrayLike) -> float:
    """Relative recovery error r = ‖Î − I‖_F / ‖I‖_F over all recovered frames together.

    The reference stacks the n recovered frames and n copies of the truth, so this is *not* the
    mean of per-frame errors.

    Parameters
    ----------
    recovered
        The recovered ground, either a ``(d, n)`` matrix (one column per date) or a frame stack
        ``(n, h, w)``.
    truth
        The cloud-free truth: one frame (``(d,)``, ``(h, w)``) that is compared with every recovered
        frame, or an array of the same shape as ``recovered``.

    Returns
    -------
    float
        r; 0 means perfect recovery. NaN entries of ``recovered`` (pixels observed on no date) are
        excluded from both norms.
    """
    rec = np.asarray(recovered, dtype=np.float64)
    ref = np.asarray(truth, dtype=np.float64)
    if ref.shape != rec.shape:
        if rec.ndim == 2 and ref.ndim == 1 and ref.shape[0] == rec.shape[0]:
            ref = ref[:, None]  # one column per date
        elif rec.ndim == 3 and ref.shape == rec.shape[1:]:
            ref = ref[None]  # one frame per date
        else:
            raise ValueError(
                f"recovery_error: truth of shape {ref.shape} does not match recovered frames of "
                f"shape {rec.shape}; pass one frame or an array of the same shape"
            )
        ref = np.broadcast_to(ref, rec.shape)
    valid = np.isfinite(rec)
    diff = np.where(valid, rec - ref, 0.0)
    base = np.where(valid, ref, 0.0)
    denom = float(np.linalg.norm(base))
    if denom == 0.0:
        raise ValueError("recovery_error: the truth is all zero, r is undefined")
    return float(np.linalg.norm(diff) / denom)
