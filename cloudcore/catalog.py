"""What cloudcore offers, in one place that imports nothing: its methods, the layers each writes
and the mask's defaults.

The solvers (:mod:`cloudcore.solvers`, :mod:`cloudcore.scene`), the mask (:mod:`cloudcore.masks`)
and the pipeline's configuration and output layout all read these names from here. This module
imports no numba and no numpy, so that reading a run's configuration or laying out its output
folder does not pay for compiling a solver (``import cloudcore.catalog`` loads only this file
and the package's lazy ``__init__``).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ADDITIVE_METHODS",
    "GROUND_FLOOR",
    "HAZE_METHODS",
    "LAYERS",
    "MASK_BRIGHT_LEVEL",
    "MASK_CLOUD",
    "MASK_EDGE_REACH",
    "MASK_EVERY_BAND",
    "MASK_FLAT_RATIO",
    "MASK_FLAT_REACH",
    "MASK_GROW",
    "MASK_HAZE",
    "MASK_INTERPOLATE",
    "MASK_LEVEL_BELOW",
    "MASK_NEAR_REACH",
    "MASK_OFFSET",
    "MASK_PERSIST",
    "MASK_PERSIST_COVER",
    "MASK_PERSIST_REACH",
    "MASK_PERSIST_SPILL",
    "MASK_RADIUS",
    "MASK_SHADOW",
    "MASK_SHADOW_EDGE",
    "MASK_SHADOW_FLAT",
    "MASK_SHADOW_NEAR",
    "MASK_WHITE",
    "MASK_WHITE_CLOUD",
    "MASK_WHITE_CLOUD_RATIO",
    "METHODS",
    "SCENE_METHODS",
    "SHADOW_LAYER",
    "SHADOW_METHODS",
    "SHADOW_WEIGHT",
    "Method",
    "layers",
    "writes_haze",
]

#: A decomposition method of :func:`cloudcore.decompose` (the type a configuration validates).
Method = Literal["aatm", "aatm-shadow", "rpca", "nnrpca", "atm"]
#: Every method, in the order the documentation lists them.
METHODS: tuple[str, ...] = get_args(Method)
#: Methods with a haze layer N (weight β).
HAZE_METHODS: tuple[str, ...] = ("aatm", "aatm-shadow")
#: Methods with a shadow layer S (:attr:`cloudcore.Decomposition.S`): D = L + C − S + N.
SHADOW_METHODS: tuple[str, ...] = ("aatm-shadow",)
#: Methods that the block-wise solver (:func:`cloudcore.scene.solve_blocks`, scene scope) runs:
#: ATM's inner loop takes many SVTs per iteration and is not offered there.
SCENE_METHODS: tuple[str, ...] = ("aatm", "aatm-shadow", "rpca", "nnrpca")

#: κ, the weight of the shadow layer's ℓ1 penalty relative to the cloud's (aATM-shadow): see
#: :func:`cloudcore.solvers.sparse_rule`; chosen from the real-cloud and simulated scores
#: (docs/REAL-CLOUDS.md).
SHADOW_WEIGHT = 4.0

#: The solved layers every method writes, in the order they are stacked: the ground clipped to
#: [0, 1] ("clear"), the cloud C and the haze N.
LAYERS: tuple[str, ...] = ("clear", "cloud", "haze")
#: The layer written after :data:`LAYERS` by the shadow model and by a refined solve.
SHADOW_LAYER = "shadow"
_WITH_SHADOW = (*LAYERS, SHADOW_LAYER)

#: The mask's thresholds (:class:`cloudcore.MaskRule`) in units of the scene's anomaly scale σ:
#: cloud, haze and shadow; the radius in pixels of the opening that removes specks; and the
#: pixels by which cloud and shadow grow. Chosen with the default solver by leave-one-site-out
#: on five real cloudy series (docs/REAL-CLOUDS.md, ``python -m cloudlab heldout``).
MASK_CLOUD = 6.0
MASK_HAZE = 6.0  # = cloud: no haze class (haze kept as observed scored the same, worse F1)
MASK_SHADOW = 3.0
MASK_RADIUS = 0
MASK_GROW = 0
#: The whiteness test (:class:`cloudcore.masks.Whiteness`): brightening counts as cloud or haze
#: only where the shortest band brightened by at least this fraction of the band that brightened
#: most; 0: no test. Chosen by leave-one-site-out in a second stage, given the rest (0.2), then
#: with the white clouds below in a third (0.25; :func:`cloudlab.heldout.choose`).
MASK_WHITE = 0.25
#: White clouds at a lower threshold (:func:`cloudcore.masks.classify_scores`): a brightening
#: whose shortest band brightened by at least :data:`MASK_WHITE_CLOUD_RATIO` of the most any band
#: did (flat, as a cloud's) is cloud from this many σ; 0: off (every cloud needs ``cloud`` σ).
#: Chosen by leave-one-site-out in a third stage, given the rest (docs/REAL-CLOUDS.md, "White
#: clouds").
MASK_WHITE_CLOUD = 3.0
MASK_WHITE_CLOUD_RATIO = 0.7
#: Every band brightened (:class:`cloudcore.masks.Whiteness`): brightening counts as cloud or
#: haze only where every band brightened by at least this fraction of the band that brightened
#: most; 0: no test. Under the scattering model D = L∘(1 − C) + C a cloud brightens band b by
#: C(1 − L_b), so every band of a land pixel about alike; the ground's own changes (spring melt,
#: a field laid bare) brighten some bands and leave others or darken them. Measured held out,
#: not adopted (docs/REAL-CLOUDS.md, "Every band brightened").
MASK_EVERY_BAND = 0.0
#: A shadow's edge (:func:`cloudcore.masks.classify_scores`): a shadow extends into the pixels
#: next to it darkened by at least this many σ, one pixel a step, up to
#: :data:`MASK_EDGE_REACH` pixels from where it reached the shadow threshold; 0: no edges. A
#: shadow's penumbra and the dimmer parts of it are darkened less than its core. Chosen in a
#: third stage by leave-one-site-out, given the rest (``benchmarks/mask_stage.py
#: shadow-edge``): not adopted, off.
MASK_SHADOW_EDGE = 0.0
MASK_EDGE_REACH = 3
#: A shadow beside its cloud (:func:`cloudcore.masks.classify_scores`): a pixel darker than
#: its date around it (:func:`cloudcore.masks.darkening_level`) by at least this many σ and
#: within :data:`MASK_NEAR_REACH` pixels of a cloud of the same date is shadow; 0: off. A cloud
#: casts its shadow on its own date, a little way off along the sun's azimuth (Fmask pairs the
#: two for the same reason); a darkening far from every cloud is more likely the ground's own
#: change. Chosen in a fourth stage by leave-one-site-out, given the rest (``benchmarks/
#: mask_stage.py shadow-near``; docs/REAL-CLOUDS.md, "A shadow beside its cloud").
MASK_SHADOW_NEAR = 1.5
MASK_NEAR_REACH = 16
#: A shadow dark in every band (:func:`cloudcore.masks.classify_scores`): an entry the rest of
#: the rule calls clear, within :data:`MASK_FLAT_REACH` pixels of a cloud of its date, whose
#: bands are darkened below the pixel's median ground by at least this many σ on their mean
#: and each to at most :data:`MASK_FLAT_RATIO` of it, is shadow; 0: off. A shadow takes the
#: direct sunlight away and leaves the sky's, so it darkens every band by a large factor; the
#: median ground is what the pixel is on most dates, so a ground that took the shadow in
#: (a low-rank fit follows a date shadowed over most of the frame) does not hide it. Chosen
#: by leave-one-site-out in a stage of its own (``benchmarks/mask_stage.py shadow-flat``;
#: docs/REAL-CLOUDS.md, "A shadow dark in every band"): every fold took 3σ within 32 px.
MASK_SHADOW_FLAT = 3.0
MASK_FLAT_RATIO = 0.8
MASK_FLAT_REACH = 32
#: A date's brightening level (:func:`cloudcore.masks.classify_scores`): before the
#: thresholds, each entry's brightening less the mean brightening of the entries of its date
#: within this many pixels (a square) that are brightened by less than
#: :data:`MASK_LEVEL_BELOW` σ; 0: off. A date brighter across the scene than the ground (a
#: hazier day, a composite's other acquisition, the season) is not cloud where it is no
#: brighter than around it. Measured in a fifth stage by leave-one-site-out
#: (``benchmarks/mask_stage.py bright-level``; docs/REAL-CLOUDS.md, "A date's brightening
#: level"): not adopted, off (the fold that took it counting up to 6σ missed the one-row
#: transect's thin clouds).
MASK_BRIGHT_LEVEL = 0
MASK_LEVEL_BELOW = 3.0
#: Ground that stays (:func:`cloudcore.masks.persistent_ground`): a brightening flagged as cloud
#: or haze is ground where, around it (a square of half-width :data:`MASK_PERSIST_REACH`), at
#: least :data:`MASK_PERSIST_COVER` of the flagged pixels are brightened by at least this
#: fraction of their own brightening on the nearest acquisition of another day before and after,
#: and at most :data:`MASK_PERSIST_SPILL` of the unflagged pixels are cloud-bright there; 0: off.
#: A field laid bare or a patch of snow keeps its place and shape from day to day; a cloud does
#: not. Chosen by every fold in a fifth stage held out (0.3: clear pixels of two sites kept
#: better, r unchanged) but off: it also keeps a cloud that recurs in place from day to day
#: (valley fog, a cloud held by a ridge), which the benchmark's pasted clouds never do, and on
#: the references it keeps pixels of dates cloudy throughout (docs/REAL-CLOUDS.md, "Ground
#: that stays").
#: It needs acquisitions of other days: a series of one day is classified as without it.
MASK_PERSIST = 0.0
MASK_PERSIST_REACH = 8
MASK_PERSIST_COVER = 0.5
MASK_PERSIST_SPILL = 0.5

#: The quantile of its dates each pixel's capped ground is raised to by default (the pipeline's
#: ``solver.floor_ground`` left out, for the methods that cap and have no shadow layer;
#: :func:`cloudcore.cap_ground`'s ``floor``); None: no floor (docs/REAL-CLOUDS.md, "Shadows:
#: the ground floored").
GROUND_FLOOR: float | None = None
#: The scale in pixels over which a date's departure from the ground is spread from the pixels
#: kept as observed into those filled with the ground (:mod:`cloudcore.offset`); chosen with the
#: mask by leave-one-site-out.
MASK_OFFSET = 8.0
#: Whether the ground written is first raised by the pixel's own departure from it on its
#: nearest kept dates before and after, interpolated in time (:mod:`cloudcore.departure`);
#: chosen with the mask by leave-one-site-out (a sixth stage).
MASK_INTERPOLATE = True
#: The methods whose layers add up to the residual, D − L = C + N − S (:mod:`cloudcore.offset`
#: reads it from them); ATM's C is an opacity, D − L = C∘(1 − L).
ADDITIVE_METHODS: tuple[str, ...] = ("aatm", "aatm-shadow", "rpca", "nnrpca")


def layers(method: str, refine: bool = False) -> tuple[str, ...]:
    """The solved layers a solve of ``method`` writes.

    Parameters
    ----------
    method
        One of :data:`METHODS`.
    refine
        Whether the solve is refined (:func:`cloudcore.refine` splits its residual into cloud
        above the ground and shadow below it).

    Returns
    -------
    tuple of str
        :data:`LAYERS`, then :data:`SHADOW_LAYER` for the shadow model and for a refined solve.
    """
    return _WITH_SHADOW if refine or method in SHADOW_METHODS else LAYERS


def writes_haze(method: str, refine: bool = False) -> bool:
    """Whether a solve of ``method`` can write a non-zero haze N on an observed entry.

    Only the methods with a haze layer (:data:`HAZE_METHODS`) do, and only unrefined: the others
    leave N at 0, and the refinement rewrites it as 0 (NaN on pixels observed on no date). A
    mask built from the layers therefore reads no haze for them.

    Parameters
    ----------
    method
        One of :data:`METHODS`.
    refine
        Whether the solve is refined (:func:`cloudcore.refine`).
    """
    return method in HAZE_METHODS and not refine
