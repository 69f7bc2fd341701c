"""No test can reach real AWS: a client built without an endpoint override fails at once."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from botocore.exceptions import HTTPClientError

from gemmaserve.sagemaker.aws import Boto3ClientFactory


def test_a_client_without_endpoint_override_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMASERVE_AWS_ENDPOINT_URL", raising=False)
    factory = Boto3ClientFactory()
    assert factory.endpoint_url is None
    resolved: list[str] = []
    connected: list[Any] = []
    guarded_resolve, guarded_connect = socket.getaddrinfo, socket.socket.connect

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        resolved.append(host)
        return guarded_resolve(host, *args, **kwargs)

    def connect(sock: socket.socket, address: Any) -> None:
        connected.append(address)
        guarded_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", connect)
    client = factory("sagemaker", "us-east-1")
    with pytest.raises(HTTPClientError, match="only loopback is allowed"):
        client.list_endpoints()
    # Each attempt of the retry budget is refused at name resolution: no connection is begun, so no
    # connect timeout (10 s an attempt) is ever waited out.
    assert connected == []
    attempts = client.meta.config.retries["total_max_attempts"]
    assert resolved == ["api.sagemaker.us-east-1.amazonaws.com"] * attempts


def test_the_runtime_client_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMASERVE_AWS_ENDPOINT_URL", raising=False)
    with pytest.raises(HTTPClientError, match="only loopback is allowed"):
        Boto3ClientFactory()("sagemaker-runtime", "eu-west-1").invoke_endpoint(EndpointName="e", Body=b"{}")
