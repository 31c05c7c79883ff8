"""Tests of the real-cloud experiment: bundled data, pasting, baselines, scores, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from cloudlab import (
    ExperimentConfig,
    experiment_kind,
    load_experiment_config,
    load_real_clouds_config,
    load_real_series,
)
from cloudlab.cli import main
from cloudlab.realdata import (
    BUNDLED_SERIES,
    CLEAR,
    CLOUD,
    NODATA,
    SHADOW,
    SNOW,
    fmask_codes,
)
from cloudlab.realpaste import (
    choose_pairs,
    clear_median,
    cloudy_fraction,
    nearest_clear,
    paste_clouds,
    temporal_median,
    without_source,
)
from cloudlab.realscores import Agreement, agreement, agreement_per_date, relative_error
from pipeline.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------
# The bundled data
# --------------------------------------------------------------------------------------------


def test_bundled_series_shape_dates_and_codes() -> None:
    s = load_real_series()
    assert s.values.shape == (105, 3, 61, 61)
    assert s.reference.shape == (105, 61, 61)
    assert s.bands == ("red", "nir", "swir1")
    assert str(s.dates[0]) == "2008-04-19" and str(s.dates[-1]) == "2013-05-27"
    assert (np.diff(s.dates.astype(np.int64)) > 0).all()  # sorted, no date twice
    assert len(s.scene_ids) == 105 and s.scene_ids[0].startswith("LT5")
    assert set(np.unique(s.reference).tolist()) == {CLEAR, CLOUD, SHADOW, SNOW, NODATA}
    seen = s.observed
    assert np.isnan(s.values).any(axis=1).tolist() == (~seen).tolist()
    finite = s.values[np.isfinite(s.values)]
    assert finite.min() >= 0.0 and finite.max() <= 1.0
    assert s.crs == "EPSG:32613"
    assert s.transform == (30.0, 0.0, 336375.0, 0.0, -30.0, 4462425.0)
    # Fmask's cloud is bright and its shadow dark in NIR, against the clear median.
    nir = s.values[:, 1]
    clear = np.nanmedian(np.where(s.reference == CLEAR, nir, np.nan), axis=0)
    assert np.nanmean((nir - clear)[s.reference == CLOUD]) > 0.1
    assert np.nanmean((nir - clear)[s.reference == SHADOW]) < -0.05


def test_sources_name_the_bundled_series() -> None:
    sources = (ROOT / "cloudlab" / "data" / "SOURCES.md").read_text(encoding="utf-8")
    for name in BUNDLED_SERIES.values():
        assert name in sources
        assert (ROOT / "cloudlab" / "data" / "real-clouds" / name).stat().st_size < 3_000_000
    assert "benmack/eo-box" in sources and "MIT" in sources


def test_fmask_codes_map_and_reject() -> None:
    fmask = np.array([[0, 1, 2], [3, 4, 255]], dtype=np.uint8)
    assert fmask_codes(fmask).tolist() == [[CLEAR, CLEAR, SHADOW], [SNOW, CLOUD, NODATA]]
    with pytest.raises(ValueError, match="not Fmask codes"):
        fmask_codes(np.array([5]))


def test_window_crop_and_matrix() -> None:
    s = load_real_series().between("2011-05-01", "2011-10-31").crop(10, 20, 5, 7)
    assert s.values.shape == (20, 3, 5, 7) and s.frame == (5, 7)
    assert s.transform[2] == 336375.0 + 20 * 30 and s.transform[5] == 4462425.0 - 10 * 30
    D, observed = s.matrix(1)
    assert D.shape == observed.shape == (35, 20)
    assert np.array_equal(D[:, 3], s.values[3, 1].ravel(), equal_nan=True)
    assert np.isnan(D).tolist() == (~observed).tolist()


# --------------------------------------------------------------------------------------------
# Pasting and pairs
# --------------------------------------------------------------------------------------------


def _tiny() -> tuple[np.ndarray, np.ndarray]:
    """5 pixels × 3 dates: date 0 clear (one pixel no data), date 2 has cloud and shadow."""
    D = np.array(
        [
            [0.10, 0.11, 0.90],
            [0.20, 0.21, 0.05],
            [np.nan, 0.31, 0.80],
            [0.40, 0.41, 0.42],
            [0.50, 0.51, 0.52],
        ]
    )
    ref = np.array(
        [
            [CLEAR, CLEAR, CLOUD],
            [CLEAR, CLEAR, SHADOW],
            [NODATA, CLEAR, CLOUD],
            [CLEAR, CLEAR, CLEAR],
            [CLOUD, CLEAR, SNOW],
        ],
        dtype=np.uint8,
    )
    return D, ref


def test_paste_copies_cloud_and_shadow_pixels_only() -> None:
    D, ref = _tiny()
    p = paste_clouds(D, ref, target=0, source=2)
    assert p.pasted.tolist() == [True, True, True, False, False]
    assert np.array_equal(p.D[p.pasted, 0], D[p.pasted, 2])
    untouched = np.ones(D.shape, dtype=bool)
    untouched[p.pasted, 0] = False
    assert np.array_equal(p.D[untouched], D[untouched], equal_nan=True)
    assert p.reference[:, 0].tolist() == [CLOUD, SHADOW, CLOUD, CLEAR, CLOUD]
    assert p.observed[2, 0]  # a pasted no-data pixel becomes observed (the cloud is there)
    assert p.scored.tolist() == [True, True, False, False, False]  # truth exists, was clear
    assert np.array_equal(p.truth, D[:, 0], equal_nan=True)
    with pytest.raises(ValueError, match="same date"):
        paste_clouds(D, ref, 1, 1)


def test_without_source_leaves_the_source_date_out() -> None:
    D, ref = _tiny()
    for target, source, new_target in ((2, 0, 1), (0, 2, 0)):
        p = paste_clouds(D, ref, target, source)
        q, keep = without_source(p)
        assert keep.tolist() == [d for d in range(3) if d != source]
        assert q.target == new_target and q.source == -1
        assert np.array_equal(q.D, p.D[:, keep], equal_nan=True)
        assert np.array_equal(q.D[:, q.target], p.D[:, target], equal_nan=True)
        assert np.array_equal(q.reference, p.reference[:, keep])
        assert np.array_equal(q.scored, p.scored)
        assert np.array_equal(q.truth, p.truth, equal_nan=True)


def test_cloudy_fraction_and_pairs() -> None:
    ref = np.zeros((10, 5), dtype=np.uint8)
    ref[:3, 1] = CLOUD  # 30 % cloudy
    ref[:1, 2] = SHADOW  # 10 %
    ref[:, 3] = CLOUD  # 100 %
    ref[:8, 4] = NODATA  # 20 % observed, clear
    cloudy, seen = cloudy_fraction(ref)
    assert np.allclose(cloudy, [0, 0.3, 0.1, 1, 0]) and np.allclose(seen, [1, 1, 1, 1, 0.2])
    kw: dict[str, Any] = dict(
        clear_max=0.01, min_observed=0.5, cloudy_min=0.05, cloudy_max=0.7, seed=3
    )
    assert choose_pairs(ref, count=10, **kw) == [(0, 1), (0, 2)]
    assert len(choose_pairs(ref, count=1, **kw)) == 1
    assert choose_pairs(ref, count=5, **{**kw, "cloudy_min": 0.5}) == []


def test_pairs_use_every_target_before_repeating() -> None:
    ref = np.zeros((10, 8), dtype=np.uint8)
    ref[:4, 4:] = CLOUD  # dates 0-3 clear, 4-7 cloudy
    pairs = choose_pairs(
        ref, clear_max=0, min_observed=0, cloudy_min=0.1, cloudy_max=1, count=4, seed=0
    )
    assert sorted(t for t, _ in pairs) == [0, 1, 2, 3]
    assert sorted(s for _, s in pairs) == [4, 5, 6, 7]


# --------------------------------------------------------------------------------------------
# Baselines and scores
# --------------------------------------------------------------------------------------------


def test_baselines_on_a_hand_made_series() -> None:
    D = np.array([[1.0, 2.0, 3.0, 10.0], [4.0, np.nan, 6.0, 8.0]]) / 10
    ref = np.array([[CLEAR, CLOUD, CLEAR, SHADOW], [CLOUD, NODATA, CLOUD, CLOUD]], dtype=np.uint8)
    days = np.array([0, 10, 20, 25])
    assert np.allclose(temporal_median(D, ref, days)[:, 1], [0.25, 0.6])
    # Pixel 0: clear dates 0 and 2 -> 0.2; pixel 1 has no clear date -> temporal median.
    assert np.allclose(clear_median(D, ref, days), [[0.2] * 4, [0.6] * 4])
    near = nearest_clear(D, ref, days)
    # Date 1 is 10 days from both clear dates: the earlier (0.1) wins; date 3 -> date 2.
    assert np.allclose(near[0], [0.1, 0.1, 0.3, 0.3])
    assert np.allclose(near[1], [0.6] * 4)


def test_relative_error_known_answers() -> None:
    truth = np.array([3.0, 4.0, 100.0])
    where = np.array([True, True, False])
    assert relative_error(np.array([3.0, 4.0, 0.0]), truth, where) == 0.0
    assert relative_error(np.array([0.0, 0.0, 0.0]), truth, where) == pytest.approx(1.0)
    assert relative_error(np.array([6.0, 8.0, 0.0]), truth, where) == pytest.approx(1.0)
    assert relative_error(np.array([np.nan, 4.0, 0.0]), truth, where) == pytest.approx(0.6)
    assert np.isnan(relative_error(truth, truth, np.zeros(3, dtype=bool)))


def test_agreement_counts_precision_recall_f1() -> None:
    ref = np.array([[CLOUD, CLOUD, CLEAR, SHADOW], [CLEAR, CLOUD, NODATA, SNOW]])
    pred = np.array([[2, 0, 2, 3], [1, 2, 2, 255]])
    cloud = agreement(ref, pred, (CLOUD,), (2,))
    assert cloud == Agreement(tp=2, fp=1, fn=1)  # the no-data entries are left out
    assert cloud.precision == pytest.approx(2 / 3) and cloud.recall == pytest.approx(2 / 3)
    assert cloud.f1 == pytest.approx(2 / 3)
    assert agreement(ref, pred, (CLOUD,), (1, 2)) == Agreement(tp=2, fp=2, fn=1)
    assert agreement(ref, pred, (SHADOW,), (3,)) == Agreement(tp=1, fp=0, fn=0)
    per_date = agreement_per_date(ref, pred, (CLOUD,), (2,))
    assert per_date == [Agreement(1, 1, 1), Agreement(1, 0, 0)]
    assert per_date[0] + per_date[1] == cloud
    none = Agreement(0, 0, 0)
    assert np.isnan(none.precision) and np.isnan(none.recall) and np.isnan(none.f1)
    with pytest.raises(ValueError, match="shapes differ"):
        agreement(ref, pred[:1], (CLOUD,), (2,))


# --------------------------------------------------------------------------------------------
# Configuration and the experiment end to end
# --------------------------------------------------------------------------------------------

SMALL: dict[str, Any] = {
    "kind": "real-clouds",
    "name": "small",
    "series": [{"name": "2011", "start": "2011-05-01", "end": "2011-10-31"}],
    "crop": [20, 20, 16, 16],
    "bands": ["red", "nir"],
    "solvers": [
        {"method": "aatm", "lam": "star"},
        {"method": "rpca", "lam": "auto"},
        {"method": "rpca", "lam": "auto", "refine": True},
    ],
    "pairs": {"per_series": 2},
    "solver": {"max_iter": 300},
}


def _write(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / "real.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_config_kind_and_validation(tmp_path: Path) -> None:
    path = _write(tmp_path, SMALL)
    assert experiment_kind(path) == "real-clouds"
    cfg = load_real_clouds_config(path)
    assert [s.label for s in cfg.solvers] == ["aatm/star", "rpca/auto", "rpca/auto+refine"]
    assert cfg.pairs.protocols == ("drop-source", "keep-source")
    with pytest.raises(ConfigError, match="protocols"):
        load_real_clouds_config(_write(tmp_path, {**SMALL, "pairs": {"protocols": []}}))
    assert experiment_kind(tmp_path / "missing.yaml") == "simulation"
    with pytest.raises(ConfigError, match="kind"):
        experiment_kind(_write(tmp_path, {**SMALL, "kind": "real-cloud"}))
    with pytest.raises(ConfigError, match="unknown method"):
        load_real_clouds_config(_write(tmp_path, {**SMALL, "solvers": [{"method": "pca"}]}))
    with pytest.raises(ConfigError, match="not found"):
        load_real_clouds_config(_write(tmp_path, {**SMALL, "data": "nothing.npz"}))
    sim = tmp_path / "sim.yaml"
    sim.write_text("kind: simulation\nsize: 16\n", encoding="utf-8")
    assert experiment_kind(sim) == "simulation"
    assert isinstance(load_experiment_config(sim), ExperimentConfig)


def test_bundled_config_is_valid() -> None:
    cfg = load_real_clouds_config(ROOT / "configs" / "real-clouds.yaml")
    assert cfg.kind == "real-clouds" and len(cfg.series) == 4


def test_experiment_end_to_end_on_a_crop(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["-q", "experiment", str(_write(tmp_path, SMALL)), "--out", str(out)]) == 0
    pairs = pd.read_csv(out / "pairs.csv")
    assert len(pairs) == 2
    pred = pd.read_csv(out / "prediction.csv")
    solvers = ["aatm/star", "rpca/auto", "rpca/auto+refine"]
    baselines = ["temporal-median", "nearest-clear", "clear-median"]
    summary = json.loads((out / "scores.json").read_text(encoding="utf-8"))
    with_mask = "mask_note" not in summary
    kept = {f"{s} keep-clear" for s in solvers} if with_mask else set()
    estimators = {*solvers, *baselines} | kept
    assert set(pred["estimator"]) == estimators
    assert len(pred) == 2 * 2 * 2 * len(estimators)  # pairs × protocols × bands × estimators
    assert (pred["pixels"] > 0).all() and pred["r"].between(0, 50).all()
    # drop-source solves one date fewer; the pasted pixels scored are the same
    dates = pred.groupby("protocol")["dates"].first()
    assert dates["drop-source"] == dates["keep-source"] - 1
    assert pred.groupby("protocol")["pixels"].sum().nunique() == 1
    fid = pd.read_csv(out / "fidelity.csv")
    assert len(fid) == 2 * (len(solvers) + len(baselines))
    assert (fid.loc[fid["estimator"] == "nearest-clear", "r_clear"] == 0).all()
    if with_mask:  # keeping what the mask calls clear can only bring the clear entries closer
        refined = fid[fid["estimator"] == "rpca/auto+refine"]
        assert (refined["r_clear_keep"] <= refined["r_clear"] + 1e-12).all()
    assert set(summary["prediction_r_mean"]) == {"drop-source", "keep-source"}
    assert set(summary["prediction_r_mean"]["drop-source"]) == estimators
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Prediction under real clouds" in report and "aatm/star" in report
    if "mask_note" not in summary:  # cloudcore.classify is there
        masks = pd.read_csv(out / "mask.csv")
        overall = masks[masks["date"] == "all"]
        assert set(overall["class"]) == {"cloud", "cloud+haze", "shadow"}
        assert len(overall) == len(solvers) * 3
        assert ((masks["tp"] + masks["fn"]) >= 0).all()
