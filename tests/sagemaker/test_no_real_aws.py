"""No test can reach real AWS: a client built without an endpoint override fails at once."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import HTTPClientError

from gemmaserve.sagemaker.aws import Boto3ClientFactory


def test_a_client_without_endpoint_override_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMASERVE_AWS_ENDPOINT_URL", raising=False)
    factory = Boto3ClientFactory()
    assert factory.endpoint_url is None
    started = time.monotonic()
    with pytest.raises(HTTPClientError, match="only loopback is allowed"):
        factory("sagemaker", "us-east-1").list_endpoints()
    assert time.monotonic() - started < 5.0  # refused at name resolution, not after retries and timeouts


def test_the_runtime_client_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMASERVE_AWS_ENDPOINT_URL", raising=False)
    with pytest.raises(HTTPClientError, match="only loopback is allowed"):
        Boto3ClientFactory()("sagemaker-runtime", "eu-west-1").invoke_endpoint(EndpointName="e", Body=b"{}")
