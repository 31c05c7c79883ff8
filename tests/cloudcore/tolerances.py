"""Tolerances of the tests that compare two code paths, derived from the arithmetic.

A block-wise solve (:mod:`cloudcore.scene`) and :func:`cloudcore.decompose` of the whole matrix
run the same per-entry code (the numba kernels) and differ only in the order of their float64
sums over pixels: the n × n Gram matrices and ‖Z‖². Their results differ by two things, each
bounded here in absolute units of D (observations divided by the maximum DN, so in [0, 1]):

1. **Rounding in the iterations** (:func:`alm_bound`). A Gram entry is a sum of d products; two
   summation orders of it differ by at most 2γ_d of the sum of their magnitudes, γ_m = m·u /
   (1 − m·u) the bound on a sum of m terms in any order (:func:`sum_bound`; Higham, *Accuracy
   and Stability of Numerical Algorithms*, §4.2). That moves the SVT weights, and so each
   stored entry, by 2γ_d relative: for float64 this is the difference; in float32 it is far
   below an ulp, and the stored entries differ only where the float64 value lies within that
   of a rounding boundary, by one ulp (≤ 2u for the values below 2 that L, C, N, S hold). The
   ALM's steps are proximal maps (the SVT, the shrinkages), which do not amplify a difference,
   so after K iterations two paths differ by at most K·(2u + 2γ_d) per entry. Measured: the
   same bits, or 1 to 2 ulps (5.96e-8 to 1.04e-7 for RPCA) whatever the OpenBLAS kernel.
2. **The refit of partly observed dates** (:func:`refit_bound`). Its IRLS
   (:func:`cloudcore.refit.fit_column`) treats residuals below :data:`cloudcore.refit.IRLS_FLOOR`
   ε = 1e-6 as zero, so it resolves a date's ground only to a few ε; and it stops after
   :data:`cloudcore.refit.IRLS_MAX_ITER` steps whether it has settled or not. Where it has not,
   the 1e-16 differences of its float64 basis (the two paths' Gram sums and matrix products,
   rounded by whichever BLAS kernel the CPU gets) grow to the distance the iterate still has
   to go, and two paths end up to twice that apart. That distance is a property of the data and
   of ε, not of the machine: with the NumPy IRLS capped at 200 steps it was at most 2ε on the
   test series (the fit of date 5 of the aATM-shadow case, 1.95e-6 from where it settles at
   step 228), and the layers differed by up to 4.1ε (OpenBLAS SkylakeX kernels) and 1.4ε
   (Haswell, Prescott), 2.9ε over 30 random last-bit perturbations of that fit's basis. The
   compiled IRLS (2026-11-28) runs to 1000 steps, every fit of the test series settles, and
   the largest difference is 2.1ε. The bound is 10ε.

Not covered by 10ε (found 2026-11-27, docs/PERFORMANCE.md "Exact cuts"): where no date is
observed everywhere, a date's quantile q is counted over the other dates' ground after the
earlier dates were refitted, so the last bits of one fit can carry one entry of L across D and
move the next date's q by one count, and its fit by up to ~16ε. That needs a fit that has not
settled: the compiled IRLS capped at 200 steps did cross such an entry on the test series
(17ε, 15.6ε on 2026-11-28), the NumPy IRLS at 200 steps happened not to, and at 1000 steps no
fit of the test series is left unsettled. On real series 2-3 % of the fits are still moving
at 1000 steps (18-31 % at 200; ``benchmarks/irls.py``), so two paths can still differ by such
a count there.
Counting every q from the ALM's ground first removes this (2.1ε) but fills worse (r +1.8 % on
a 2560² series), so it is not in.

This is why a bound relative to a layer's own norm failed on some CPUs: the haze N and the
shadow S are small layers, and the refit's ~ε differences are a large share of their norm
whichever kernel rounds them.

What a wrong result gives (measured on the aATM-shadow case): one block's Gram matrix rounded
to float32 moves the layers by up to 2.1e-5 (the iterations alone: 3e-6 in float32, 3.6e-7 in
float64, against bounds of 2.4e-6 and 8e-11); a block-wise refit left out, by 0.14 (a quarter
of the ground) on the short date's unseen strip. A wrong sample of pixels for the refit moves
the fit by a few ε only (it is a statistical fit: another sample of the same pixels fits as
well), so the sample is checked exactly, in ``test_scene_refit.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cloudcore.refit import IRLS_FLOOR

#: Unit roundoff of float32 and float64: the largest relative error of one rounding.
U32, U64 = 2.0**-24, 2.0**-53
#: How many IRLS floors apart two fits of the same date may end (see the module's docstring:
#: measured 4.1ε with the fits capped at 200 steps, 2.1ε now that they settle; the bound keeps
#: a margin of 2.5x over the former for data and kernels not measured).
REFIT_SPREAD = 10


def unit_roundoff(dtype: Any) -> float:
    """u of ``dtype`` (float32 or float64)."""
    return U32 if np.dtype(dtype) == np.float32 else U64


def sum_bound(terms: int, dtype: Any = np.float32) -> float:
    """γ_m: the relative error bound of a sum of ``terms`` numbers in ``dtype``, in any order.

    Relative to the sum of the terms' magnitudes (Higham §4.2): m·u / (1 − m·u).
    """
    mu = terms * unit_roundoff(dtype)
    return mu / (1.0 - mu)


def float32_sum_bound(terms: int) -> float:
    """:func:`sum_bound` in float32."""
    return sum_bound(terms, np.float32)


def alm_bound(iterations: int, pixels: int, dtype: Any) -> float:
    """Per-entry bound between two runs of the ALM that differ only in the order of their
    float64 sums over ``pixels`` (the module's docstring, item 1): K·(2u + 2γ_d)."""
    return iterations * (2.0 * unit_roundoff(dtype) + 2.0 * sum_bound(pixels, np.float64))


def refit_bound() -> float:
    """Per-entry bound between two refits of the same partly observed dates from bases that
    differ in their last bits (the module's docstring, item 2): 10·ε."""
    return REFIT_SPREAD * IRLS_FLOOR


def scene_bound(iterations: int, pixels: int, dtype: Any, masked: bool = True) -> float:
    """Per-entry bound between a block-wise solve and decompose of the whole matrix: the
    iterations' rounding, plus the refit's spread where a mask leaves dates partly observed."""
    return alm_bound(iterations, pixels, dtype) + (refit_bound() if masked else 0.0)
