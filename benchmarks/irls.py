"""The refit's IRLS compiled (issue #45): every date fit the default solve makes, replayed.

:func:`cloudcore.refit.fit_column` fits a partly observed date's coefficients by IRLS on at
most 16 384 of its observed pixels. It was NumPy (six (rows × k) temporaries a step, at most
200 steps); it is now one compiled pass over the rows a step, to at most
:data:`cloudcore.refit.IRLS_MAX_ITER` steps. This script records the inputs of every fit the
default solve makes (the first solve's ground, the quantile, the start) and replays each with
the NumPy IRLS it replaced (:func:`numpy_irls`, the former code) and with the compiled one at
the old cap (200) and at today's, and reports per source: fits, steps (median, largest, share
that took 200 or more, share stopped by the run's own cap), seconds of each, and how far each
fit's ground (U c, in units of D) is from NumPy's (the largest over the sampled rows, in DN of
1023 and in IRLS floors).

Sources: every site of the real-cloud benchmark (its whole series, every band;
:func:`cloudlab.sitescore.whole_series`) and, with ``--staged``, the tiles of a pipeline run's
staged input (``work/input.zarr``), each band's halos cut as the pipeline cuts them (1024 px
cores, 128 px overlap) and solved as a tile is (:func:`pipeline.solve.tile.solve_matrix`).

Usage::

    python benchmarks/irls.py [--staged RUN/work/input.zarr] [--bands 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import cloudcore.refit as refit
from cloudlab.sites import site_names
from cloudlab.sitescore import whole_series
from pipeline.config import SolverConfig
from pipeline.grid.tiling import TileGrid
from pipeline.solve.tile import solve_matrix, solver_lambda, tile_matrix

#: The former cap of the NumPy IRLS.
OLD_STEPS = 200
#: One output step of a 10-bit product, in units of D.
DN = 1.0 / 1023


def numpy_irls(U: np.ndarray, y: np.ndarray, q: float, steps: int = OLD_STEPS) -> tuple[Any, int]:
    """The NumPy IRLS that :func:`cloudcore.refit.fit_column` ran until this change (the same
    arithmetic: BLAS products, ``lstsq`` on the weighted normal equations); returns the
    coefficients and the steps taken."""
    c = np.linalg.lstsq(U, y, rcond=None)[0]
    taken = 0
    for taken in range(1, steps + 1):  # noqa: B007 - the count is returned
        r = y - U @ c
        w = np.where(r > 0, q, 1.0 - q) / np.maximum(np.abs(r), refit.IRLS_FLOOR)
        Uw = U * w[:, None]
        c_next = np.linalg.lstsq(Uw.T @ U, Uw.T @ y, rcond=None)[0]
        step = float(np.abs(c_next - c).max())
        c = c_next
        if step <= refit.IRLS_RTOL * max(float(np.abs(c).max()), 1e-300):
            break
    return c, taken


@contextmanager
def recorded(fits: list[tuple[np.ndarray, np.ndarray, float]]) -> Iterator[None]:
    """Record (U, y, q) of every fit made inside the block (the solve itself is unchanged)."""
    irls_fit = refit.irls_fit  # fit_column looks it up when called

    def recording(U: np.ndarray, y: np.ndarray, q: float, *rest: Any) -> Any:
        fits.append((np.array(U, dtype=np.float64), np.array(y, dtype=np.float64), q))
        return irls_fit(U, y, q, *rest)

    refit.irls_fit = recording
    try:
        yield
    finally:
        refit.irls_fit = irls_fit


def site_fits() -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The fits of the default solve of every real-cloud site's whole series, every band."""
    solver = SolverConfig()
    fits: list[tuple[np.ndarray, np.ndarray, float]] = []
    with recorded(fits):
        for name in site_names():
            series = whole_series(name)
            d, n = series.observed.shape
            lam = solver_lambda(solver, d, n)
            for band in series.D:
                x = np.where(series.observed, band, 0.0).astype(np.float32)
                solve_matrix(x, series.observed, solver, series.frame, lam, threads=1)
    return fits


def staged_fits(store: str, bands: int) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The fits of the default solve of every tile halo of the first ``bands`` bands of a
    pipeline run's staged input."""
    import zarr

    observed = zarr.open_array(store=store, path="observed", mode="r")
    _, _, height, width = observed.shape
    solver = SolverConfig()
    fits: list[tuple[np.ndarray, np.ndarray, float]] = []
    with recorded(fits):
        for band in range(bands):
            for tile in TileGrid(height, width, 1024, 128):
                rows, cols = tile.halo.slices
                D, mask, kept = tile_matrix(np.asarray(observed[:, band, rows, cols]), "float32")
                if kept.size < 2:
                    continue
                lam = solver_lambda(solver, D.shape[0], kept.size)
                solve_matrix(D, mask, solver, (tile.halo.height, tile.halo.width), lam, 1)
    return fits


def replay(label: str, fits: list[tuple[np.ndarray, np.ndarray, float]]) -> None:
    """Replay ``fits`` with each IRLS and print one table row each."""
    cap = refit.IRLS_MAX_ITER
    runs: dict[str, tuple[int, Callable[[np.ndarray, np.ndarray, float], tuple[Any, int]]]] = {
        f"NumPy, {OLD_STEPS} steps (before)": (OLD_STEPS, numpy_irls),
        f"compiled, {OLD_STEPS} steps": (
            OLD_STEPS,
            lambda U, y, q: refit.irls_fit(U, y, q, OLD_STEPS),
        ),
        f"compiled, {cap} steps (now)": (cap, lambda U, y, q: refit.irls_fit(U, y, q, cap)),
    }
    reference = [numpy_irls(U, y, q)[0] for U, y, q in fits]
    for name, (most, run) in runs.items():
        steps, far = [], 0.0
        started = time.perf_counter()
        results = [run(U, y, q) for U, y, q in fits]
        seconds = time.perf_counter() - started
        for (U, _, _), (c, taken), ref in zip(fits, results, reference, strict=True):
            steps.append(taken)
            far = max(far, float(np.abs(U @ (c - ref)).max()))
        s = np.array(steps)
        print(
            f"| {label} | {name} | {len(fits)} | {np.median(s):.0f} | {s.max()} "
            f"| {np.mean(s >= OLD_STEPS):.1%} | {np.mean(s >= most):.1%} | {seconds:.2f} "
            f"| {far / DN:.2e} "
            f"| {far / refit.IRLS_FLOOR:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--staged", help="a pipeline run's work/input.zarr")
    parser.add_argument("--bands", type=int, default=1, help="bands of --staged to solve")
    args = parser.parse_args()
    print(
        "| source | IRLS | fits | steps (median) | steps (most) | 200 or more | stopped by its cap "
        "| seconds "
        "| largest ground change (DN) | (IRLS floors) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    replay("real-cloud sites", site_fits())
    if args.staged:
        replay(f"staged tiles ({args.bands} band)", staged_fits(args.staged, args.bands))


if __name__ == "__main__":
    main()
