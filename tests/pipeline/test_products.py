"""The stored form of the clear ground in the uint16 COGs."""

from __future__ import annotations

import numpy as np

from pipeline.products import _encode


def test_uint16_is_rounded_dn_with_zero_kept_for_nodata() -> None:
    clear = np.array(
        [[np.nan, np.inf, -np.inf, -0.5, 0.0, 0.0004, 0.25, 0.75, 0.5, 1.0, 1.7]], np.float32
    )
    # max_dn 2: 0.25 → 0.5 and 0.75 → 1.5 round half to even (0 → 1, since 0 is no data; 2).
    dn = _encode(clear, "uint16", 2.0)
    assert dn.dtype == np.uint16
    assert dn.tolist() == [[0, 0, 0, 1, 1, 1, 1, 2, 1, 2, 2]]
    # The same rule at GF-4's 10 bits, against the formula.
    values = np.random.default_rng(0).uniform(-0.1, 1.1, (3, 64, 64)).astype(np.float32)
    expected = np.clip(np.rint(np.clip(values, 0, 1) * np.float32(1023)), 1, 1023)
    assert np.array_equal(_encode(values, "uint16", 1023.0), expected.astype(np.uint16))
    assert np.array_equal(_encode(values, "float32", 1023.0), values)  # stored as it is
