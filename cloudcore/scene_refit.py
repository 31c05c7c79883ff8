"""The refit of partly observed dates (:mod:`cloudcore.refit`) on blocks that never meet.

A block-wise solve (:func:`cloudcore.scene.solve_blocks`) with a mask ends as
:func:`cloudcore.decompose` does: every partly observed date is refitted on the basis of the
ALM's ground, and dates observed nowhere become NaN. Here that is done where the blocks live:

* the basis U_k = L·M is computed where L lives, M from the summed Gram matrix of L;
* each partly observed date is fitted by :func:`cloudcore.refit.ground_quantile` and
  :func:`cloudcore.refit.fit_column` on the same strided sample of its observed pixels that
  decompose takes (at most :data:`cloudcore.refit.FIT_ROWS`, in the scene's row-major order,
  which the blocks' ``origin`` gives), gathered on the driver: a few MB whatever the scene size;
* its new column U_k·c_j and the re-split of C and N are computed where they live
  (:func:`cloudcore.refit.set_column`).

Dates are done one after the other, as there. Blocks must hold scene windows at distinct
origins for the sample to be the one decompose takes of the whole matrix in row-major order.

:class:`BlockRefit` is a block's part (mixed into :class:`cloudcore.scene.Block`),
:class:`GroupRefit` a group's (mixed into :class:`cloudcore.scene.BlockGroup`: the shards call
these methods by name) and :func:`refit_blocks` the driver's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cloudcore import _kernels, refit
from cloudcore.svt import sum_grams

if TYPE_CHECKING:
    from cloudcore.scene import Shards, Stats

__all__ = ["BlockRefit", "GroupRefit", "refit_blocks", "row_offsets"]


class BlockRefit:
    """A block's part of the refit: U_k = L·M is local, the IRLS normal equations are sums over
    pixels. The state below is the block's (:class:`cloudcore.scene.Block` sets it)."""

    D: np.ndarray
    L: np.ndarray
    C: np.ndarray
    N: np.ndarray
    obs: np.ndarray | None
    n: int
    d: int
    empty: bool
    origin: tuple[int, int]
    frame_shape: tuple[int, ...]
    _basis: np.ndarray | None = None  # this block's rows of U_k, between begin and release
    _k: int = 0  # columns of the basis

    def values(self, D: np.ndarray | None = None) -> np.ndarray:
        """D (or some of its entries) in the solver precision (the block decodes its DN)."""
        raise NotImplementedError

    def refit_gram(self, full: np.ndarray) -> np.ndarray:
        """Gram matrix (float64) of L restricted to the dates ``full``."""
        if self.empty:
            return np.zeros((full.size, full.size))
        return _kernels.gram(self.L[full])  # a C-contiguous copy of those rows

    def refit_begin(self, full: np.ndarray, M: np.ndarray) -> None:
        """Keep this block's rows of the basis U_k = L[:, full]·M (float64, pixels × k)."""
        self._k = M.shape[1]
        if not self.empty:
            self._basis = self.L[full].T.astype(np.float64) @ M

    def _observed(self, j: int) -> np.ndarray:
        return self.obs[j] if self.obs is not None else np.ones(self.d, dtype=np.bool_)

    def _frame(self) -> tuple[int, int]:
        """(rows, columns) of the block's frame; a flat block is one row."""
        if len(self.frame_shape) == 2:
            return self.frame_shape[0], self.frame_shape[1]
        return 1, self.d

    def refit_row_counts(self, j: int) -> tuple[tuple[int, int], np.ndarray]:
        """The block's origin and, per row of its frame, how many pixels date ``j`` observed."""
        h, w = self._frame()
        if self.empty:
            return self.origin, np.zeros(h, dtype=np.int64)
        return self.origin, self._observed(j).reshape(h, w).sum(axis=1, dtype=np.int64)

    def refit_sample(
        self, j: int, offsets: dict[tuple[int, int], np.ndarray], stride: int
    ) -> tuple[np.ndarray, ...]:
        """The pixels of the strided sample of date ``j``'s observed pixels that lie here.

        ``offsets[origin][y]`` is the number of pixels date j observed before row y of this
        block in the scene's row-major order; every ``stride``-th observed pixel (rank 0,
        stride, 2·stride, …) is in the sample. Returns their ranks and their rows of U, D, L
        and the mask (all dates).
        """
        k = self._k
        if self.empty or self._basis is None:
            none = np.zeros((0, self.n))
            return np.zeros(0, np.int64), np.zeros((0, k)), none, none, none.astype(np.bool_)
        h, w = self._frame()
        o = self._observed(j).reshape(h, w)
        within = np.cumsum(o, axis=1) - 1  # rank of each observed pixel within its row
        ranks = (offsets[self.origin][:, None] + within).ravel()
        take = np.flatnonzero(o.ravel() & (ranks % stride == 0))
        obs = self.obs[:, take].T if self.obs is not None else np.ones((take.size, self.n), bool)
        D = self.values(self.D[:, take]).T
        return ranks[take], self._basis[take], D, self.L[:, take].T, obs

    def refit_end(
        self, j: int, coef: np.ndarray, method: str, lam: float, beta: float, kappa: float
    ) -> None:
        """L[·, j] ← U·c_j, and C, N of its observed entries re-split by the method's rule."""
        if self._basis is None:
            return
        refit.set_column(
            self._basis,
            coef,
            self.values(self.D[j]),
            self._observed(j),
            self.L[j],
            self.C[j],
            self.N[j],
            method,
            lam,
            beta,
            kappa,
            np.empty((3, self.d)),  # one date of one block: nothing to share it with
        )

    def refit_release(self) -> None:
        """Drop the basis (after the last date)."""
        self._basis = None

    def blank_dates(self, dates: np.ndarray) -> None:
        """NaN for dates observed nowhere in the matrix (decompose does the same)."""
        if not self.empty:
            for x in (self.L, self.C, self.N):
                x[dates] = np.nan


class GroupRefit:
    """A group's part of the refit: each call made on every block of the group, reductions
    summed in block order. :class:`cloudcore.scene.BlockGroup` provides ``_each``."""

    def _each(self, fn: Callable[[Any], Any], phase: str = "refit") -> list[Any]:
        raise NotImplementedError  # pragma: no cover - BlockGroup's

    def refit_gram(self, full: np.ndarray) -> np.ndarray:
        return sum_grams(self._each(lambda b: b.refit_gram(full)))

    def refit_begin(self, full: np.ndarray, M: np.ndarray) -> None:
        self._each(lambda b: b.refit_begin(full, M))

    def refit_row_counts(self, j: int) -> list[tuple[tuple[int, int], np.ndarray]]:
        return self._each(lambda b: b.refit_row_counts(j))

    def refit_sample(
        self, j: int, offsets: dict[tuple[int, int], np.ndarray], stride: int
    ) -> list[tuple[np.ndarray, ...]]:
        return self._each(lambda b: b.refit_sample(j, offsets, stride))

    def refit_end(
        self, j: int, coef: np.ndarray, method: str, lam: float, beta: float, kappa: float
    ) -> None:
        self._each(lambda b: b.refit_end(j, coef, method, lam, beta, kappa))

    def refit_release(self) -> None:
        self._each(lambda b: b.refit_release())

    def blank_dates(self, dates: np.ndarray) -> None:
        self._each(lambda b: b.blank_dates(dates))


def refit_blocks(
    shards: Shards,
    stats: Stats,
    method: str,
    lam: float,
    beta: float,
    kappa: float,
    refit_partial: bool = True,
) -> int:
    """:func:`cloudcore.refit.refit_partial_columns` and the NaN of dates observed nowhere, as
    decompose applies them after a masked solve, on the blocks where they live.

    Parameters
    ----------
    shards
        The block groups, after the iterations.
    stats
        The reduced statistics of D (observed pixels per date, pixels observed on some date).
    method, lam, beta, kappa
        The solve's method, λ, β and κ (the re-split's rule).
    refit_partial
        False: only the NaN of dates observed nowhere (``decompose(..., refit=False)``).

    Returns
    -------
    int
        The calls made to the shards (rounds of communication).
    """
    counted = _Counting(shards)  # every call to the shards goes through it
    counts = stats.date_counts
    empty = counts == 0
    partly = np.flatnonzero((counts < stats.seen) & ~empty)
    partial = [int(j) for j in partly] if refit_partial else []
    if partial:
        full = np.flatnonzero(~empty)
        M = refit.basis_weights(sum_grams(counted.map("refit_gram", full)))
        if M is not None:  # L = 0: nothing to refit from
            counted.map("refit_begin", full, M)
            whole = np.flatnonzero(counts == stats.seen)
            for j in partial:
                stride = refit.sample_stride(int(counts[j]))
                offsets = row_offsets(
                    [c for part in counted.map("refit_row_counts", j) for c in part]
                )
                parts = [
                    p for part in counted.map("refit_sample", j, offsets, stride) for p in part
                ]
                ranks = np.concatenate([p[0] for p in parts])
                U, D, L, obs = (np.concatenate([p[i] for p in parts]) for i in range(1, 5))
                order_ = np.argsort(ranks, kind="stable")
                U, D, L, obs = U[order_], D[order_], L[order_], obs[order_]
                rows = np.arange(ranks.size)
                q = refit.ground_quantile(D, obs, L, rows, j, whole)
                coef = refit.fit_column(U, D[:, j].astype(np.float64), q)
                counted.map("refit_end", j, coef, method, lam, beta, kappa)
            counted.map("refit_release")
    if empty.any():
        counted.map("blank_dates", np.flatnonzero(empty))
    return counted.calls


class _Counting:
    """Shards that count the calls made through them."""

    def __init__(self, shards: Shards) -> None:
        self.shards, self.calls = shards, 0

    def map(self, method: str, *args: Any) -> list[Any]:
        self.calls += 1
        return self.shards.map(method, *args)


def row_offsets(
    counts: Sequence[tuple[tuple[int, int], np.ndarray]],
) -> dict[tuple[int, int], np.ndarray]:
    """Where each row of each block starts in the scene's row-major order of observed pixels.

    Parameters
    ----------
    counts
        Per block, its origin (row, column) in the scene and how many pixels each of its rows
        holds (:meth:`BlockRefit.refit_row_counts`).

    Returns
    -------
    dict
        For each origin, the count of everything before each of its rows in the scene's
        row-major order (rows of the scene first, then columns).

    Raises
    ------
    ValueError
        When two blocks share an origin.
    """
    segments = sorted(
        (origin[0] + y, origin[1], origin, y)
        for origin, per_row in counts
        for y in range(per_row.size)
    )
    lookup = {origin: per_row for origin, per_row in counts}
    if len(lookup) != len(counts):
        raise ValueError("blocks need distinct origins (their windows in the scene) to refit")
    offsets = {origin: np.zeros(per_row.size, np.int64) for origin, per_row in counts}
    total = 0
    for _, _, origin, y in segments:
        offsets[origin][y] = total
        total += int(lookup[origin][y])
    return offsets
