"""Invoke an endpoint through boto3: one chat request, or its response stream (adapter).

The body is an OpenAI chat-completions request; the AWS vLLM container answers
``/invocations`` with the OpenAI response, and streams its SSE bytes inside the
``PayloadPart`` events of ``invoke_endpoint_with_response_stream``. The async,
high-concurrency path for the benchmark lives in :mod:`.response_stream`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError, ModelStreamFailed
from gemmaserve.sagemaker.aws import call, translate_client_error
from gemmaserve.sagemaker.names import validate_name


class InvokeResult(BaseModel):
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
    response = call(
        region,
        runtime.invoke_endpoint,
        EndpointName=endpoint_name,
        Body=json.dumps(payload).encode(),
        ContentType="application/json",
        Accept="application/json",
    )
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
    response = call(
        region,
        runtime.invoke_endpoint_with_response_stream,
        EndpointName=endpoint_name,
        Body=json.dumps(payload).encode(),
        ContentType="application/json",
        Accept="application/json",
    )
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
