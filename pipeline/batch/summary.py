"""What a batch reports: the outcome of each series, and the summary printed at the end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["BatchSummary", "SeriesOutcome", "Status"]

Status = Literal["processed", "skipped", "failed", "pending", "planned"]


@dataclass(frozen=True)
class SeriesOutcome:
    """What happened to one series in a batch."""

    series_id: str
    status: Status
    products: int
    output: Path
    message: str = ""
    solved: int = 0


@dataclass(frozen=True)
class BatchSummary:
    """What a batch did; ``ok`` is False when any series failed."""

    outcomes: tuple[SeriesOutcome, ...]
    unreadable: tuple[tuple[str, str], ...] = ()
    superseded: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    catalog: Path | None = None
    cluster_started: bool = False
    seconds: float = 0.0

    def _ids(self, status: str) -> tuple[str, ...]:
        """Ids of the series with ``status``, in batch order."""
        return tuple(o.series_id for o in self.outcomes if o.status == status)

    @property
    def processed(self) -> tuple[str, ...]:
        """Series run in this batch."""
        return self._ids("processed")

    @property
    def skipped(self) -> tuple[str, ...]:
        """Series already up to date."""
        return self._ids("skipped")

    @property
    def failed(self) -> tuple[str, ...]:
        """Series whose run failed (the next batch retries them)."""
        return self._ids("failed")

    @property
    def pending(self) -> tuple[str, ...]:
        """Series with fewer than ``grouping.min_dates`` dates."""
        return self._ids("pending")

    @property
    def ok(self) -> bool:
        """True when no series failed."""
        return not self.failed

    def describe(self) -> str:
        """A short account for the terminal: one line per series that did not simply skip."""
        lines = [
            f"series: {len(self.processed)} processed, {len(self.skipped)} up to date, "
            f"{len(self.failed)} failed, {len(self.pending)} waiting for more dates; "
            f"{self.seconds:.1f} s"
        ]
        if self._ids("planned"):
            lines[0] += f" (dry run: {len(self._ids('planned'))} would be processed)"
        for o in self.outcomes:
            if o.status != "skipped":
                detail = f": {o.message}" if o.message else ""
                lines.append(f"  {o.status.upper():9} {o.series_id} ({o.products} dates){detail}")
        lines += [f"  UNREADABLE {path}: {msg}" for path, msg in self.unreadable]
        lines += [f"  superseded (kept) {s}" for s in self.superseded if s not in self.removed]
        lines += [f"  superseded (removed) {s}" for s in self.removed]
        if self.catalog is not None:
            lines.append(f"catalog: {self.catalog}")
        return "\n".join(lines)
