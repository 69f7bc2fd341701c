"""SageMaker fixtures: moto in-process and through its real HTTP server, and a fake runtime stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sagemaker.eventstream_fake import FakeRuntime, Script, start_fake_runtime


@pytest.fixture
def fake_runtime() -> Iterator[FakeRuntime]:
    runtime = FakeRuntime(script=lambda name, body: Script())
    stop = start_fake_runtime(runtime)
    try:
        yield runtime
    finally:
        stop()


@pytest.fixture(scope="session")
def moto_server_url() -> Iterator[str]:
    """moto's real HTTP server on 127.0.0.1 (one per test session; tests use distinct names)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def moto_factory(moto_server_url: str) -> Iterator[Any]:
    """A ClientFactory pointed at the moto server."""
    import urllib.request

    from gemmaserve.sagemaker.aws import Boto3ClientFactory

    # One server for the session: wipe its state so each test starts from an empty account.
    urllib.request.urlopen(urllib.request.Request(moto_server_url + "/moto-api/reset", method="POST"), timeout=10)
    factory = Boto3ClientFactory(endpoint_url=moto_server_url)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def aws_env(moto_factory: Any, moto_server_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """gemmaserve's AWS clients pointed at moto's server, for tests that go through the CLI."""
    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", moto_server_url)
    return moto_factory
