"""Recovery metric of the paper (eq. goodnessofrecovery, CONVENTIONS §4), and the spectral angle
that scores a pixel's colour apart from its brightness."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["recovery_error", "spectral_angle"]


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


def spectral_angle(output: ArrayLike, truth: ArrayLike) -> np.ndarray:
    """The angle, in degrees, between each pixel's band vector in ``output`` and in ``truth``.

    0 where the output is the truth times any positive factor: the angle scores a pixel's
    colour (the bands' proportions) apart from its brightness, which r mixes in.

    Parameters
    ----------
    output, truth
        ``(bands, pixels)`` (or ``(bands, ...)``) of the same shape.

    Returns
    -------
    numpy.ndarray
        float64 of shape ``output.shape[1:]``: the angle in [0, 180]; NaN where a band of either
        is not finite or either vector is zero (no colour).
    """
    out = np.asarray(output, dtype=np.float64)
    ref = np.asarray(truth, dtype=np.float64)
    if out.shape != ref.shape:
        raise ValueError(
            f"spectral_angle: output of shape {out.shape} and truth of shape {ref.shape} differ"
        )
    norms = np.linalg.norm(out, axis=0) * np.linalg.norm(ref, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.sum(out * ref, axis=0) / np.where(norms > 0, norms, np.nan)
    return np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))
