"""D as the 16-bit DN it was staged from: scene scope's compact state (:mod:`cloudcore.scene`).

Staging writes a copied pixel's value as float32(DN) / float32(max_dn) (``pipeline.stage.
values``). Where every observed value of a block is such a quotient, the block can hold the DN
(2 bytes) instead of the value (4), and the kernels divide it back with the same float32
division (``cloudcore._kernels.block_values``): the same bits. Resampled values (GF-4's RPC
warp) and calibrated ones are not quotients and stay float32.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dn_values", "values_of_dn"]


def values_of_dn(dn: np.ndarray, max_dn: float) -> np.ndarray:
    """The float32 values of uint16 ``dn``: float32(DN) / float32(max_dn), as staging writes
    them (the compiled kernels do the same, ``cloudcore._kernels.block_values``).

    Parameters
    ----------
    dn
        The DN, any shape.
    max_dn
        The DN scale.

    Returns
    -------
    numpy.ndarray
        float32 of ``dn``'s shape, a new array.
    """
    values = dn.astype(np.float32)
    values /= np.float32(max_dn)
    return values


def dn_values(x: np.ndarray, obs: np.ndarray, max_dn: float) -> np.ndarray | None:
    """``x`` (float32 where ``obs``) as the uint16 DN whose float32(DN) / float32(max_dn) is
    each observed value bit for bit (as ``pipeline.stage.values`` staged it), 0 where not
    observed; None where some value is not such a quotient (resampled or calibrated values).

    Parameters
    ----------
    x
        The values, any shape.
    obs
        True where observed, same shape.
    max_dn
        The DN scale, in (0, 65535].

    Returns
    -------
    numpy.ndarray or None
        uint16 of ``x``'s shape, or None.
    """
    if not 0 < max_dn <= np.iinfo(np.uint16).max:
        return None
    values = np.where(obs, x, 0.0).astype(np.float32, copy=False)
    dn = np.multiply(values, max_dn, dtype=np.float64)
    np.rint(dn, out=dn)
    if dn.min(initial=0.0) < 0 or dn.max(initial=0.0) > max_dn:
        return None
    dn16 = dn.astype(np.uint16)
    del dn
    back = values_of_dn(dn16, max_dn)
    # Bit for bit: -0.0 is not 0.0 here (the float path would keep its sign).
    if not np.array_equal(back.view(np.uint32), values.view(np.uint32)):
        return None
    return dn16
