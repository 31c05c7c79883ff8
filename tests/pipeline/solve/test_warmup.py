"""The kernel warm-up of worker start (pipeline.solve.warmup)."""

from __future__ import annotations

import threading

from pipeline.config import SolverConfig
from pipeline.solve import warmup


def test_warm_kernels_solves_and_takes_the_machine_lock(tmp_path, monkeypatch):
    lock = tmp_path / "kernels.lock"
    monkeypatch.setattr(warmup, "LOCK_PATH", lock)
    assert warmup.warm_kernels(SolverConfig(method="rpca", refine=True)) > 0.0
    assert lock.exists()


def test_scene_scope_warms_the_kernels_that_read_d_as_dn(tmp_path, monkeypatch):
    from cloudcore import _kernels

    monkeypatch.setattr(warmup, "LOCK_PATH", tmp_path / "kernels.lock")
    calls = []

    def spy(solver):
        calls.append(solver.scope)
        return warm_dn_blocks(solver)

    warm_dn_blocks = warmup.warm_dn_blocks
    monkeypatch.setattr(warmup, "warm_dn_blocks", spy)
    assert warmup.warm_kernels(SolverConfig()) > 0.0  # tile scope: no DN blocks
    assert warmup.warm_kernels(SolverConfig(scope="scene")) > 0.0
    assert calls == ["scene"]
    # The default (aATM) runs the haze pass; a scene-scope shard calls it with uint16 D.
    assert any("uint16" in str(sig[0]) for sig in _kernels.fused_iteration.signatures)


def test_the_lock_makes_warmups_take_turns(tmp_path):
    lock = tmp_path / "kernels.lock"
    inside: list[int] = []
    overlap = threading.Event()

    def hold() -> None:
        with warmup.machine_lock(lock):
            inside.append(1)
            if len(inside) > 1:
                overlap.set()
            threading.Event().wait(0.05)
            inside.pop()

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlap.is_set()


def test_a_failed_warmup_only_logs(monkeypatch, caplog):
    def broken(solver: SolverConfig) -> float:
        raise RuntimeError("no kernels here")

    monkeypatch.setattr(warmup, "warm_kernels", broken)
    warmup.KernelWarmup(SolverConfig())._warm()
    assert "no kernels here" in caplog.text
