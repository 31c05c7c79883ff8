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


def test_the_mask_pass_kernel_is_warmed_for_its_float32_scores(tmp_path, monkeypatch):
    from cloudcore._window import window_means

    monkeypatch.setattr(warmup, "LOCK_PATH", tmp_path / "kernels.lock")
    warmup.warm_kernels(SolverConfig())
    layouts = {str(sig[0]) for sig in window_means.signatures if "float32" in str(sig[0])}
    # Whole arrays and the mask pass's column cuts of them, each compiled apart.
    assert any(", C)" in s for s in layouts) and any(", A)" in s for s in layouts), layouts


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


def test_the_warm_up_solve_converges_so_it_has_nothing_to_warn_about():
    """Its own silencing of "did not converge" (``warnings.catch_warnings`` in solve_matrix) is
    not thread-safe beside the worker's first tasks: a warm-up that stopped unconverged after 3
    iterations reached the demo's log."""
    from pipeline.solve.tile import resolve_lambda, solve_matrix

    for solver in (
        SolverConfig(),
        SolverConfig(dtype="float64"),
        SolverConfig(method="rpca", refine=True),
        SolverConfig(method="aatm-shadow"),
    ):
        D, mask = warmup.warmup_matrix(solver.dtype)
        lam = resolve_lambda("auto", *D.shape)
        brief = warmup.brief_solver(solver)
        result = solve_matrix(D, mask, brief, (64, 64), lam, threads=1)
        assert result.converged, solver  # in one iteration (a refined solve: one a pass)
        # What it replaced did not converge: the tolerance is what makes the difference.
        plain = solver.model_copy(update={"max_iter": brief.max_iter})
        assert not solve_matrix(D, mask, plain, (64, 64), lam, threads=1).converged


def test_the_scene_warm_up_converges_too_without_silencing_warnings():
    """``warm_dn_blocks`` no longer wraps its solve in ``warnings.catch_warnings`` (which, in
    the warm-up's thread, races the worker's tasks): given the warm-up's solver it converges,
    so with convergence warnings as errors it passes; given the run's own 3 iterations, not."""
    import warnings

    import pytest

    from cloudcore import ConvergenceWarning

    solver = SolverConfig(scope="scene")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warmup.warm_dn_blocks(warmup.brief_solver(solver))
        with pytest.raises(ConvergenceWarning):
            warmup.warm_dn_blocks(solver.model_copy(update={"max_iter": 3}))
