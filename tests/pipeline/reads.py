"""A spy on a run's reads: which chunk files a task asks the kernel for, and which it reads,
in order (the real Zarr store still does the reading)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from zarr.storage import LocalStore


def record_reads(monkeypatch: pytest.MonkeyPatch, *modules: str) -> list[tuple[str, Path]]:
    """Record ("read", path) for every file a :class:`zarr.storage.LocalStore` reads and
    ("asked", path) for every file ``prefetch_files`` of ``modules`` is given, in order."""
    events: list[tuple[str, Path]] = []
    read = LocalStore.get

    async def spy(self: LocalStore, key: str, *args: object, **kwargs: object) -> object:
        events.append(("read", Path(self.root) / key))
        return await read(self, key, *args, **kwargs)  # type: ignore[arg-type]

    def asked(paths: Iterable[Path]) -> None:
        events.extend(("asked", Path(p)) for p in paths)

    monkeypatch.setattr(LocalStore, "get", spy)
    for module in modules:
        monkeypatch.setattr(f"{module}.prefetch_files", asked)
    return events


def reads_asked_before(events: list[tuple[str, Path]], files: set[Path]) -> tuple[int, list[Path]]:
    """How many reads of ``files`` there were, and those no earlier request had asked for."""
    asked: set[Path] = set()
    count, unasked = 0, []
    for kind, path in events:
        if kind == "asked":
            asked.add(path)
        elif path in files:
            count += 1
            if path not in asked:
                unasked.append(path)
    return count, unasked
