"""Shared fixtures of the pipeline tests: small simulated series (session-scoped, written
once) and a worker-process cluster per module.

``gf4_products`` and ``geotiff_series`` are also meant for end-to-end tests of other modules.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from distributed import LocalCluster

from pipeline.inputs.synthetic import SimulatedProducts, make_geotiff_series, make_gf4_series


@pytest.fixture(scope="session")
def gf4_products(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """7 GF-4-like PMS product directories, 192² pixels, moving clouds."""
    return make_gf4_series(tmp_path_factory.mktemp("gf4_products"), n_dates=7, size=192, seed=1)


@pytest.fixture(scope="session")
def geotiff_series(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """5 georeferenced uint16 GeoTIFFs (EPSG:32650), 128² pixels, moving clouds."""
    return make_geotiff_series(
        tmp_path_factory.mktemp("geotiff_series"), n_dates=5, size=128, seed=2
    )


@pytest.fixture(scope="session")
def gf4_clear(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """3 cloud-free GF-4-like products, 128² pixels: geometry can be checked exactly."""
    return make_gf4_series(
        tmp_path_factory.mktemp("gf4_clear"),
        n_dates=3,
        size=128,
        seed=3,
        cloud_style="none",
        shift_px=4.0,
    )


@pytest.fixture(scope="session")
def gf4_pmi_archives(tmp_path_factory: pytest.TempPathFactory) -> SimulatedProducts:
    """2 PMI products (PMS + IRS files) as .tar.gz archives, 128² pixels."""
    return make_gf4_series(
        tmp_path_factory.mktemp("gf4_pmi"),
        n_dates=2,
        size=128,
        seed=4,
        sensor="PMI",
        archive=True,
        cloud_style="none",
    )


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A 2-worker-process cluster shared by the runs of one module (``cluster.kind: address``)."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def unanswered_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler that does not answer is reported after 2 s, not the run's 10: nothing
    listens at the address these tests give."""
    monkeypatch.setattr("pipeline.cluster.client.CONNECT_TIMEOUT_S", 2)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network: a schema the validator would download instead of using the vendored copy
    makes the test fail, whatever network the machine has."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("network use in an offline test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
