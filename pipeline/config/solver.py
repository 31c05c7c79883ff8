"""The ``solver`` section of a run: the decomposition, its scope and what each scope can do.

Checked at the door as every section is (:mod:`pipeline.config.run` holds the run's other
sections and the whole :class:`~pipeline.config.run.Config`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from cloudcore.catalog import (
    ADDITIVE_METHODS,
    GROUND_FLOOR,
    METHODS,
    SCENE_METHODS,
    SHADOW_LAYER,
    SHADOW_METHODS,
    SHADOW_WEIGHT,
    Method,
    layers,
)
from pipeline.config.base import ConfigSection

__all__ = ["FILL_SOLVE", "SCOPE_TRAITS", "ScopeTraits", "SolverConfig"]

#: The second solve of ``solver.shadow_free_fill``: aatm-shadow with the shadow layer's ℓ1
#: weight κ equal to the cloud's, at λ̂* (``lam: star``, ``lam_scale: 1``), capped: the solve
#: whose ground the real-cloud benchmark measured under the default's mask
#: (``benchmarks/solve_folds.py --ground-from``, docs/REAL-CLOUDS.md). Spelt in the tile ids
#: (:meth:`SolverConfig.spell_options`), so that changing it solves the tiles again.
FILL_SOLVE: dict[str, Any] = {
    "method": "aatm-shadow",
    "shadow_weight": 1.0,
    "lam": "star",
    "lam_scale": 1.0,
}


@dataclass(frozen=True)
class ScopeTraits:
    """What a solve scope can do, as the configuration checks it (the scopes themselves are
    :mod:`pipeline.solve.scopes`)."""

    methods: tuple[str, ...]  # the methods it solves
    refines: bool  # whether it can refine (cloudcore.refine)
    why_not_method: str = ""  # why it does not solve the others
    # Whether the scope is part of the work's ids: not tile scope's, the default, whose ids did
    # not change when scene scope came (pipeline.plan).
    named_in_ids: bool = True


#: The traits of each ``solver.scope``. Scene scope runs the ALM on blocks that live in Dask
#: actors (cloudcore.scene): not ATM, whose inner loop takes many SVTs per iteration, and no
#: refinement, which is per tile.
SCOPE_TRAITS = {
    "tile": ScopeTraits(methods=METHODS, refines=True, named_in_ids=False),
    "scene": ScopeTraits(
        methods=SCENE_METHODS,
        refines=False,
        why_not_method=" (its inner loop takes many SVTs per iteration)",
    ),
}


class SolverConfig(ConfigSection):
    """Decomposition settings passed to :func:`cloudcore.decompose` (``solver``)."""

    # The default (aATM, 1.4 × λ̂*, not refined) was chosen by leave-one-site-out on five real
    # cloudy series from three sensors (docs/REAL-CLOUDS.md, `python -m cloudlab heldout`), with
    # the mask's settings (pipeline/config/mask.py) and the ground capped: held out, its mean r
    # on pasted real clouds is 0.179 (the temporal median's 0.360; λ̂* itself, chosen the same
    # way, 0.48), and it changes the reference-clear pixels by r 0.032 on average. The earlier
    # default (rpca 1/√d, refined), chosen on one site, was worse than the median on three of
    # the other four.
    method: Method = "aatm"
    lam: Literal["auto", "star"] | float = "star"
    # λ = lam_scale × the rule's λ (lam auto or star); with lam a number, that number is λ and
    # lam_scale does not apply.
    # 1.4 of 1, 1.4 and 2, by leave-one-site-out: λ̂*, fitted to the paper's simulation, is too
    # small for real clouds (more of the scene goes into C, and the mask then flags clear pixels).
    lam_scale: float = Field(default=1.4, gt=0)
    # The masked re-solve (cloudcore.refine), tile scope only. Off by default: chosen on one
    # site, it did not transfer (docs/REAL-CLOUDS.md).
    refine: bool = False
    beta: float = Field(default=1.0, gt=0)
    # κ of aatm-shadow: the shadow layer's ℓ1 weight relative to the cloud's.
    shadow_weight: float = Field(default=SHADOW_WEIGHT, gt=0)
    # Each pixel's ground capped at its median over the dates, the excess moved into the cloud
    # layer (cloudcore.cap_ground): a date overcast over the whole tile is otherwise taken into
    # the low-rank ground, and the mask calls its clouds clear. Additive methods only. On since
    # 2026-11-27: held out, the mask's cloud + haze F1 against Fmask and Sen2Cor rose from
    # 0.55–0.71 to 0.80–0.84 and the mean r on pasted clouds from 0.214 to 0.189
    # (docs/REAL-CLOUDS.md, "Overcast dates"). Left out (null): on for the additive methods, off
    # for atm; true with atm is an error. With refine the refined ground is capped (not scored).
    cap_ground: bool | None = None
    # With the cap, each pixel's ground also raised to this quantile of its dates, the deficit
    # taken out of the residual (aATM's haze layer, RPCA's cloud layer), where the mask reads
    # shadows (cloudcore.cap_ground's floor): aATM's cloud layer is non-negative, so a cloud's
    # shadow is otherwise taken into the ground and never flagged. A quantile in (0, 0.5]; 0:
    # no floor. Left out (null): cloudcore.catalog.GROUND_FLOOR where the ground is capped and
    # there is no shadow layer, else none. Not with a shadow layer (aatm-shadow, refine), whose
    # S holds the shadows.
    floor_ground: float | None = Field(default=None, ge=0, le=0.5)
    # The relative residual ‖D − L − C − N‖_F / ‖D‖_F at which the solve stops. 3e-5 rather than
    # cloudcore's 1e-7 (floored at 1e-6 in float32): about a fifth fewer iterations; on the
    # real-cloud benchmark nine of ten scores within 0.2 % of a solve to 1e-7, and 3 pixels of
    # the smallest site's mask flipped (benchmarks/tolerance.py, docs/PERFORMANCE.md).
    tol: float = Field(default=3e-5, gt=0)
    # The growth of the ALM's step μ per iteration (μ ← ρμ). 2 rather than the paper's 1.5
    # (cloudcore's default): about 30 % fewer iterations, and held out on the real-cloud
    # benchmark its scores were at least as good (docs/REAL-CLOUDS.md, "The ALM's growth ρ").
    # A different solve, not a faster one of the same: most written DN move.
    rho: float = Field(default=2.0, gt=1, allow_inf_nan=False)
    max_iter: int = Field(default=1000, ge=1)
    dtype: Literal["float32", "float64"] = "float32"
    # ``tile``: one solve per tile halo, blended (the default, as users asked). ``scene``: one
    # exact solve per band over the whole scene, distributed over the tiles
    # (pipeline.solve.scopes); docs/SCOPES.md says when to choose which.
    scope: Literal["tile", "scene"] = "tile"
    # The ground written under what the mask fills from a second solve per tile, aatm-shadow
    # (FILL_SOLVE), whose shadow layer keeps a shadow out of its ground; the mask, its scores
    # and σ stay the first (aATM) solve's, so it calls the same pixels clear. An option, off:
    # over 28 real site-years it filled better on four sites of five on three draws of the
    # pairs (most on the one with large dark shadows), but leave-one-site-out did not choose it,
    # and it costs a second solve per tile (docs/REAL-CLOUDS.md, "The shadow-free fill").
    shadow_free_fill: bool = False

    @model_validator(mode="after")
    def _scope_can_solve(self) -> SolverConfig:
        traits = SCOPE_TRAITS[self.scope]
        if self.method not in traits.methods:
            solves = f"{', '.join(traits.methods[:-1])} or {traits.methods[-1]}"
            raise ValueError(
                f"solver.scope '{self.scope}' solves {solves}, not {self.method}"
                f"{traits.why_not_method}: use solver.scope 'tile' for {self.method}"
            )
        if self.cap_ground is True and self.method not in ADDITIVE_METHODS:
            raise ValueError(
                f"solver.cap_ground moves the ground's excess into an additive cloud layer; "
                f"{self.method}'s is an opacity: set solver.cap_ground false or choose one of "
                f"{', '.join(ADDITIVE_METHODS)}"
            )
        if self.floor_ground and self.method not in ADDITIVE_METHODS:
            raise ValueError(
                f"solver.floor_ground moves the ground's deficit into an additive residual; "
                f"{self.method}'s cloud layer is an opacity: set solver.floor_ground 0 (or leave "
                f"it out) or choose one of {', '.join(ADDITIVE_METHODS)}"
            )
        if self.floor_ground and (self.refine or self.method in SHADOW_METHODS):
            raise ValueError(
                "solver.floor_ground takes a shadow out of the ground into the residual; with "
                f"{'solver.refine' if self.refine else self.method} the shadow layer S holds "
                "it: set solver.floor_ground 0 (or leave it out)"
            )
        if self.floor_ground and not self.caps_ground:
            raise ValueError(
                "solver.floor_ground raises the ground capped by solver.cap_ground: set "
                "solver.cap_ground true (or leave it out), or solver.floor_ground 0"
            )
        if self.refine and not traits.refines:
            raise ValueError(
                f"solver.refine is done per tile: set solver.scope 'tile', or solver.refine false "
                f"(or leave it out) for {self.scope} scope"
            )
        if self.shadow_free_fill:
            self._check_shadow_free_fill()
        return self

    def _check_shadow_free_fill(self) -> None:
        """``shadow_free_fill`` is the pipeline's default solve (aATM, unrefined, per tile, its
        ground capped, not floored) with a second solve's ground: the settings it was measured
        with."""
        why = None
        if self.method != "aatm":
            why = f"solver.method 'aatm' (the mask's solve), not {self.method!r}"
        elif self.refine:
            why = "solver.refine false (or leave it out)"
        elif self.scope != "tile":
            why = "solver.scope 'tile' (a second solve per tile)"
        elif not self.caps_ground:
            why = "solver.cap_ground true (or leave it out)"
        elif self.ground_floor is not None:
            why = "solver.floor_ground 0 (or leave it out): the second solve lifts the ground"
        if why is not None:
            raise ValueError(f"solver.shadow_free_fill: set it false, or set {why}")

    @property
    def layers(self) -> tuple[str, ...]:
        """The solved layers a tile writes (:func:`cloudcore.catalog.layers`), and with
        ``shadow_free_fill`` a shadow layer: the second solve's ground less the first's, so that
        D = clear + cloud + haze − shadow as the shadow model writes it."""
        own = layers(self.method, self.refines)
        return (*own, SHADOW_LAYER) if self.shadow_free_fill else own

    @property
    def refines(self) -> bool:
        """Whether each tile's decomposition is refined (:func:`cloudcore.refine`)."""
        return self.refine

    @property
    def caps_ground(self) -> bool:
        """Whether the solve's ground is capped at each pixel's median date
        (:func:`cloudcore.cap_ground`): ``cap_ground``, or left out, for the additive methods."""
        if self.cap_ground is None:
            return self.method in ADDITIVE_METHODS
        return self.cap_ground

    @property
    def ground_floor(self) -> float | None:
        """The quantile of its dates each pixel's ground is raised to
        (:func:`cloudcore.cap_ground`'s ``floor``), or None: ``floor_ground``, 0 for none, or
        left out :data:`cloudcore.catalog.GROUND_FLOOR` where the ground is capped and the solve
        has no shadow layer."""
        if self.floor_ground is None:
            shadow_layer = self.refine or self.method in SHADOW_METHODS
            return GROUND_FLOOR if self.caps_ground and not shadow_layer else None
        return self.floor_ground or None

    def spell_options(self, dump: dict[str, Any]) -> dict[str, Any]:
        """``dump``, this solver's ``model_dump``, with ``floor_ground`` as it takes effect
        (:attr:`ground_floor`) and left out where there is no floor, and ``shadow_free_fill``
        left out where it is off (spelt as before the keys existed, so the tile ids and the batch
        hash of earlier runs stay the same) and spelt as the second solve's settings
        (:data:`FILL_SOLVE`) where it is on."""
        dump.pop("floor_ground", None)
        if self.ground_floor is not None:
            dump["floor_ground"] = self.ground_floor
        dump.pop("shadow_free_fill", None)
        if self.shadow_free_fill:
            dump["shadow_free_fill"] = dict(FILL_SOLVE)
        return dump

    @field_validator("lam", mode="before")
    @classmethod
    def _lam_rule_or_number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected 'auto', 'star' or a positive number")
        if isinstance(value, int | float):
            if not math.isfinite(value) or value <= 0:
                raise ValueError("expected 'auto', 'star' or a positive number")
            return float(value)
        if value not in ("auto", "star"):
            raise ValueError("expected 'auto', 'star' or a positive number")
        return value
