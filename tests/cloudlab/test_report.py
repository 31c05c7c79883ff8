"""Tests of the report: t-tests, best-λ fit, zones, tables, figures, EXPERIMENTS.md."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cloudlab import (
    BEGIN,
    END,
    best_lambdas,
    fit_best_lambda,
    mc_ttests,
    paired_ttest,
    summarise,
    write_experiments_md,
    write_report,
    zones,
)
from cloudlab.cli import main

D = 64 * 64


def _lam_grid(count: int = 21, low: float = 0.1, high: float = 10.0) -> np.ndarray:
    return np.exp(np.linspace(math.log(low), math.log(high), count)) / math.sqrt(D)


def synthetic_run(
    out: Path, ns: tuple[int, ...] = (3, 7, 30), repeats: int = 6, a: float = -0.5, b: float = 1.0
) -> None:
    """results.csv / trials.csv whose mean r is minimal at √d·λ = a·ln ln n + b exactly."""
    rng = np.random.default_rng(0)
    lams = _lam_grid()
    rows, infos = [], []
    for n in ns:
        target = a * math.log(math.log(n)) + b
        best = lams[np.argmin(np.abs(np.log(lams * math.sqrt(D) / target)))]
        for k in range(repeats):
            base = {"image": "img", "n": n, "repeat": k, "seed": 100 * n + k, "d": D}
            noise = rng.normal(0, 0.002)
            rows.append(
                {
                    **base,
                    "method": "cloudy",
                    "mc": False,
                    "lam": math.nan,
                    "lam_kind": "none",
                    "lam_sqrt_d": math.nan,
                    "r": 0.4 + noise,
                    "seconds": 0.0,
                    "iterations": 0,
                    "converged": True,
                    "c_nonzero": math.nan,
                    "l_rel": 1.0,
                }
            )
            for m, offset in (("aatm", 0.0), ("rpca", 0.03)):
                for lam in lams:
                    r = 0.1 + offset + 0.2 * math.log(lam / best) ** 2 + noise
                    failed = lam * math.sqrt(D) < 0.2
                    clamped = lam * math.sqrt(D) > 4.0
                    r = 1.0 if failed else min(r, 0.4 + noise) if not clamped else 0.4 + noise
                    for mc, extra in ((False, 0.0), (True, 0.02 + rng.normal(0, 0.001))):
                        rows.append(
                            {
                                **base,
                                "method": m,
                                "mc": mc,
                                "lam": lam,
                                "lam_kind": "grid",
                                "lam_sqrt_d": lam * math.sqrt(D),
                                "r": r + extra,
                                "seconds": 0.1 + extra,
                                "iterations": 20,
                                "converged": True,
                                "c_nonzero": 0.0 if clamped else 0.3,
                                "l_rel": 0.0 if failed else 0.9,
                            }
                        )
            infos.append(
                {
                    **base,
                    "lower": 1 / math.sqrt(D * n),
                    "upper": 4.0 / math.sqrt(D),
                    "upper_asymptotic": 3.5 / math.sqrt(D),
                    "lam0": 1 / math.sqrt(D),
                    "r_cloudy": 0.4,
                    "cloud_cover": 0.2,
                    "seconds": 1.0,
                }
            )
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "results.csv", index=False)
    pd.DataFrame(infos).to_csv(out / "trials.csv", index=False)


def test_paired_ttest_direction_and_sign() -> None:
    rng = np.random.default_rng(1)
    y = rng.uniform(0.1, 0.2, 40)
    worse = y + 0.01 + rng.normal(0, 0.002, 40)  # "MC makes r larger"
    t = paired_ttest(worse, y)
    assert t.reject and t.p < 1e-10 and t.t > 0 and 0 < t.ci_low < t.mean
    assert t.mean == pytest.approx(np.mean(worse - y))
    better = y - 0.01 + rng.normal(0, 0.002, 40)
    t = paired_ttest(better, y)
    assert not t.reject and t.p > 0.999 and t.mean < 0 and t.ci_low < t.mean
    # A lower α widens the one-sided interval.
    assert paired_ttest(worse, y, alpha=1e-5).ci_low < paired_ttest(worse, y, alpha=0.05).ci_low
    with pytest.raises(ValueError, match="paired samples"):
        paired_ttest([1.0, 2.0], [1.0])


def test_fit_recovers_known_coefficients() -> None:
    n = np.array([2, 3, 5, 7, 10, 20, 50, 100, 250])
    y = -0.5682 * np.log(np.log(n)) + 1.0747
    assert fit_best_lambda(n, y) == pytest.approx((-0.5682, 1.0747))
    noisy = y + np.random.default_rng(2).normal(0, 1e-3, n.size)
    a, b = fit_best_lambda(n, noisy)
    assert a == pytest.approx(-0.5682, abs=0.01) and b == pytest.approx(1.0747, abs=0.01)
    with pytest.raises(ValueError, match="two different n"):
        fit_best_lambda([7, 7], [1.0, 1.0])


def test_best_lambda_and_fit_from_trials(tmp_path: Path) -> None:
    ns = (2, 3, 5, 8, 15, 40, 100)
    synthetic_run(tmp_path, ns=ns, a=-0.6, b=1.1)
    summary = summarise(pd.read_csv(tmp_path / "results.csv"))
    best = best_lambdas(summary)
    assert set(best.method) == {"aatm", "rpca"} and len(best) == 2 * len(ns)
    aatm = best[best.method == "aatm"]
    a, b = fit_best_lambda(aatm.n, aatm.lam_star_sqrt_d)
    # Grid quantisation (step 26 % here) limits how well the coefficients come back.
    assert a == pytest.approx(-0.6, abs=0.08) and b == pytest.approx(1.1, abs=0.08)


def test_mc_ttests_and_zones(tmp_path: Path) -> None:
    synthetic_run(tmp_path)
    results = pd.read_csv(tmp_path / "results.csv")
    summary = summarise(results)
    tests = mc_ttests(results, summary)
    assert set(tests["where"]) == {"best", "lam0"}
    assert (tests.mean_diff > 0.015).all() and tests.reject_h0.all() and (tests.ci_low > 0).all()
    z = zones(summary, pd.read_csv(tmp_path / "trials.csv"))
    assert len(z) == 2 * 3
    lams = _lam_grid() * math.sqrt(D)
    assert z.failure_edge.iloc[0] * math.sqrt(D) == pytest.approx(lams[lams < 0.2].max())
    assert z.clamp_start.iloc[0] * math.sqrt(D) == pytest.approx(lams[lams > 4.0].min())
    assert z.clamp_start_over_upper.iloc[0] > 1


def test_report_files_and_experiments_md(tmp_path: Path) -> None:
    run = tmp_path / "run"
    synthetic_run(run)
    tables = write_report(run, title="synthetic")
    text = tables.read_text(encoding="utf-8")
    assert "### Mean r" in text and "/ 1.000‖" in text  # the λ₀ column is marked
    assert "‖" in text and "**" in text and "| aATM+MC |" in text
    for name in ("r-img-n7.png", "time-img-n3.png", "best-lambda.png"):
        assert (run / "figures" / name).stat().st_size > 1000
    for name in ("ttests.csv", "zones.csv", "best_lambda.csv", "best_lambda_fit.csv"):
        assert (run / name).is_file()

    doc = tmp_path / "docs" / "EXPERIMENTS.md"
    doc.parent.mkdir()
    old = f"{BEGIN}\nOLD-GENERATED-TEXT\n{END}"
    doc.write_text(f"# Experiments\n\nHand intro.\n\n{old}\n\nHand discussion.\n", encoding="utf-8")
    write_experiments_md(
        doc,
        grid_run=run,
        bestlambda_run=run,
        grid_commands=["python -m cloudlab experiment x.yaml"],
    )
    out = doc.read_text(encoding="utf-8")
    assert out.startswith("# Experiments\n\nHand intro.") and out.endswith("Hand discussion.\n")
    assert "OLD-GENERATED-TEXT" not in out and "python -m cloudlab experiment x.yaml" in out
    assert "aATM against RPCA" in out and "Best λ against n" in out
    assert (doc.parent / "figures" / "grid-r-img-n7.png").is_file()
    assert "](figures/grid-r-img-n7.png)" in out
    # Regenerating is idempotent.
    write_experiments_md(
        doc,
        grid_run=run,
        bestlambda_run=run,
        grid_commands=["python -m cloudlab experiment x.yaml"],
    )
    assert doc.read_text(encoding="utf-8") == out


@pytest.mark.parametrize("command", ["python -m pipeline report", "python -m pipeline.report"])
def test_experiments_md_with_an_old_marker_keeps_its_hand_written_text(
    tmp_path: Path, command: str
) -> None:
    run = tmp_path / "run"
    synthetic_run(run)
    doc = tmp_path / "EXPERIMENTS.md"
    old_begin = f"<!-- BEGIN GENERATED: {command}; edit outside this block -->"
    doc.write_text(f"Intro.\n\n{old_begin}\nOLD\n{END}\n\nDiscussion.\n", encoding="utf-8")
    write_experiments_md(doc, grid_run=run)
    out = doc.read_text(encoding="utf-8")
    assert out.startswith(f"Intro.\n\n{BEGIN}\n") and out.endswith(f"{END}\n\nDiscussion.\n")
    assert "OLD" not in out and old_begin not in out and "python -m cloudlab report" in BEGIN


def test_cli_report_rewrites_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    synthetic_run(run)
    assert main(["-q", "report", "--run", str(run)]) == 0
    assert capsys.readouterr().out == f"{run / 'tables.md'}\n"
    assert (run / "tables.md").read_text(encoding="utf-8").startswith("# run\n")
