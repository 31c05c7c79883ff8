"""The provider's mask through the pipeline on a real site (``cloudlab.provider``): the real
STAC path (COGs read by odc-stac), a real Dask cluster, Zarr cube."""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed import LocalCluster

from cloudlab.provider import _pooled, score_site


# Two whole pipeline runs through STAC: 72 s of the default suite's 880 s on a slow 2-core
# machine; with the slow tests, which CI runs too (.ci/run).
@pytest.mark.slow
def test_the_provider_s_clouds_are_filled_with_the_ground_as_the_solve_completed_it(
    tmp_path: Path,
) -> None:
    """CBERS-4's Cerrado has a dry season brighter than the pixels' median date. The provider's
    flagged clouds are left out of the solve and filled with its ground; a ground capped at the
    median there (no residual, so no offset gives the season back) filled them as badly as the
    temporal median (measured on these two pairs: 0.240 against the median's 0.307 with the
    cap on every entry; 0.094 with the cap where observed). A fill that is told where the
    clouds are should do far better than a per-pixel median, which is not: at most half its
    error."""
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        rows = score_site("cbers_awfi_022024", tmp_path, cluster.scheduler_address, pairs=2)
    assert all(r["provider_filled"] == 1.0 for r in rows)  # every pasted pixel filled
    provider, median = _pooled(rows, "provider", "pred"), _pooled(rows, "median", "pred")
    assert provider < 0.5 * median, (provider, median)
