"""Result type and warnings shared by all solvers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConvergenceWarning", "Decomposition"]


class ConvergenceWarning(UserWarning):
    """A solver stopped at ``max_iter`` before the constraint residual reached ``tol``."""


@dataclass(frozen=True)
class Decomposition:
    """Outcome of :func:`cloudcore.decompose` or :func:`cloudcore.complete`.

    Attributes
    ----------
    L
        Low-rank ground, shape ``(d, n)``: raw solver output, not clipped (see ``ground``).
        Rows of pixels observed on no date are NaN.
    C
        Sparse cloud, shape ``(d, n)``.
    N
        Haze layer, shape ``(d, n)``; zeros for methods without one.
    iterations
        Outer (ALM) iterations run.
    converged
        Whether ‖Z‖_F / ‖D‖_F fell below ``tol`` within ``max_iter``.
    residual
        Final relative constraint residual ‖Z‖_F / ‖D‖_F.
    lam
        The sparsity weight λ actually used.
    method
        Solver name.
    S
        Shadow layer, shape ``(d, n)``, in [0, 1], for ``"aatm-shadow"`` (D = L + C − S + N);
        None for the other methods.
    """

    L: np.ndarray
    C: np.ndarray
    N: np.ndarray
    iterations: int
    converged: bool
    residual: float
    lam: float
    method: str
    S: np.ndarray | None = None

    @property
    def ground(self) -> np.ndarray:
        """The user-facing clear ground: ``L`` clipped to [0, 1] (NaN rows kept)."""
        return self._clip_ground(None)

    def ground_in_place(self) -> np.ndarray:
        """:attr:`ground` written over ``L`` (which is then the ground) and returned: for a
        caller that needs L no more and would rather not hold a second (d, n) array."""
        return self._clip_ground(self.L)

    def _clip_ground(self, out: np.ndarray | None) -> np.ndarray:
        return np.clip(self.L, 0.0, 1.0, out=out)
