"""Scores against a real reference: r on chosen entries, and agreement of cloud masks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudcore import recovery_error

__all__ = ["Agreement", "agreement", "agreement_per_date", "relative_error"]


def relative_error(estimate: np.ndarray, truth: np.ndarray, where: np.ndarray) -> float:
    """r = ‖estimate − truth‖_F / ‖truth‖_F over the entries ``where`` is True.

    This is :func:`cloudcore.recovery_error` restricted to a set of entries. An estimate that
    is NaN at a chosen entry counts as 0 there (a missing answer is an error, not a skip).

    Parameters
    ----------
    estimate, truth
        Arrays of one shape.
    where
        Boolean of that shape: the entries scored.

    Returns
    -------
    float
        r; NaN when ``where`` selects nothing.
    """
    where = np.asarray(where, dtype=bool)
    if not where.any():
        return float("nan")
    est = np.nan_to_num(np.asarray(estimate, dtype=np.float64)[where], nan=0.0)
    return recovery_error(est, np.asarray(truth, dtype=np.float64)[where])


@dataclass(frozen=True)
class Agreement:
    """Counts of a predicted class against the reference: true and false positives, misses."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        """tp / (tp + fp); NaN when nothing was predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        """tp / (tp + fn); NaN when the reference has none."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def f1(self) -> float:
        """2 tp / (2 tp + fp + fn); NaN when neither the reference nor the prediction has any."""
        denom = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denom if denom else float("nan")

    def __add__(self, other: Agreement) -> Agreement:
        return Agreement(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)


def agreement(
    reference: np.ndarray,
    predicted: np.ndarray,
    ref_codes: tuple[int, ...],
    pred_codes: tuple[int, ...],
    nodata: int = 255,
) -> Agreement:
    """How well ``predicted`` finds the entries of ``reference`` in ``ref_codes``.

    An entry is positive in the reference where its code is in ``ref_codes`` and predicted
    positive where the predicted code is in ``pred_codes``. Entries that either array marks
    ``nodata`` are left out.

    Parameters
    ----------
    reference, predicted
        Integer code arrays of one shape.
    ref_codes, pred_codes
        The codes that make the class in each.
    nodata
        The no-data code of both.

    Returns
    -------
    Agreement
    """
    reference, predicted = np.asarray(reference), np.asarray(predicted)
    if reference.shape != predicted.shape:
        raise ValueError(f"agreement: shapes differ: {reference.shape} vs {predicted.shape}")
    valid = (reference != nodata) & (predicted != nodata)
    truth = np.isin(reference, ref_codes) & valid
    guess = np.isin(predicted, pred_codes) & valid
    return Agreement(
        tp=int((truth & guess).sum()),
        fp=int((~truth & guess).sum()),
        fn=int((truth & ~guess).sum()),
    )


def agreement_per_date(
    reference: np.ndarray,
    predicted: np.ndarray,
    ref_codes: tuple[int, ...],
    pred_codes: tuple[int, ...],
    nodata: int = 255,
) -> list[Agreement]:
    """:func:`agreement` of each date (first axis) separately; their sum is the overall one.

    Parameters
    ----------
    reference, predicted
        ``(dates, …)`` code arrays of one shape.
    ref_codes, pred_codes, nodata
        As in :func:`agreement`.

    Returns
    -------
    list of Agreement
        One per date.
    """
    return [
        agreement(r, p, ref_codes, pred_codes, nodata)
        for r, p in zip(np.asarray(reference), np.asarray(predicted), strict=True)
    ]
