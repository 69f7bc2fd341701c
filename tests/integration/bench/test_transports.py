"""Both transports against the real mock server on 127.0.0.1: shapes, every fault kind, no retries."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from gemmaserve.bench.engine import Outcome, run_request
from gemmaserve.bench.transports import (
    ChatRequest,
    HttpTransport,
    SageMakerTransport,
    TargetSpec,
    Transport,
    parse_target,
)
from gemmaserve.errors import UsageError
from gemmaserve.testing.runner import ThreadedMockServer, fetch_json


def _frozen_credentials() -> Any:
    from botocore.credentials import Credentials

    return Credentials("testing", "testing", "testing").get_frozen_credentials()


def _transport(kind: str, url: str, timeout_s: float) -> Transport:
    if kind == "http":
        return HttpTransport(url, timeout_s=timeout_s)
    spec = TargetSpec(
        "sagemaker://gemma-test?region=us-east-1", "sagemaker", endpoint_name="gemma-test", region="us-east-1",
        endpoint_url=url,
    )  # fmt: skip
    return SageMakerTransport(spec, credentials_provider=_frozen_credentials, timeout_s=timeout_s)


def _one(kind: str, url: str, request: ChatRequest, *, timeout_s: float = 5.0) -> Outcome:
    async def go() -> Outcome:
        transport = _transport(kind, url, timeout_s)
        try:
            return await run_request(transport, "r", request, clock=time.perf_counter, timeout_s=timeout_s)
        finally:
            await transport.aclose()

    return asyncio.run(go())


def test_parse_target() -> None:
    http = parse_target("http://127.0.0.1:8000/")
    assert (http.kind, http.base_url) == ("http", "http://127.0.0.1:8000")
    sm = parse_target("sagemaker://gemma4-t4?region=eu-west-1&endpoint_url=http://127.0.0.1:9")
    assert (sm.kind, sm.endpoint_name, sm.region, sm.endpoint_url) == (
        "sagemaker",
        "gemma4-t4",
        "eu-west-1",
        "http://127.0.0.1:9",
    )
    for bad in ["ftp://x", "sagemaker://name", "http://", "127.0.0.1:8000"]:
        with pytest.raises(UsageError):
            parse_target(bad)


@pytest.mark.parametrize("kind", ["http", "sagemaker"])
def test_full_reply_with_usage(kind: str, mock_server: ThreadedMockServer) -> None:
    outcome = _one(kind, mock_server.url, ChatRequest("hello there", 12, ignore_eos=True))
    assert outcome.success, outcome.detail
    m = outcome.metrics
    assert m is not None and m.output_tokens == 12 and m.usage_reported and m.content_chunks == 12
    assert m.text.split() == [f"t{i}" for i in range(1, 13)]
    assert m.ttft_s is not None and m.ttft_s >= 0.002  # the server's TTFT is a floor
    assert m.finish_reason == "length" and m.prompt_tokens == 2


def test_http_discovers_the_served_model(mock_server: ThreadedMockServer) -> None:
    async def go() -> tuple[str | None, str | None]:
        transport = HttpTransport(mock_server.url)
        try:
            return await transport.discover_model(), await transport.get_text("/metrics")
        finally:
            await transport.aclose()

    model, metrics = asyncio.run(go())
    assert model == "mock-model" and metrics is not None and "vllm:cache_config_info" in metrics


HTTP_FAULTS = {
    "http_500": "http_500",
    "http_429": "http_429",
    "disconnect": "truncated_stream",
    "truncated": "truncated_stream",
    "malformed_sse": "malformed_sse",
    "error_event": "malformed_sse",
    "short_reply": "short_reply",
}

SAGEMAKER_FAULTS = {
    "http_500": "sagemaker_ModelError",
    "http_429": "sagemaker_ThrottlingException",
    "model_stream_error": "sagemaker_ModelStreamError",
    "malformed_frame": "sagemaker_MalformedEventStream",
    "malformed_sse": "malformed_sse",
    "short_reply": "short_reply",
}

FAULTS = [
    *(("http", fault, reason) for fault, reason in sorted(HTTP_FAULTS.items())),
    *(("sagemaker", fault, reason) for fault, reason in sorted(SAGEMAKER_FAULTS.items())),
]


@pytest.mark.parametrize(("transport", "fault", "reason"), FAULTS)
def test_faults_become_reasons(transport: str, fault: str, reason: str, mock_server: ThreadedMockServer) -> None:
    mock_server.configure(fault=fault)
    outcome = _one(transport, mock_server.url, ChatRequest("p", 10, ignore_eos=True))
    assert outcome.reason == reason, outcome.detail
    if transport == "http" and fault in ("disconnect", "truncated", "short_reply"):
        assert outcome.metrics is not None and outcome.metrics.content_chunks == 5  # the half that arrived


@pytest.mark.parametrize("fault", ["timeout", "stall"])
def test_hanging_server_times_out(fault: str, mock_server: ThreadedMockServer) -> None:
    # After its hang the server finishes the reply: only the client's own timeout makes this a "timeout".
    mock_server.configure(fault=fault, hang_s=5.0)
    outcome = _one("http", mock_server.url, ChatRequest("p", 10), timeout_s=0.3)
    assert outcome.reason == "timeout"


def test_no_usage_falls_back_to_counting_chunks(mock_server: ThreadedMockServer) -> None:
    mock_server.configure(fault="no_usage")
    outcome = _one("http", mock_server.url, ChatRequest("p", 10, ignore_eos=True))
    assert outcome.success and outcome.metrics is not None
    assert not outcome.metrics.usage_reported and outcome.metrics.output_tokens == 10


def test_fault_every_hits_only_every_nth_and_nothing_is_retried(mock_server: ThreadedMockServer) -> None:
    mock_server.configure(fault="http_500", fault_every=3)
    reasons = [_one("http", mock_server.url, ChatRequest("p", 2)).reason for _ in range(6)]
    assert reasons == [None, None, "http_500", None, None, "http_500"]
    assert mock_server.server.stats.finished == 4  # four streams; the two 500s were not retried


def test_connection_refused_is_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port now
    outcome = _one("http", f"http://127.0.0.1:{port}", ChatRequest("p", 2))
    assert outcome.reason == "connect_error"


def test_sagemaker_requests_are_signed(mock_server: ThreadedMockServer) -> None:
    mock_server.configure(record=True)
    assert _one("sagemaker", mock_server.url, ChatRequest("p", 3, ignore_eos=True)).success
    record = fetch_json(mock_server.url + "/mock/requests")[-1]
    assert record["tokens"] == 3 and record["signed"] is True
