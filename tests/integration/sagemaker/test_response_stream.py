"""The response stream, sync (boto3) and async (SigV4 + aiohttp), against a fake speaking the real framing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import boto3
import pytest
from botocore.credentials import Credentials

from gemmaserve.errors import AwsError, EndpointNotFound, ModelStreamFailed
from gemmaserve.sagemaker.operations.runtime import (
    chat_body,
    invoke_stream,
    iter_sse_data,
    iter_stream_text,
    stream_invoke,
)
from tests.support.sagemaker.eventstream_fake import (
    FakeRuntime,
    Script,
    encode_frame,
    exception_frame,
    payload_part,
    sse_chunk,
)

REGION = "us-east-1"
WORDS = ["Hel", "lo", ", ", "wor", "ld"]


def good_script(name: str, body: dict[str, Any]) -> Script:
    sse = b"".join(sse_chunk(word) for word in WORDS) + b"data: [DONE]\n\n"
    # Split the SSE bytes across PayloadParts at awkward places, and the frames across writes.
    parts = [sse[:7], sse[7:50], sse[50:]]
    frames = b"".join(payload_part(part) for part in parts)
    return Script(pieces=[frames[:5], frames[5:40], frames[40:]])


def collect(fake: FakeRuntime, name: str = "gemma4-t4", credentials: Any = None) -> list[bytes]:
    creds = credentials or Credentials("AKIDTEST", "secret", "token")

    async def run() -> list[bytes]:
        async with aiohttp.ClientSession() as http:
            return [
                part
                async for part in stream_invoke(
                    http, lambda: creds, name, REGION, chat_body("hi", stream=True), endpoint_url=fake.url
                )
            ]

    return asyncio.run(run())


def test_async_stream_yields_payload_bytes_in_order(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = good_script
    parts = collect(fake_runtime)
    assert len(parts) == 3
    assert "".join(iter_stream_text(parts)) == "Hello, world"
    request = fake_runtime.requests[0]
    assert request["path"] == "/endpoints/gemma4-t4/invocations-response-stream"
    assert request["body"]["stream"] is True
    auth = request["headers"]["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
    assert f"/{REGION}/sagemaker/aws4_request" in auth
    assert "host" in auth and "x-amz-date" in auth
    assert request["headers"]["X-Amz-Security-Token"] == "token"
    assert request["headers"]["X-Amzn-SageMaker-Accept"] == "application/json"


def test_credentials_provider_is_called_per_request(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = good_script
    collect(fake_runtime, credentials=Credentials("AKIDONE", "s"))
    collect(fake_runtime, credentials=Credentials("AKIDTWO", "s"))
    keys = [r["headers"]["Authorization"].split("Credential=")[1].split("/")[0] for r in fake_runtime.requests]
    assert keys == ["AKIDONE", "AKIDTWO"]


@pytest.mark.parametrize(("kind", "code"), [("ModelStreamError", "ModelError"), ("InternalStreamFailure", None)])
def test_error_event_mid_stream_raises_after_earlier_parts(
    fake_runtime: FakeRuntime, kind: str, code: str | None
) -> None:
    fake_runtime.script = lambda n, b: Script(
        pieces=[payload_part(sse_chunk("a")), exception_frame(kind, "container died", code), payload_part(b"never")]
    )
    received: list[bytes] = []

    async def run() -> None:
        async with aiohttp.ClientSession() as http:
            async for part in stream_invoke(
                http, lambda: Credentials("a", "b"), "e1", REGION, {"messages": []}, endpoint_url=fake_runtime.url
            ):
                received.append(part)

    with pytest.raises(ModelStreamFailed) as info:
        asyncio.run(run())
    assert received == [sse_chunk("a")]
    assert info.value.fields["aws_error_code"] == kind
    assert "container died" in info.value.message


def test_error_message_type_raises(fake_runtime: FakeRuntime) -> None:
    frame = encode_frame({":message-type": "error", ":error-code": "Throttled", ":error-message": "slow down"}, b"")
    fake_runtime.script = lambda n, b: Script(pieces=[frame])
    with pytest.raises(ModelStreamFailed, match="Throttled: slow down"):
        collect(fake_runtime)


def test_corrupt_crc_is_refused(fake_runtime: FakeRuntime) -> None:
    frame = bytearray(payload_part(b"data: x\n\n"))
    frame[-1] ^= 0xFF
    fake_runtime.script = lambda n, b: Script(pieces=[bytes(frame)])
    with pytest.raises(ModelStreamFailed) as info:
        collect(fake_runtime)
    assert info.value.fields["aws_error_code"] == "MalformedEventStream"


def test_corrupt_prelude_is_refused(fake_runtime: FakeRuntime) -> None:
    frame = bytearray(payload_part(b"data: x\n\n"))
    frame[2] ^= 0x01
    fake_runtime.script = lambda n, b: Script(pieces=[bytes(frame)])
    with pytest.raises(ModelStreamFailed, match="malformed"):
        collect(fake_runtime)


def test_stream_cut_inside_a_frame_is_an_error(fake_runtime: FakeRuntime) -> None:
    frame = payload_part(b"data: x\n\n")
    fake_runtime.script = lambda n, b: Script(pieces=[payload_part(b"ok"), frame[:-6]])
    with pytest.raises(ModelStreamFailed) as info:
        collect(fake_runtime)
    assert info.value.fields["aws_error_code"] == "TruncatedEventStream"


def test_unknown_message_type_is_refused(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = lambda n, b: Script(pieces=[encode_frame({":message-type": "weird"}, b"")])
    with pytest.raises(ModelStreamFailed, match="unknown type"):
        collect(fake_runtime)


def test_http_error_maps_to_endpoint_not_found(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = lambda n, b: Script(
        status=400,
        error_type="ValidationError:http://internal.amazon.com/coral/com.amazon.coral.validate/",
        error_body={"message": "Endpoint gone of account 123456789012 not found."},
    )
    with pytest.raises(EndpointNotFound) as info:
        collect(fake_runtime, name="gone")
    assert info.value.fields["request_id"] == "req-err-1"
    assert info.value.fields["region"] == REGION


def test_model_error_maps_to_aws_error(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = lambda n, b: Script(
        status=424, error_type="ModelError", error_body={"message": "Received server error (500) from primary"}
    )
    with pytest.raises(AwsError) as info:
        collect(fake_runtime)
    assert info.value.fields["aws_error_code"] == "ModelError"


def test_sync_stream_through_boto3_parses_the_same_frames(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = good_script
    client = boto3.client("sagemaker-runtime", region_name=REGION, endpoint_url=fake_runtime.url)
    parts = list(invoke_stream(client, "gemma4-t4", chat_body("hi"), region=REGION))
    client.close()
    assert "".join(iter_stream_text(parts)) == "Hello, world"
    assert json.loads(json.dumps(fake_runtime.requests[0]["body"]))["stream"] is True


def test_sync_stream_error_event_raises(fake_runtime: FakeRuntime) -> None:
    fake_runtime.script = lambda n, b: Script(pieces=[payload_part(b"x"), exception_frame("ModelStreamError", "boom")])
    client = boto3.client("sagemaker-runtime", region_name=REGION, endpoint_url=fake_runtime.url)
    with pytest.raises(ModelStreamFailed, match="boom"):
        list(invoke_stream(client, "gemma4-t4", chat_body("hi"), region=REGION))
    client.close()


def test_sse_parsing_is_independent_of_chunking() -> None:
    raw = b"data: a\n\n: comment\ndata: b\r\n\ndata: [DONE]\n\n"
    for cut in range(len(raw)):
        assert list(iter_sse_data([raw[:cut], raw[cut:]])) == ["a", "b", "[DONE]"]


def test_session_provider_refreshes_expiring_credentials(fake_runtime: FakeRuntime) -> None:
    from datetime import UTC, datetime, timedelta

    import botocore.session
    from botocore.credentials import RefreshableCredentials

    from gemmaserve.sagemaker.aws import credentials_provider_from_session

    issued: list[str] = []

    def refresh() -> dict[str, str]:
        key = f"AKIDREFRESH{len(issued)}"
        issued.append(key)
        # Each set expires at once, so the next signing must fetch a new one.
        return {
            "access_key": key,
            "secret_key": "s",
            "token": "t",
            "expiry_time": (datetime.now(UTC) + timedelta(seconds=1)).isoformat(),
        }

    session = botocore.session.Session()
    session._credentials = RefreshableCredentials.create_from_metadata(
        metadata=refresh(), refresh_using=refresh, method="test"
    )
    provider = credentials_provider_from_session(session)
    fake_runtime.script = good_script
    collect(fake_runtime, credentials=provider())
    collect(fake_runtime, credentials=provider())
    used = [r["headers"]["Authorization"].split("Credential=")[1].split("/")[0] for r in fake_runtime.requests]
    assert used[0] != used[1] and all(key.startswith("AKIDREFRESH") for key in used)
