"""The block-wise (scene-scope) solver against decompose of the whole matrix, in memory.

Every comparison is entry by entry, in units of D, to a bound derived in
``tests/cloudcore/tolerances.py``: the iterations agree to their float32 (float64) rounding,
the refit of partly observed dates to its IRLS's resolution.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import cloudcore
from cloudcore import ConvergenceWarning
from cloudcore.scene import (
    Block,
    BlockGroup,
    LocalShards,
    SceneOutcome,
    bytes_per_entry,
    solve_blocks,
)
from cloudcore.simulate import SimulatedSeries, paper_case
from tests.cloudcore.tolerances import alm_bound, scene_bound, sum_bound

N_DATES, SIZE = 7, 128


@pytest.fixture(scope="module")
def footprint_series(tyrol_rgb: np.ndarray) -> np.ndarray:
    """(n, h, w) float32 with NaN: reference clouds, one date whose footprint ends at 40 % of
    the width, a corner seen on no date, and 1 % of entries missing at random."""
    case: SimulatedSeries = paper_case(tyrol_rgb, N_DATES, size=SIZE, rng=np.random.default_rng(4))
    obs = case.observed.astype(np.float32)
    obs[3, :, int(0.4 * SIZE) :] = np.nan
    obs[:, :6, :9] = np.nan
    obs[np.random.default_rng(5).random(obs.shape) < 0.01] = np.nan
    return obs


def _tiles(h: int, w: int, th: int, tw: int) -> list[tuple[slice, slice]]:
    return [
        (slice(r, min(r + th, h)), slice(c, min(c + tw, w)))
        for r in range(0, h, th)
        for c in range(0, w, tw)
    ]


def _solve_tiled(
    stack: np.ndarray, tile: tuple[int, int], groups: int, **kwargs: object
) -> tuple[SceneOutcome, list[np.ndarray]]:
    """Solve ``stack`` (n, h, w) block-wise in ``tile``-sized blocks spread over ``groups``
    groups; returns the outcome and the (d, n) ground, C and N of the whole matrix."""
    n, h, w = stack.shape
    windows = _tiles(h, w, *tile)
    dtype = kwargs.pop("dtype", stack.dtype)
    max_dn = kwargs.pop("max_dn", None)
    blocks = [
        Block(stack[:, rows, cols], dtype, origin=(rows.start, cols.start), max_dn=max_dn)  # type: ignore[arg-type]
        for rows, cols in windows
    ]
    split = np.array_split(np.arange(len(blocks)), groups)
    shards = LocalShards([BlockGroup([blocks[i] for i in part]) for part in split])
    outcome = solve_blocks(shards, d=h * w, n=n, dtype=dtype, **kwargs)  # type: ignore[arg-type]
    shadow = kwargs.get("method") in cloudcore.SHADOW_METHODS
    layers = [np.full((n, h, w), -1.0, dtype) for _ in range(4 if shadow else 3)]
    for (rows, cols), block in zip(windows, blocks, strict=True):
        for k, x in enumerate(block.layers(shadow)):
            layers[k][:, rows, cols] = x
    return outcome, [x.reshape(n, -1).T for x in layers]


def _whole(stack: np.ndarray, **kwargs: Any) -> cloudcore.Decomposition:
    D = stack.reshape(stack.shape[0], -1).T
    return cloudcore.decompose(D, mask=np.isfinite(D), **kwargs)


def _assert_same(got: list[np.ndarray], ref: cloudcore.Decomposition, bound: float) -> None:
    """Every layer (ground, C, N and S) NaN exactly where decompose's is, and within ``bound``
    of it entry by entry (units of D), which also bounds each layer's RMS difference."""
    expected = (ref.ground, ref.C, ref.N) + ((ref.S,) if ref.S is not None else ())
    for x, y in zip(got, expected, strict=True):
        assert np.array_equal(np.isnan(x), np.isnan(y))  # NaN exactly where decompose has it
        m = ~np.isnan(y)
        err = float(np.abs(x[m] - y[m]).max(initial=0.0))
        assert err <= bound, (err, bound)
        rms = float(np.linalg.norm(x[m] - y[m])) / np.sqrt(max(int(m.sum()), 1))
        assert rms <= bound, (rms, bound)


def _bound(stack: np.ndarray, ref: cloudcore.Decomposition, masked: bool = True) -> float:
    """:func:`tests.cloudcore.tolerances.scene_bound` of this solve: its iterations, its pixels
    and its precision."""
    return scene_bound(ref.iterations, stack[0].size, stack.dtype, masked)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_equal_whole_band_decompose(footprint_series: np.ndarray, dtype: type) -> None:
    stack: np.ndarray = footprint_series.astype(dtype)
    lam = cloudcore.lambda_star(SIZE * SIZE, N_DATES)
    ref = _whole(stack, lam=lam)
    outcome, got = _solve_tiled(stack, (48, 40), groups=3, lam=lam)
    assert outcome.iterations == ref.iterations and outcome.converged == ref.converged
    # ‖Z‖_F/‖D‖_F: decompose sums ‖D‖² in the solver's precision (one BLAS dot over the d·n
    # entries, relative error ≤ γ_dn: 6.8e-3 in float32, 1.3e-11 in float64), the blocks in
    # float64; ‖Z‖ differs only by the ulps the last iterates differ by (measured ≤ 2e-7 of it).
    # A wrong residual (‖Z‖², another norm, a stale Z) is off by orders of magnitude.
    assert outcome.residual == pytest.approx(ref.residual, rel=sum_bound(stack.size, dtype))
    assert outcome.lam == ref.lam
    _assert_same(got, ref, _bound(stack, ref))
    # The short date's unseen strip is filled (the refit of partly observed dates), not NaN.
    assert np.isfinite(got[0].reshape(SIZE, SIZE, N_DATES)[60:, 100:, 3]).all()


def test_blocks_take_the_growth_of_mu_as_decompose_does(footprint_series: np.ndarray) -> None:
    """``rho`` reaches the block-wise schedule: the same iterations and layers as decompose's
    with the same ρ, and fewer than with the paper's 1.5."""
    lam = cloudcore.lambda_star(SIZE * SIZE, N_DATES)
    ref = _whole(footprint_series, lam=lam, rho=2.0)
    outcome, got = _solve_tiled(footprint_series, (48, 40), groups=3, lam=lam, rho=2.0)
    assert outcome.iterations == ref.iterations < _whole(footprint_series, lam=lam).iterations
    _assert_same(got, ref, _bound(footprint_series, ref))


@pytest.mark.parametrize("method", ["rpca", "nnrpca", "aatm-shadow"])
def test_other_alm_methods_and_one_tile_per_group(
    footprint_series: np.ndarray, method: str
) -> None:
    ref = _whole(footprint_series, method=method)
    outcome, got = _solve_tiled(footprint_series, (64, 64), groups=4, method=method)
    assert outcome.iterations == ref.iterations
    # The shadow model's fit of date 5 settles at step 228 (the NumPy IRLS stopped it at 200,
    # and its layers differed by up to 4.1e-6; now 2.1e-6: the refit's spread,
    # tests/cloudcore/tolerances.py), a large share of the small haze N's own norm.
    _assert_same(got, ref, _bound(footprint_series, ref))


@pytest.mark.parametrize(
    ("method", "dtype"),
    [("aatm", np.float32), ("aatm", np.float64), ("rpca", np.float32), ("aatm-shadow", np.float32)],
)
def test_iterations_agree_to_their_rounding(
    footprint_series: np.ndarray, method: str, dtype: type
) -> None:
    """Without the refit (``refit=False`` in both) the layers are the ALM's own, and agree to
    the iterations' rounding: in float64 to 8e-11 (a float32 Gram matrix in one block is off by
    3.6e-7), in float32 to a few ulps per iteration (measured: 0 to 2 ulps)."""
    stack: np.ndarray = footprint_series.astype(dtype)
    ref = _whole(stack, method=method, refit=False)
    outcome, got = _solve_tiled(stack, (48, 40), groups=3, method=method, refit=False)
    assert outcome.iterations == ref.iterations and outcome.refit_rounds == 0
    _assert_same(got, ref, alm_bound(ref.iterations, stack[0].size, dtype))
    # The refit moves the short date's unseen strip by 0.14 (a quarter of the ground): a
    # block-wise solve that skipped it would be far outside the bounds of the other tests.
    refitted = _whole(stack, method=method)
    strip = (slice(60, None), slice(100, None), 3)
    change = np.abs(refitted.ground - ref.ground).reshape(SIZE, SIZE, N_DATES)[strip]
    assert float(change.mean()) > 100 * scene_bound(ref.iterations, stack[0].size, dtype)


def test_unmasked_matrix(footprint_series: np.ndarray) -> None:
    stack = np.nan_to_num(footprint_series, nan=0.5)
    ref = _whole(stack, beta=2.0)
    outcome, got = _solve_tiled(stack, (50, 128), groups=2, beta=2.0)
    assert outcome.iterations == ref.iterations
    _assert_same(got, ref, _bound(stack, ref, masked=False))  # no mask: nothing to refit


def test_empty_tiles_and_a_date_seen_nowhere(footprint_series: np.ndarray) -> None:
    stack = footprint_series.copy()
    stack[:, :64, :64] = np.nan  # one whole tile observed on no date
    stack[5] = np.nan  # a date observed nowhere: NaN everywhere, as decompose returns it
    ref = _whole(stack)
    outcome, got = _solve_tiled(stack, (64, 64), groups=2)
    assert outcome.iterations == ref.iterations
    _assert_same(got, ref, _bound(stack, ref))
    assert np.isnan(got[0][:, 5]).all()


def test_stopped_by_max_iter_like_decompose(footprint_series: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = _whole(footprint_series, max_iter=4)
    with pytest.warns(ConvergenceWarning):
        outcome, got = _solve_tiled(footprint_series, (64, 64), groups=2, max_iter=4)
    assert outcome.iterations == 4 and not outcome.converged
    _assert_same(got, ref, _bound(footprint_series, ref))


def test_warn_false_stops_at_max_iter_without_a_warning(footprint_series: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome, _ = _solve_tiled(footprint_series, (64, 64), groups=2, max_iter=4, warn=False)
    assert outcome.iterations == 4 and not outcome.converged


def test_all_zero_matrix_is_the_defined_answer() -> None:
    stack = np.zeros((3, 20, 20), np.float32)
    outcome, got = _solve_tiled(stack, (8, 8), groups=2)
    assert outcome.iterations == 0 and outcome.converged
    assert all(not np.any(x) for x in got)


def test_state_is_25_bytes_per_entry_in_float32(footprint_series: np.ndarray) -> None:
    assert bytes_per_entry("float32") == 25 and bytes_per_entry("float64") == 49
    block = Block(footprint_series[:, :64, :64])
    group = BlockGroup([block])
    with pytest.warns(ConvergenceWarning):
        solve_blocks(LocalShards([group]), d=64 * 64, n=N_DATES, max_iter=1)
    # After the iterations C_next is dropped: D, L, C, N, Y and the mask remain.
    assert block.nbytes == N_DATES * 64 * 64 * (5 * 4 + 1)


def _as_10bit(stack: np.ndarray) -> np.ndarray:
    """``stack`` rounded to 10-bit DN and staged as ``pipeline.stage.values`` does it: float32(DN)
    / float32(1023), NaN kept."""
    dn = np.rint(np.nan_to_num(stack) * 1023).astype(np.uint16)
    return np.where(np.isnan(stack), np.nan, dn.astype(np.float32) / np.float32(1023))


@pytest.mark.parametrize("method", ["aatm", "rpca", "aatm-shadow"])
def test_blocks_holding_dn_solve_bit_for_bit_as_blocks_holding_floats(
    footprint_series: np.ndarray, method: str
) -> None:
    """D held as 16-bit DN (max_dn) is read by the kernels, the refit and the layers as the
    float32 values it came from: the same iterations and the same bits, partly observed
    dates and a corner seen on no date included."""
    stack = _as_10bit(footprint_series)
    held = [Block(stack[:, r, c], max_dn=1023.0) for r, c in _tiles(*stack.shape[1:], 48, 40)]
    assert all(b.D.dtype == np.uint16 for b in held if not b.empty)  # masked and partial too
    kwargs: dict[str, Any] = {"method": method}
    floats, got_floats = _solve_tiled(stack, (48, 40), 2, **kwargs)
    dn, got_dn = _solve_tiled(stack, (48, 40), 2, max_dn=1023.0, **kwargs)
    assert dn.iterations == floats.iterations
    for a, b in zip(got_floats, got_dn, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_dn_state_is_23_bytes_per_entry_and_only_where_the_values_are_dn(
    footprint_series: np.ndarray,
) -> None:
    assert bytes_per_entry("float32", dn=True) == 23
    block = Block(_as_10bit(footprint_series[:, :64, :64]), max_dn=1023.0)
    assert block.D.dtype == np.uint16
    with pytest.warns(ConvergenceWarning):
        solve_blocks(LocalShards([BlockGroup([block])]), d=64 * 64, n=N_DATES, max_iter=1)
    assert block.nbytes == N_DATES * 64 * 64 * (4 * 4 + 2 + 1)
    # Values that are no DN quotient (the simulation's, a resampled or calibrated one's), and
    # a -0.0 (the float path keeps its sign), stay floats.
    assert Block(footprint_series[:, :64, :64], max_dn=1023.0).D.dtype == np.float32
    signed = _as_10bit(footprint_series[:, :8, :8])
    signed[0, 0, 0] = -0.0
    assert Block(signed, max_dn=1023.0).D.dtype == np.float32
    # So does a float64 solve.
    assert Block(_as_10bit(footprint_series), "float64", max_dn=1023.0).D.dtype == np.float64


def test_rejects_atm_and_values_outside_unit_interval() -> None:
    block = Block(np.full((3, 4, 4), 0.5))
    with pytest.raises(ValueError, match="no block-wise solver"):
        solve_blocks(LocalShards([BlockGroup([block])]), d=16, n=3, method="atm")
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        Block(np.full((3, 4, 4), 2.0))
