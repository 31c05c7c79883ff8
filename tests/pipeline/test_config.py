"""Configuration: validated at the door, one-line errors naming the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipeline.config import Config, MaskConfig, SimulatedInputs, load, parse
from pipeline.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MINIMAL = {"inputs": {"kind": "simulated"}, "output": {"path": "out"}}


def _with(section: str, values: dict) -> dict:
    return {**MINIMAL, section: {**MINIMAL.get(section, {}), **values}}


def test_defaults() -> None:
    cfg = parse(MINIMAL, Config)
    assert cfg.tiling.tile_size == 1024 and cfg.tiling.overlap == 128
    # The defaults chosen on held-out real clouds (docs/REAL-CLOUDS.md).
    assert cfg.solver.method == "aatm" and cfg.solver.lam == "star" and cfg.solver.beta == 1.0
    assert cfg.solver.lam_scale == 1.4
    assert cfg.solver.refine is False and not cfg.solver.refines
    assert cfg.mask.shadow == 3.0 and cfg.mask.cloud == 6.0 and cfg.mask.haze == 6.0
    assert cfg.mask.keep_clear and cfg.mask.keep_haze and cfg.mask.offset == 8.0
    assert cfg.mask.interpolate and cfg.applied_interpolate
    assert cfg.solver.tol == 3e-5 and cfg.solver.max_iter == 1000 and cfg.solver.dtype == "float32"
    assert cfg.solver.rho == 2.0  # held out (docs/REAL-CLOUDS.md, "The ALM's growth ρ")
    assert cfg.cluster.kind == "local" and cfg.cluster.solver_threads is None
    assert cfg.output.cog_dtype == "uint16" and cfg.output.quicklooks is True
    assert cfg.grid.crs is None and cfg.inputs.sensor == "PMS" and cfg.inputs.dn_rule == "auto"


def test_frozen() -> None:
    cfg = parse(MINIMAL, Config)
    with pytest.raises(ValueError, match="frozen"):
        cfg.tiling.tile_size = 3


def test_unknown_key_suggests_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown key `tiling.tile_sise`: did you mean `tiling.tile_size`\?"
    ):
        parse(_with("tiling", {"tile_sise": 256}), Config)


def test_unknown_section_suggests_nearest() -> None:
    with pytest.raises(ConfigError, match=r"`solvr`: did you mean `solver`"):
        parse({**MINIMAL, "solvr": {}}, Config)


def test_wrong_type_names_key_got_and_expected() -> None:
    with pytest.raises(ConfigError) as info:
        parse(_with("tiling", {"tile_size": "big"}), Config)
    message = str(info.value)
    assert "`tiling.tile_size`" in message and "'big'" in message and "integer" in message
    assert "\n" not in message


def test_the_default_shadow_near_does_not_stop_a_lower_shadow_threshold() -> None:
    # shadow_near is on by default (1.5σ); a user who lowers mask.shadow to 1 did not set it,
    # and a lower threshold beside clouds than everywhere is then simply nothing more.
    cfg = parse(_with("mask", {"shadow": 1.0}), Config)
    assert (cfg.mask.shadow, cfg.mask.shadow_near) == (1.0, 1.5)


def test_every_rule_field_is_a_key_or_benchmark_only() -> None:
    """A field added to cloudcore.MaskRule is a key of the ``mask`` section, or listed as
    benchmark-only (measured, not offered): never silently at its default in a run."""
    import dataclasses

    import cloudcore
    from pipeline.config.mask import BENCHMARK_ONLY

    names = {f.name for f in dataclasses.fields(cloudcore.MaskRule)}
    assert names - BENCHMARK_ONLY <= set(MaskConfig.model_fields)
    assert BENCHMARK_ONLY <= names and not BENCHMARK_ONLY & set(MaskConfig.model_fields)
    with pytest.raises(ConfigError, match="every_band"):
        parse(_with("mask", {"every_band": 0.2}), Config)


@pytest.mark.parametrize(
    ("section", "values", "fragment"),
    [
        ("solver", {"lam": "huge"}, "`solver.lam`: got 'huge', expected 'auto', 'star'"),
        ("solver", {"lam": -1}, "`solver.lam`"),
        ("solver", {"method": "pca"}, "`solver.method`: got 'pca', expected 'aatm'"),
        ("solver", {"rho": 1.0}, "`solver.rho`"),
        ("solver", {"rho": float("inf")}, "`solver.rho`"),
        ("cluster", {"kind": "address"}, "cluster.address"),
        ("tiling", {"tile_size": 64, "overlap": 40}, "tiling.overlap"),
        ("grid", {"bounds": [0, 1]}, "`grid.bounds`"),
    ],
)
def test_invalid_values(section: str, values: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace("?", r"\?")):
        parse(_with(section, values), Config)


def test_lam_rules_and_numbers() -> None:
    assert parse(_with("solver", {"lam": "star"}), Config).solver.lam == "star"
    assert parse(_with("solver", {"lam": 0.002}), Config).solver.lam == 0.002


def test_lam_rule_in_words_names_the_scale() -> None:
    from pipeline.outputs.stac_parts import lam_rule

    assert lam_rule("star") == "fitted lambda* per tile"
    assert lam_rule("star", 1.4) == "1.4 x fitted lambda* per tile"
    assert lam_rule("auto", 2.0) == "2 x 1/sqrt(d) per tile"
    assert lam_rule(0.002, 1.0) == "fixed 0.002"


def test_lam_scale_multiplies_the_rule_not_a_number() -> None:
    import cloudcore
    from pipeline.solve.tile import solver_lambda

    d, n = 1280 * 1280, 7
    for rule, lam in (("star", cloudcore.lambda_star(d, n)), ("auto", cloudcore.lambda_default(d))):
        solver = parse(_with("solver", {"lam": rule, "lam_scale": 1.4}), Config).solver
        assert solver_lambda(solver, d, n) == pytest.approx(1.4 * lam, rel=1e-12)
        plain = parse(_with("solver", {"lam": rule, "lam_scale": 1}), Config).solver
        assert solver_lambda(plain, d, n) == pytest.approx(lam, rel=1e-12)
    fixed = parse(_with("solver", {"lam": 0.002}), Config).solver
    assert solver_lambda(fixed, d, n) == 0.002
    # A number is λ itself, whatever the scale.
    scaled = parse(_with("solver", {"lam": 0.002, "lam_scale": 2}), Config).solver
    assert solver_lambda(scaled, d, n) == 0.002
    with pytest.raises(ConfigError, match=r"`solver\.lam_scale`"):
        parse(_with("solver", {"lam_scale": 0}), Config)


def test_paths_required_for_real_inputs() -> None:
    with pytest.raises(ConfigError, match=r"inputs\.paths"):
        parse({"inputs": {"kind": "gf4"}, "output": {"path": "o"}}, Config)
    cfg = parse({"inputs": {"kind": "gf4", "paths": "x/*.tar.gz"}, "output": {"path": "o"}}, Config)
    assert cfg.inputs.paths == ("x/*.tar.gz",)


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(tmp_path / "missing.yaml", Config)
    bad = tmp_path / "bad.yaml"
    bad.write_text("inputs: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load(bad, Config)


@pytest.mark.parametrize(
    "name", ["demo.yaml", "gf4-example.yaml", "geotiff-example.yaml", "stac-example.yaml"]
)
def test_shipped_configs_are_valid(name: str) -> None:
    assert isinstance(load(CONFIGS / name, Config), Config)


def test_resolved_config_round_trips() -> None:
    cfg = parse(_with("solver", {"lam": 0.001}), Config)
    import yaml

    assert parse(yaml.safe_load(cfg.to_yaml()), Config) == cfg


def test_each_input_kind_has_only_its_own_keys() -> None:
    geotiff = {"kind": "geotiff", "paths": "x/*.tif", "sensor": "PMS"}
    with pytest.raises(
        ConfigError, match=r"`inputs.sensor`: valid keys for `inputs.kind: geotiff`"
    ):
        parse({"inputs": geotiff, "output": {"path": "o"}}, Config)
    with pytest.raises(
        ConfigError,
        match=r"`inputs.kind`: got 'gf5', expected 'gf4', 'geotiff', 'simulated' or 'stac'",
    ):
        parse({"inputs": {"kind": "gf5"}, "output": {"path": "o"}}, Config)
    with pytest.raises(ConfigError, match=r"missing key `inputs.kind`"):
        parse({"inputs": {"paths": "x"}, "output": {"path": "o"}}, Config)
    cfg = parse({"inputs": {"kind": "simulated", "n_dates": 3}, "output": {"path": "o"}}, Config)
    assert isinstance(cfg.inputs, SimulatedInputs) and cfg.inputs.n_dates == 3


def test_typos_are_found_in_optional_sections_and_empty_keys_mean_defaults() -> None:
    with pytest.raises(ConfigError, match=r"did you mean `cluster.jobqueue.queue`\?"):
        parse(_with("cluster", {"kind": "slurm", "jobqueue": {"queu": "short"}}), Config)
    cfg = parse(_with("cluster", {"kind": "slurm", "jobqueue": {"queue": None}}), Config)
    assert cfg.cluster.jobqueue is not None and cfg.cluster.jobqueue.queue is None


def test_mask_shadow_and_layers_are_cloudcores() -> None:
    # The config and the layout read cloudcore.catalog (no numba); the catalog's own content is
    # checked in tests/cloudcore/test_catalog.py.
    import cloudcore
    from cloudcore import catalog
    from cloudcore.solvers import SHADOW_WEIGHT
    from pipeline.config import SolverConfig
    from pipeline.store.layout import solved_layers

    assert MaskConfig().rule() == cloudcore.MaskRule()
    assert SolverConfig().shadow_weight == SHADOW_WEIGHT
    # The layout stacks a block's layers in the catalog's order, whatever a method writes.
    assert all(
        solved_layers(len(catalog.layers(m, r))) == catalog.layers(m, r)
        for m in catalog.METHODS
        for r in (False, True)
    )


@pytest.mark.parametrize(
    ("lower", "reach"), [("shadow_edge", "edge_reach"), ("shadow_near", "near_reach")]
)
def test_a_lower_shadow_threshold_must_lie_below_the_shadow_threshold(
    lower: str, reach: str
) -> None:
    cfg = parse(_with("mask", {lower: 1.5, reach: 5}), Config)
    rule = cfg.mask.rule()
    assert (getattr(rule, lower), getattr(rule, reach)) == (1.5, 5)
    assert {lower, reach}.isdisjoint(cfg.mask.options_off())
    assert {lower, reach} <= parse(_with("mask", {lower: 0}), Config).mask.options_off()
    with pytest.raises(ConfigError) as info:
        parse(_with("mask", {"shadow": 2.0, lower: 2.0}), Config)
    message = str(info.value)
    assert f"mask.{lower}" in message and "below mask.shadow" in message
    assert "\n" not in message


def test_a_low_cloud_threshold_is_accepted_with_the_default_white_clouds() -> None:
    """White clouds at or above the cloud threshold change nothing (every brightening that high
    is cloud already): ``cloud: 3`` with the default ``white_cloud: 3`` is a valid mask."""
    rule = parse(_with("mask", {"cloud": 3.0, "haze": 3.0}), Config).mask.rule()
    assert (rule.cloud, rule.white_cloud) == (3.0, 3.0)


def test_the_brightening_level_is_off_by_default_and_left_out_of_the_cube_identity() -> None:
    """``mask.bright_level`` 0 (the default) leaves both its fields out of the cube's identity,
    as before they existed, so earlier cubes resume; set, both are in it and in the rule."""
    assert {"bright_level", "level_below"} <= MaskConfig().options_off()
    cfg = parse(_with("mask", {"bright_level": 16, "level_below": 3.0}), Config)
    assert {"bright_level", "level_below"}.isdisjoint(cfg.mask.options_off())
    assert (cfg.mask.rule().bright_level, cfg.mask.rule().level_below) == (16, 3.0)
    with pytest.raises(ConfigError) as info:
        parse(_with("mask", {"bright_level": 65}), Config)
    assert "mask.bright_level" in str(info.value) and "\n" not in str(info.value)


def test_ground_that_stays_off_is_left_out_of_the_cube_identity() -> None:
    """``mask.persist`` 0 leaves its four fields out of the cube's identity, as before they
    existed; set, they are in it and in the rule; a fraction above 1 names the key."""
    fields = {"persist", "persist_reach", "persist_cover", "persist_spill"}
    assert fields <= parse(_with("mask", {"persist": 0}), Config).mask.options_off()
    cfg = parse(_with("mask", {"persist": 0.5, "persist_reach": 4}), Config)
    assert fields.isdisjoint(cfg.mask.options_off())
    assert (cfg.mask.rule().persist, cfg.mask.rule().persist_reach) == (0.5, 4)
    with pytest.raises(ConfigError) as info:
        parse(_with("mask", {"persist": 1.5}), Config)
    assert "mask.persist" in str(info.value) and "\n" not in str(info.value)


def test_interpolate_off_is_left_out_of_the_cube_identity_and_applies_as_the_offset(
    tmp_path: Path,
) -> None:
    """``mask.interpolate`` off is left out of the cube's identity, as before it existed; on, it
    is in it, and the mask pass applies it only where it applies the offset's kind of fill:
    ``keep_clear`` on and a method whose layers add up to the residual (not ``atm``)."""
    from pipeline.plan import make_plan

    def config(interpolate: bool, **solver: str) -> Config:
        # A plan of simulated inputs simulates them into its output folder: a small series in
        # the test's own folder (once; the plans share it), never the working directory.
        small = {"kind": "simulated", "size": 32, "n_dates": 3}
        values = {"inputs": small, "output": {"path": str(tmp_path)}, "solver": solver}
        return parse({**values, "mask": {"interpolate": interpolate}}, Config)

    off, on = config(False), config(True)
    assert "interpolate" in off.mask.options_off()
    assert "interpolate" not in on.mask.options_off()
    assert make_plan(off).cube_token != make_plan(on).cube_token
    assert on.applied_interpolate and not off.applied_interpolate
    atm, atm_off = config(True, method="atm"), config(False, method="atm")
    assert not atm.applied_interpolate
    assert make_plan(atm).cube_token == make_plan(atm_off).cube_token  # nothing it changes
    unkept = parse(_with("mask", {"interpolate": True, "keep_clear": False}), Config)
    assert not unkept.applied_interpolate and "interpolate" in unkept.mask.options_off()
    with pytest.raises(ConfigError) as info:
        parse(_with("mask", {"interpolate": "often"}), Config)
    assert "mask.interpolate" in str(info.value) and "\n" not in str(info.value)


def test_the_interpolation_on_a_ground_not_capped_is_warned_of(caplog) -> None:
    """Uncapped, the mask keeps overcast dates whose cloud the interpolation writes into the
    fill: one warning naming both keys and what to set; none by default or with it off."""
    with caplog.at_level(logging.WARNING, logger="pipeline.config.run"):
        parse(_with("solver", {"cap_ground": False}), Config)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "mask.interpolate" in warned[0]
    assert "solver.cap_ground" in warned[0] and "mask.interpolate: false" in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline.config.run"):
        parse(_with("solver", {"cap_ground": True}), Config)
        parse({**_with("solver", {"cap_ground": False}), "mask": {"interpolate": False}}, Config)
    assert not caplog.records
