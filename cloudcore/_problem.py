"""Input checks and the reshaping shared by every solver (validation happens once, here)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np
from numpy.typing import ArrayLike

from cloudcore._kernels import gram
from cloudcore.result import Decomposition

# How far outside [0, 1] observed values may lie before we refuse them: DN scaling produces
# exact 0 and 1, float32 round-trips a few ulps beyond.
RANGE_SLACK = 1e-6


@dataclass(frozen=True)
class Problem:
    """A validated solver input in the solvers' internal *wide* layout.

    ``D`` is (short, long) and C-contiguous: normally Dᵀ (dates × pixels), so that the kernels'
    inner loops run over contiguous pixels; D itself when the caller's D has fewer pixels than
    dates (the ALM commutes with transposition, so either orientation gives the same answer).
    """

    D: np.ndarray  # (short, long), C-contiguous, float32 or float64, zeros where unobserved
    obs: np.ndarray | None  # bool, same layout; None when every entry is observed
    kept_rows: np.ndarray | None  # caller's rows kept (observed at least once); None = all
    shape: tuple[int, int]  # the caller's (d, n)
    transposed: bool  # D here is the caller's Dᵀ

    def internal(self, x: np.ndarray) -> np.ndarray:
        """Map a caller's (d, n) array into the internal layout (the inverse of :meth:`expand`)."""
        if self.kept_rows is not None:
            x = x[self.kept_rows]
        return np.ascontiguousarray(x.T if self.transposed else x, dtype=self.D.dtype)

    def expand(self, x: np.ndarray) -> np.ndarray:
        """Map an internal array back to the caller's (d, n), NaN in rows observed on no date.

        The result has the internal layout: for a transposed problem a (d, n) view of a
        C-contiguous dates × pixels array, each date's column contiguous, whether rows were
        dropped or not. (Expanded into a C-ordered (d, n) array, a tile with pixels seen on no
        date came back in the other layout, and the cap (there and back) and the tile's
        (dates, rows, cols) stack copied each layer: nine copies a tile, 0.1 s at 1280².)
        """
        if self.kept_rows is None:
            return x.T if self.transposed else x
        if self.transposed:
            wide = np.full(self.shape[::-1], np.nan, dtype=x.dtype)
            wide[:, self.kept_rows] = x
            return wide.T
        out = np.full(self.shape, np.nan, dtype=x.dtype)
        out[self.kept_rows] = x
        return out


def prepare(D: ArrayLike, mask: ArrayLike | None) -> Problem:
    """Validate ``D`` (d × n, values in [0, 1]) and ``mask`` (True = observed)."""
    a = np.asarray(D)
    if a.ndim != 2:
        raise ValueError(f"D must be a 2-D (pixels × dates) matrix, got shape {a.shape}")
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    d, n = a.shape
    if n < 2 or d < 2:
        raise ValueError(
            f"D has shape {a.shape}: a time series needs at least 2 dates (columns) and 2 pixels"
        )
    obs = None
    if mask is not None:
        obs = np.asarray(mask)
        if obs.shape != a.shape or obs.dtype != np.bool_:
            raise ValueError(
                f"mask must be a boolean array of D's shape {a.shape}, got {obs.dtype} {obs.shape}"
            )
        if obs.all():
            obs = None
    values = a if obs is None else a[obs]  # the observed entries, extracted once
    # NaN and ±inf show in the extremes (min and max propagate NaN): no boolean array of every
    # entry (a tile's is 11 MiB, memory to allocate and page in for one check).
    low, high = (values.min(), values.max()) if values.size else (0.0, 0.0)
    if not (np.isfinite(low) and np.isfinite(high)):
        if mask is None:
            raise ValueError(
                f"D holds {int(np.count_nonzero(~np.isfinite(values)))} NaN/inf values; pass "
                "mask= (True = observed) to mark missing entries"
            )
        raise ValueError("D holds NaN/inf at entries the mask marks as observed")
    if low < -RANGE_SLACK or high > 1 + RANGE_SLACK:
        raise ValueError(
            f"D has values in [{low:.4g}, {high:.4g}], outside [0, 1]; divide by "
            "the sensor's maximum DN first"
        )
    kept = None
    if obs is not None:
        seen = obs.any(axis=1)
        if not seen.all():
            kept = np.flatnonzero(seen)
            a, obs = a[kept], obs[kept]
        a = np.where(obs, a, 0.0).astype(a.dtype, copy=False)
    transposed = a.shape[0] >= a.shape[1]
    if transposed:
        a = a.T
        obs = None if obs is None else obs.T
    a = np.ascontiguousarray(a)
    obs = None if obs is None else np.ascontiguousarray(obs)
    return Problem(D=a, obs=obs, kept_rows=kept, shape=(d, n), transposed=transposed)


def zero_result(problem: Problem, lam: float, method: str) -> Decomposition:
    """The defined answer for ‖D‖₂ = 0: L = C = N = 0, nothing to iterate.

    That covers an all-zero D and a mask with nothing observed (then every row is NaN).
    """
    zeros = problem.expand(np.zeros_like(problem.D))
    return Decomposition(
        L=zeros,
        C=zeros.copy(order="K"),  # the layout of every other result
        N=zeros.copy(order="K"),
        iterations=0,
        converged=True,
        residual=0.0,
        lam=lam,
        method=method,
    )


def spectral_norm(a: np.ndarray) -> float:
    """‖a‖₂ of a wide (short × long) matrix via its Gram matrix (float64); 0 when empty."""
    if a.size == 0:
        return 0.0  # nothing observed: handled like an all-zero D
    return float(np.sqrt(max(np.linalg.eigvalsh(gram(a))[-1], 0.0)))


@contextmanager
def numba_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` numba threads (None: leave numba's setting alone)."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    previous = numba.get_num_threads()
    limit = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    numba.set_num_threads(min(threads, limit))
    try:
        yield
    finally:
        numba.set_num_threads(previous)
