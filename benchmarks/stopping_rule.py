"""What a stopping rule tied to the written DN could save (issue #45, item 1).

The solve (aATM, λ̂*, float32, one thread: the default when this was measured) of one tile halo
is stopped after each iteration k (``max_iter=k``: the solver is deterministic, so this is
iteration k of the full solve) and its written values, DN = round(clip(L, 0, 1) · max_dn), are
compared with those of the solve run to cloudcore's tolerance (relative residual 1e-7, floored
at 1e-6 in float32), as a
uint16 COG holds them (:func:`pipeline.outputs.products.encode_clear`):
the share of DN identical, the largest DN difference, and max |L_k − L_{k−1}| in DN. A rule
that stops at iteration k saves (final − k) iterations; the issue's bar is ≥ 99.9 % of the DN
identical and none more than 1 DN apart. Each k is a fresh solve of k iterations, so the
script runs K(K + 1)/2 iterations for K in the default solve (about 14× one solve at K = 23).

The tile is the paper's simulation of the demo image (as ``benchmarks/default_cost.py``), or
with ``--site`` a real-cloud benchmark site (every band, its reflectance scaled by 10000).

Usage::

    python benchmarks/stopping_rule.py [--size 1280] [--dates 7] [--max-dn 1023]
    python benchmarks/stopping_rule.py --site s2_nrt_romania_10m --max-dn 10000
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import cloudcore
from pipeline.outputs.products import encode_clear
from pipeline.solve.tile import resolve_lambda


def _matrices(args: argparse.Namespace) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(D, observed) of every band to solve."""
    if args.site is None:
        from cloudcore.simulate import paper_case
        from pipeline.inputs.synthetic import load_demo_truth

        case = paper_case(
            load_demo_truth(), args.dates, size=args.size, rng=np.random.default_rng(0)
        )
        return [(case.D.astype(np.float32), None)]
    from cloudlab.sites import load_site

    series = load_site(args.site).series
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    for band in range(len(series.bands)):
        D, observed = series.matrix(band)
        out.append((np.where(observed, D, 0.0).astype(np.float32), observed))
    return out


def _written(L: np.ndarray, max_dn: float) -> np.ndarray:
    """The DN a uint16 COG holds for these values (:func:`encode_clear`), as int32 to subtract."""
    return encode_clear(L.astype(np.float32), "uint16", max_dn).astype(np.int32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1280, help="simulated tile halo side, px")
    parser.add_argument("--dates", type=int, default=7)
    parser.add_argument("--site", default=None, help="a real-cloud benchmark site instead")
    parser.add_argument("--max-dn", type=float, default=1023.0, help="DN of 1.0 (GF-4: 1023)")
    args = parser.parse_args()
    solves = []
    for D, observed in _matrices(args):
        lam = resolve_lambda("star", *D.shape)
        final = cloudcore.decompose(D, "aatm", lam=lam, mask=observed, threads=1)
        solves.append((D, observed, lam, final))
    iterations = max(f.iterations for *_, f in solves)
    print(f"default tolerance: {[f.iterations for *_, f in solves]} iterations")
    print("| k | max abs(L_k - L_k-1), DN | DN identical | largest DN difference |")
    print("|---|---|---|---|")
    previous: list[np.ndarray | None] = [None] * len(solves)
    for k in range(1, iterations + 1):
        same = total = 0
        worst = step = 0.0
        for i, (D, observed, lam, final) in enumerate(solves):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cloudcore.ConvergenceWarning)
                L = cloudcore.decompose(D, "aatm", lam=lam, mask=observed, threads=1, max_iter=k).L
            where = np.ones(L.shape, bool) if observed is None else np.isfinite(final.L)
            diff = np.abs(_written(L, args.max_dn) - _written(final.L, args.max_dn))[where]
            same += int((diff == 0).sum())
            total += diff.size
            worst = max(worst, float(diff.max()))
            if previous[i] is not None:
                change = np.abs(L - previous[i])[where]
                step = max(step, float(change.max()) * args.max_dn)
            previous[i] = L
        print(f"| {k} | {step:.3f} | {100 * same / total:.3f} % | {worst:.0f} |")


if __name__ == "__main__":
    main()
