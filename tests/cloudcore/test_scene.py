"""The block-wise (scene-scope) solver against decompose of the whole matrix, in memory."""

from __future__ import annotations

import warnings

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
    blocks = [
        Block(stack[:, rows, cols], dtype, origin=(rows.start, cols.start))  # type: ignore[arg-type]
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


def _whole(stack: np.ndarray, **kwargs: object) -> cloudcore.Decomposition:
    D = stack.reshape(stack.shape[0], -1).T
    return cloudcore.decompose(D, mask=np.isfinite(D), **kwargs)  # type: ignore[arg-type]


def _assert_same(
    got: list[np.ndarray],
    ref: cloudcore.Decomposition,
    rtol: float,
    haze_to_ground: bool = False,
) -> None:
    """Each layer within ``rtol`` of decompose's, relative to its own norm; with
    ``haze_to_ground`` the haze N relative to the ground's norm instead (see its caller)."""
    expected = (ref.ground, ref.C, ref.N) + ((ref.S,) if ref.S is not None else ())
    ground = float(np.linalg.norm(ref.ground[~np.isnan(ref.ground)]))
    for k, (x, y) in enumerate(zip(got, expected, strict=True)):
        assert np.array_equal(np.isnan(x), np.isnan(y))  # NaN exactly where decompose has it
        m = ~np.isnan(y)
        scale = ground if haze_to_ground and k == 2 else float(np.linalg.norm(y[m]))
        err = float(np.linalg.norm(x[m] - y[m])) / max(scale, 1e-30)
        assert err <= rtol, err


# float64 is held to the 1e-5 too: the refit's pinball IRLS (cloudcore.refit) stops at
# 200 steps without always settling, so the summation order of its basis moves the tiny N of a
# refitted date by ~4e-7 (5.6e-6 relative on numpy 2.4 / numba 0.68).
@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-5)])
def test_blocks_equal_whole_band_decompose(
    footprint_series: np.ndarray, dtype: type, rtol: float
) -> None:
    stack: np.ndarray = footprint_series.astype(dtype)
    lam = cloudcore.lambda_star(SIZE * SIZE, N_DATES)
    ref = _whole(stack, lam=lam)
    outcome, got = _solve_tiled(stack, (48, 40), groups=3, lam=lam)
    assert outcome.iterations == ref.iterations and outcome.converged == ref.converged
    assert outcome.residual == pytest.approx(ref.residual, rel=1e-3)
    assert outcome.lam == ref.lam
    _assert_same(got, ref, rtol)
    # The short date's unseen strip is filled (the refit of partly observed dates), not NaN.
    assert np.isfinite(got[0].reshape(SIZE, SIZE, N_DATES)[60:, 100:, 3]).all()


@pytest.mark.parametrize("method", ["rpca", "nnrpca", "aatm-shadow"])
def test_other_alm_methods_and_one_tile_per_group(
    footprint_series: np.ndarray, method: str
) -> None:
    ref = _whole(footprint_series, method=method)
    outcome, got = _solve_tiled(footprint_series, (64, 64), groups=4, method=method)
    assert outcome.iterations == ref.iterations
    shadow = method == "aatm-shadow"
    # The shadow model's N is 1.7 % of L in norm, so float32 rounding at the ground's scale is
    # a large part of N's own norm, and how large depends on the BLAS kernel OpenBLAS picks for
    # the CPU: |ΔN| ≤ 1.3e-6 (1.4e-5 of N) with its Haswell kernels, ≤ 3.8e-6 (3.9e-5 of N,
    # 6.7e-7 of L) with those it picks on an AMD EPYC Zen 4 (OPENBLAS_CORETYPE=Haswell there
    # gives the former); L, C and S agree to 5e-6 with either. So N is held to the ground's
    # scale, and to 1e-5 (a hundredth of a 10-bit DN) entry by entry.
    _assert_same(got, ref, 1e-5, haze_to_ground=shadow)
    if shadow:
        seen = ~np.isnan(ref.N)
        assert float(np.abs(got[2][seen] - ref.N[seen]).max()) <= 1e-5


def test_unmasked_matrix(footprint_series: np.ndarray) -> None:
    stack = np.nan_to_num(footprint_series, nan=0.5)
    ref = _whole(stack, beta=2.0)
    outcome, got = _solve_tiled(stack, (50, 128), groups=2, beta=2.0)
    assert outcome.iterations == ref.iterations
    _assert_same(got, ref, 1e-5)


def test_empty_tiles_and_a_date_seen_nowhere(footprint_series: np.ndarray) -> None:
    stack = footprint_series.copy()
    stack[:, :64, :64] = np.nan  # one whole tile observed on no date
    stack[5] = np.nan  # a date observed nowhere: NaN everywhere, as decompose returns it
    ref = _whole(stack)
    outcome, got = _solve_tiled(stack, (64, 64), groups=2)
    assert outcome.iterations == ref.iterations
    _assert_same(got, ref, 1e-5)
    assert np.isnan(got[0][:, 5]).all()


def test_stopped_by_max_iter_like_decompose(footprint_series: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = _whole(footprint_series, max_iter=4)
    with pytest.warns(ConvergenceWarning):
        outcome, got = _solve_tiled(footprint_series, (64, 64), groups=2, max_iter=4)
    assert outcome.iterations == 4 and not outcome.converged
    _assert_same(got, ref, 1e-5)


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


def test_rejects_atm_and_values_outside_unit_interval() -> None:
    block = Block(np.full((3, 4, 4), 0.5))
    with pytest.raises(ValueError, match="no block-wise solver"):
        solve_blocks(LocalShards([BlockGroup([block])]), d=16, n=3, method="atm")
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        Block(np.full((3, 4, 4), 2.0))
