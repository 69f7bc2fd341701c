"""Invoke an endpoint: one chat request or its response stream through boto3, or many streams at once (adapter).

The body is an OpenAI chat-completions request; the AWS vLLM container answers
``/invocations`` with the OpenAI response, and streams its SSE bytes inside the
``PayloadPart`` events of ``invoke_endpoint_with_response_stream``.

The benchmark's path (:func:`stream_invoke`) is async: one aiohttp session drives hundreds of
concurrent streams (boto3's threads cannot); botocore still signs each request (credentials
refreshed by the provider) and its own ``EventStreamBuffer`` parses the AWS event-stream frames, so
prelude and CRC checks are the SDK's. It yields ``PayloadPart`` bytes: the container's SSE bytes.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote

from gemmaserve.errors import AwsError, ModelStreamFailed, SageMakerTimedOut
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import call, translate_client_error, translate_error_response
from gemmaserve.sagemaker.spec.container import validate_name


class InvokeResult(ActionResult):
    endpoint_name: str
    region: str
    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    latency_s: float
    invoked_variant: str | None
    response: dict[str, Any]


def chat_body(
    prompt: str, *, model: str | None = None, max_tokens: int = 256, temperature: float = 0.0, stream: bool = False
) -> dict[str, Any]:
    """An OpenAI chat body with one user message; ``stream`` also asks for the usage chunk."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    if model:
        body["model"] = model
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _post_json(region: str, operation: Callable[..., Any], endpoint_name: str, payload: dict[str, Any]) -> Any:
    """``payload`` as a JSON request to the endpoint through ``operation`` (``invoke_endpoint`` or its
    streaming twin), asking for JSON back."""
    return call(
        region,
        operation,
        EndpointName=endpoint_name,
        Body=json.dumps(payload).encode(),
        ContentType="application/json",
        Accept="application/json",
    )


def invoke(
    runtime: Any,
    endpoint_name: str,
    body: dict[str, Any],
    *,
    region: str,
    clock: Callable[[], float] = time.perf_counter,
) -> InvokeResult:
    """One non-streaming request; raises AwsError (``ModelError`` when the container answered non-2xx)."""
    validate_name(endpoint_name)
    payload = dict(body)
    payload.pop("stream", None)
    payload.pop("stream_options", None)
    started = clock()
    response = _post_json(region, runtime.invoke_endpoint, endpoint_name, payload)
    raw = response["Body"].read()
    latency_s = clock() - started
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise AwsError(
            f"Endpoint {endpoint_name!r} answered with a body that is not JSON: {raw[:200]!r}", region=region
        ) from exc
    choice = (document.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    return InvokeResult(
        endpoint_name=endpoint_name,
        region=region,
        text=message.get("content") or choice.get("text") or "",
        finish_reason=choice.get("finish_reason"),
        usage=document.get("usage"),
        latency_s=latency_s,
        invoked_variant=response.get("InvokedProductionVariant"),
        response=document,
    )


def invoke_stream(runtime: Any, endpoint_name: str, body: dict[str, Any], *, region: str) -> Iterator[bytes]:
    """The container's SSE bytes, one ``PayloadPart`` at a time; error events raise ModelStreamFailed."""
    from botocore.exceptions import ClientError

    validate_name(endpoint_name)
    payload = {**body, "stream": True}
    response = _post_json(region, runtime.invoke_endpoint_with_response_stream, endpoint_name, payload)
    body_stream = response["Body"]
    try:
        for event in body_stream:
            if "PayloadPart" in event:
                yield event["PayloadPart"].get("Bytes", b"")
            else:
                kind, detail = next(iter(event.items()))
                raise ModelStreamFailed(
                    f"Endpoint {endpoint_name!r} stream failed: {kind}: {detail.get('Message')}",
                    aws_error_code=kind,
                    region=region,
                )
    except ClientError as exc:  # botocore raises EventStreamError (a ClientError) for exception events
        error = translate_client_error(exc, region=region, operation="InvokeEndpointWithResponseStream")
        raise ModelStreamFailed(
            f"Endpoint {endpoint_name!r} stream failed: {error.message}",
            hint="Read the container log: gemmaserve sagemaker logs " + endpoint_name,
            **error.fields,
        ) from exc
    finally:
        body_stream.close()


def iter_sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The ``data:`` payloads of an SSE byte stream, whatever the chunk boundaries (pure)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            text = line.rstrip(b"\r").decode("utf-8", errors="replace")
            if text.startswith("data:"):
                yield text[5:].lstrip()
    tail = pending.rstrip(b"\r").decode("utf-8", errors="replace")
    if tail.startswith("data:"):
        yield tail[5:].lstrip()


def iter_stream_text(chunks: Iterable[bytes]) -> Iterator[str]:
    """Text deltas of an OpenAI chat stream (SSE), stopping at ``[DONE]``."""
    for data in iter_sse_data(chunks):
        if data == "[DONE]":
            return
        try:
            document = json.loads(data)
        except ValueError:
            continue
        for choice in document.get("choices") or []:
            delta = choice.get("delta") or {}
            content = delta.get("content") or choice.get("text")
            if content:
                yield content


# --- many concurrent streams, for the benchmark -------------------------------------------------

SIGNING_NAME = "sagemaker"
STREAM_PATH = "/endpoints/{name}/invocations-response-stream"


def runtime_url(region: str, endpoint_url: str | None = None) -> str:
    return (endpoint_url or f"https://runtime.sagemaker.{region}.amazonaws.com").rstrip("/")


def signed_stream_request(
    credentials: Any, endpoint_name: str, region: str, body: dict[str, Any], *, endpoint_url: str | None = None
) -> tuple[str, bytes, dict[str, str]]:
    """URL, body bytes and SigV4-signed headers of one InvokeEndpointWithResponseStream request."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    url = runtime_url(region, endpoint_url) + STREAM_PATH.format(name=quote(endpoint_name, safe=""))
    data = json.dumps({**body, "stream": True}).encode()
    request = AWSRequest(
        method="POST",
        url=url,
        data=data,
        headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Accept": "application/json"},
    )
    SigV4Auth(credentials, SIGNING_NAME, region).add_auth(request)
    return url, data, dict(request.headers.items())


async def stream_invoke(
    http: Any,
    credentials_provider: Callable[[], Any],
    endpoint_name: str,
    region: str,
    body: dict[str, Any],
    *,
    endpoint_url: str | None = None,
) -> AsyncIterator[bytes]:
    """Stream one chat request; yield each ``PayloadPart``'s bytes as it arrives.

    Args:
        http: an ``aiohttp.ClientSession`` (its connector limit and timeouts are the caller's).
        credentials_provider: zero-argument callable returning botocore credentials
            (``Credentials`` or frozen); called per request so refreshed keys are used.

    Raises:
        ModelStreamFailed: an error event (``ModelStreamError``, ``InternalStreamFailure``),
            a malformed frame, or a stream cut short mid-frame.
        AwsError: the service refused the request (``EndpointNotFound``, ``ModelError``, throttling …).
    """
    import aiohttp
    import yarl
    from botocore.eventstream import EventStreamBuffer, ParserError

    validate_name(endpoint_name)
    url, data, headers = signed_stream_request(
        credentials_provider(), endpoint_name, region, body, endpoint_url=endpoint_url
    )
    try:
        async with http.post(yarl.URL(url, encoded=True), data=data, headers=headers) as response:
            request_id = response.headers.get("x-amzn-RequestId")
            if response.status != 200:
                raise _http_error(response.status, response.headers, await response.read(), region, endpoint_name)
            buffer = EventStreamBuffer()
            async for chunk in response.content.iter_any():
                buffer.add_data(chunk)
                try:
                    messages = list(buffer)
                except ParserError as exc:
                    raise ModelStreamFailed(
                        f"Endpoint {endpoint_name!r} sent a malformed event-stream frame: {exc}",
                        aws_error_code="MalformedEventStream",
                        request_id=request_id,
                        region=region,
                    ) from exc
                for message in messages:
                    part = payload_of(message, endpoint_name=endpoint_name, region=region, request_id=request_id)
                    if part is not None:
                        yield part
            if buffer._data:
                raise ModelStreamFailed(
                    f"Endpoint {endpoint_name!r} stream ended inside a frame ({len(buffer._data)} bytes pending).",
                    aws_error_code="TruncatedEventStream",
                    request_id=request_id,
                    region=region,
                )
    except TimeoutError as exc:
        raise SageMakerTimedOut(f"Stream from endpoint {endpoint_name!r} timed out.", region=region) from exc
    except aiohttp.ClientError as exc:
        raise AwsError(
            f"Stream from endpoint {endpoint_name!r} failed: {type(exc).__name__}: {exc}",
            region=region,
        ) from exc


def payload_of(message: Any, *, endpoint_name: str, region: str, request_id: str | None = None) -> bytes | None:
    """The bytes of a ``PayloadPart`` event; ``None`` for other events; raise on exception/error messages."""
    headers = message.headers
    message_type = headers.get(":message-type")
    if message_type == "event":
        if headers.get(":event-type") == "PayloadPart":
            return bytes(message.payload)
        return None
    if message_type == "exception":
        kind = headers.get(":exception-type", "UnknownException")
        detail = _json_or_empty(message.payload)
        code = detail.get("ErrorCode")
        text = detail.get("Message") or message.payload.decode("utf-8", errors="replace")
        raise ModelStreamFailed(
            f"Endpoint {endpoint_name!r} stream failed: {kind}{f' ({code})' if code else ''}: {text}",
            hint=f"Read the container log: gemmaserve sagemaker logs {endpoint_name}",
            aws_error_code=kind,
            request_id=request_id,
            region=region,
        )
    if message_type == "error":
        code = headers.get(":error-code", "UnknownError")
        raise ModelStreamFailed(
            f"Endpoint {endpoint_name!r} stream failed: {code}: {headers.get(':error-message', '')}",
            aws_error_code=code,
            request_id=request_id,
            region=region,
        )
    raise ModelStreamFailed(
        f"Endpoint {endpoint_name!r} sent an event-stream message of unknown type {message_type!r}.",
        aws_error_code="MalformedEventStream",
        request_id=request_id,
        region=region,
    )


def _http_error(status: int, headers: Any, raw: bytes, region: str, endpoint_name: str) -> AwsError:
    detail = _json_or_empty(raw)
    code = (headers.get("x-amzn-ErrorType") or "").split(":")[0] or detail.get("__type") or detail.get("code") or ""
    code = code.split("#")[-1] or f"HTTP{status}"
    message = detail.get("message") or detail.get("Message") or raw[:300].decode("utf-8", errors="replace")
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"RequestId": headers.get("x-amzn-RequestId"), "HTTPStatusCode": status},
    }
    return translate_error_response(response, region=region, operation=f"stream {endpoint_name}")


def _json_or_empty(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
