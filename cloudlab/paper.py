"""The paper's figures: the numbers it reports, and the names and colours our tables use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ALPHA", "COLOURS", "LABELS", "METHOD_ORDER", "PAPER", "label"]

#: Significance level of the paper's one-sided t-tests.
ALPHA = 1e-5

LABELS = {
    "aatm": "aATM",
    "rpca": "RPCA",
    "nnrpca": "NN-RPCA",
    "atm": "ATM",
    "median": "temporal median (= geometric median: one band)",
    "min": "temporal minimum",
    "cloudy": "cloudy input",
}
METHOD_ORDER = ("aatm", "atm", "rpca", "nnrpca")
COLOURS = {"aatm": "tab:green", "atm": "tab:blue", "rpca": "tab:orange", "nnrpca": "tab:purple"}


def label(method: str, mc: bool = False) -> str:
    """Display name of a method or baseline, ``+MC`` appended for the MC post-step.

    Parameters
    ----------
    method
        ``aatm``, ``rpca``, ``median``, ...
    mc
        Whether the row is with the MC post-step.

    Returns
    -------
    str
    """
    return LABELS.get(method, method) + ("+MC" if mc else "")


@dataclass(frozen=True)
class _Paper:
    """Numbers the paper reports (tyrol-w1, 1024², docs/CONVENTIONS.md §5 and its Tables)."""

    # λ·√d of the columns of Tables mean/std (λ ×1e-3: 0.6162 … 1.2874, √d = 1024).
    lam_sqrt_d: tuple[float, ...] = (
        0.6310,
        0.6918,
        0.7586,
        0.8318,
        0.9120,
        1.0,
        1.0965,
        1.2023,
        1.3183,
    )
    mean_r_n7: Any = None
    std_r_n7: Any = None
    mean_time_n7: Any = None
    ttest: Any = None
    fit: tuple[float, float] = (-0.5682, 1.0747)


PAPER = _Paper(
    mean_r_n7={
        ("aatm", True): (0.2436, 0.1392, 0.1440, 0.1506, 0.1596, 0.1712, 0.1860, 0.1990, 0.2145),
        ("atm", True): (0.4262, 0.2358, 0.1867, 0.2152, 0.2618, 0.3118, 0.3567, 0.3847, 0.4054),
        ("rpca", True): (0.2543, 0.1714, 0.1771, 0.1826, 0.1896, 0.1958, 0.2058, 0.2111, 0.2217),
        ("aatm", False): (0.1106, 0.0941, 0.1033, 0.1172, 0.1374, 0.1625, 0.1928, 0.2203, 0.2504),
        ("atm", False): (0.4063, 0.2985, 0.2075, 0.2304, 0.2820, 0.3297, 0.3687, 0.3908, 0.4078),
        ("rpca", False): (0.1700, 0.1652, 0.1729, 0.1806, 0.1905, 0.1996, 0.2142, 0.2288, 0.2531),
    },
    std_r_n7={
        ("aatm", True): (0.0176, 0.0082, 0.0104, 0.0120, 0.0144, 0.0132, 0.0149, 0.0177, 0.0188),
        ("atm", True): (0.0360, 0.0112, 0.0191, 0.0246, 0.0381, 0.0369, 0.0348, 0.0360, 0.0329),
        ("rpca", True): (0.0138, 0.0127, 0.0154, 0.0166, 0.0193, 0.0173, 0.0182, 0.0204, 0.0203),
        ("aatm", False): (0.0059, 0.0091, 0.0126, 0.0138, 0.0181, 0.0171, 0.0195, 0.0237, 0.0255),
        ("atm", False): (0.0175, 0.0118, 0.0182, 0.0278, 0.0386, 0.0348, 0.0318, 0.0330, 0.0307),
        ("rpca", False): (0.0134, 0.0153, 0.0183, 0.0192, 0.0221, 0.0198, 0.0203, 0.0239, 0.0253),
    },
    mean_time_n7={
        ("aatm", False): (9.84, 9.56, 9.06, 9.18, 8.82, 8.35, 5.77, 5.71, 6.25),
        ("atm", False): (127.17, 130.38, 104.43, 97.66, 90.77, 80.95, 51.69, 46.87, 45.81),
        ("rpca", False): (6.45, 6.58, 6.64, 6.70, 6.61, 6.42, 3.75, 3.30, 3.47),
        ("aatm", True): (14.59, 14.32, 13.85, 13.97, 13.54, 12.73, 8.69, 8.63, 9.49),
        ("atm", True): (131.92, 135.02, 108.91, 102.17, 95.06, 84.95, 54.37, 49.49, 48.61),
        ("rpca", True): (11.26, 11.43, 11.42, 11.51, 11.34, 10.94, 6.72, 6.24, 6.69),
    },
    # (method, n) -> (p-value, one-sided CI lower bound) of H0: mean(r_MC − r_noMC) ≤ 0.
    ttest={
        ("aatm", 7): (1.4973e-58, 0.0430),
        ("atm", 7): (1.0000, -0.0234),
        ("rpca", 7): (1.7878e-17, 0.0039),
        ("aatm", 15): (1.0251e-74, 0.0629),
        ("atm", 15): (5.8915e-31, 0.0155),
        ("rpca", 15): (7.7511e-44, 0.0126),
    },
)
