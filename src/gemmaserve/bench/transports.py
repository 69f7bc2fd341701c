"""How the engine talks to a target: one ``Transport`` protocol, an HTTP and a SageMaker adapter.

``http(s)://host:port`` is an OpenAI-compatible server (chat completions, SSE,
``stream_options.include_usage``): its streams run on :mod:`gemmaserve.bench.http_stream`'s
keep-alive connections, which parse each read where it arrives; model discovery and
``/metrics`` use an aiohttp session. ``sagemaker://NAME?region=R`` streams through
:func:`gemmaserve.sagemaker.operations.runtime.stream_invoke`, whose ``PayloadPart`` bytes are the
container's own SSE bytes. Transports stamp each chunk with the injected clock when its bytes
were read (the events of one read share its stamp) and raise :class:`RequestFailed`; they never
retry. The HTTP transport also stamps when the request's last byte reached the kernel and yields
that as a ``sent`` chunk first, so time spent queueing inside the client is not counted as the
server's TTFT.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from gemmaserve.bench.http_stream import HttpStreamClient
from gemmaserve.bench.sse import Chunk as Chunk  # the engine and the metrics take it from here
from gemmaserve.bench.sse import MalformedStream, SseDecoder, decode_event
from gemmaserve.errors import UsageError

Clock = Callable[[], float]

# aiohttp's default connector limit (100) queues later streams and inflates their TTFT;
# 0 means unlimited. Its default 300 s total timeout would cut long generations.
CONNECTOR_LIMIT = 0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat-completions call. ``ignore_eos`` is vLLM's extension: generate exactly max_tokens.

    The body sends ``max_completion_tokens`` (OpenAI deprecated ``max_tokens``; vLLM reads both
    and ``vllm bench serve`` sends this one).
    """

    prompt: str
    max_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = False
    model: str | None = None

    def body(self, default_model: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": self.prompt}],
            "max_completion_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        model = self.model or default_model
        if model:
            body["model"] = model
        if self.ignore_eos:
            body["ignore_eos"] = True
        return body


class RequestFailed(Exception):
    """A request that did not complete; ``reason`` is a short category used to count failures."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Transport(Protocol):
    kind: str  # "http" | "sagemaker", as TargetKind spells it
    url: str
    description: str  # e.g. "aiohttp+uvloop"

    def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class TargetSpec:
    url: str
    kind: str
    base_url: str | None = None  # http
    endpoint_name: str | None = None  # sagemaker
    region: str | None = None
    endpoint_url: str | None = None  # sagemaker: a non-AWS runtime URL (a local fake)


def parse_target(url: str) -> TargetSpec:
    """Parse a TARGET argument; raises UsageError (exit 2) for anything else."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise UsageError(f"Target {url!r} has no host.", hint="Use http://HOST:PORT, e.g. http://127.0.0.1:8000")
        return TargetSpec(url=url, kind="http", base_url=f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}")
    if parts.scheme == "sagemaker":
        query = parse_qs(parts.query)
        region = query.get("region", [""])[0]
        if not parts.netloc or not region:
            raise UsageError(
                f"Target {url!r} needs an endpoint name and a region.",
                hint="Use sagemaker://ENDPOINT_NAME?region=us-east-1",
            )
        return TargetSpec(
            url=url,
            kind="sagemaker",
            endpoint_name=parts.netloc,
            region=region,
            endpoint_url=query.get("endpoint_url", [""])[0] or None,
        )
    raise UsageError(
        f"Target {url!r} is neither http(s):// nor sagemaker://.",
        hint="Use http://HOST:PORT or sagemaker://ENDPOINT_NAME?region=REGION",
    )


def loop_description(client: str = "aiohttp") -> str:
    import asyncio

    try:
        loop_module = type(asyncio.get_running_loop()).__module__
    except RuntimeError:
        loop_module = type(asyncio.get_event_loop_policy()).__module__
    return f"{client}+uvloop" if loop_module.startswith("uvloop") else f"{client}+asyncio"


def new_http_session(timeout_s: float) -> Any:
    """An aiohttp session fit for benchmarking: unlimited connector, no total timeout."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=CONNECTOR_LIMIT, limit_per_host=0, ttl_dns_cache=300)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=timeout_s)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)


class HttpTransport:
    """OpenAI chat completions over SSE on keep-alive connections."""

    kind = "http"

    def __init__(
        self, base_url: str, *, timeout_s: float = 600.0, clock: Clock = time.perf_counter, session: Any = None
    ) -> None:
        self.url = base_url
        self.base_url = base_url.rstrip("/")
        self.model: str | None = None
        self._clock = clock
        self._session = session if session is not None else new_http_session(timeout_s)
        self._owns_session = session is None
        self._streams = HttpStreamClient(
            base_url, clock=clock, read_timeout_s=timeout_s, connect_timeout_s=CONNECT_TIMEOUT_S
        )
        self.description = loop_description("httptools")

    async def discover_model(self) -> str | None:
        """The first id of ``/v1/models`` (the served model name), or None when it cannot be read."""
        import aiohttp

        try:
            async with self._session.get(self.base_url + "/v1/models") as response:
                if response.status != 200:
                    return None
                document = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        data = document.get("data") if isinstance(document, dict) else None
        if data and isinstance(data[0], dict):
            self.model = data[0].get("id")
        return self.model

    async def get_text(self, path: str) -> str | None:
        """GET a text resource such as ``/metrics``; None when absent or unreachable."""
        import aiohttp

        try:
            async with self._session.get(self.base_url + path) as response:
                return await response.text() if response.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        body = json.dumps(request.body(self.model), separators=(",", ":")).encode()
        try:
            connection = await self._streams.acquire()
        except TimeoutError:
            raise RequestFailed("timeout", f"no connection within {CONNECT_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise RequestFailed("connect_error", f"{type(exc).__name__}: {exc}") from None
        reusable = False
        try:
            connection.send(self._streams.request_bytes("/v1/chat/completions", body))
            while connection.sent_s is None and connection.status is None and connection.failure is None:
                await connection.wait()
            if connection.sent_s is not None:
                yield Chunk(connection.sent_s, sent=True)
            while connection.status is None and connection.failure is None:
                await connection.wait()
            if connection.status is not None and connection.status != 200:
                while not connection.finished and connection.failure is None:
                    await connection.wait()
                text = connection.error_body.decode("utf-8", errors="replace")[:200]
                raise RequestFailed(f"http_{connection.status}", text.strip())
            # Chunks first, then the end or the failure: what arrived before a fault is kept.
            while True:
                ready = connection.take()
                if ready:
                    for chunk in ready:
                        yield chunk
                elif connection.failure is not None:
                    raise RequestFailed(*connection.failure)
                elif connection.finished:
                    break
                else:
                    await connection.wait()
            reusable = True
        finally:
            self._streams.release(connection, reusable=reusable)

    async def aclose(self) -> None:
        self._streams.close()
        if self._owns_session:
            await self._session.close()


class SageMakerTransport:
    """``invoke_endpoint_with_response_stream``, signed by botocore, carried by aiohttp."""

    kind = "sagemaker"

    def __init__(
        self,
        spec: TargetSpec,
        *,
        credentials_provider: Callable[[], Any] | None = None,
        timeout_s: float = 600.0,
        clock: Clock = time.perf_counter,
        session: Any = None,
    ) -> None:
        """``spec``: a ``sagemaker://`` target (its endpoint, region and, for a local fake, runtime URL)."""
        if spec.endpoint_name is None or spec.region is None:
            raise ValueError(f"{spec.url} is no SageMaker target")
        endpoint_name, region = spec.endpoint_name, spec.region
        self.url = spec.url
        self.endpoint_name = endpoint_name
        self.region = region
        self.endpoint_url = spec.endpoint_url
        self.model: str | None = None
        self._credentials_provider = credentials_provider or _default_credentials(region)
        self._clock = clock
        self._session = session if session is not None else new_http_session(timeout_s)
        self._owns_session = session is None
        self.description = loop_description() + "+sigv4"

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        from gemmaserve.errors import AwsError, ModelStreamFailed, SageMakerTimedOut
        from gemmaserve.sagemaker.operations.runtime import stream_invoke

        clock = self._clock
        decoder = SseDecoder()
        try:
            parts = stream_invoke(
                self._session,
                self._credentials_provider,
                self.endpoint_name,
                self.region,
                request.body(self.model),
                endpoint_url=self.endpoint_url,
            )
            async for part in parts:
                arrival_s = clock()
                for event in decoder.feed(part):
                    yield decode_event(event, arrival_s)
            for event in decoder.close():
                yield decode_event(event, clock())
        except MalformedStream as exc:
            raise RequestFailed("malformed_sse", str(exc)) from None
        except SageMakerTimedOut as exc:
            raise RequestFailed("timeout", exc.message) from None
        except ModelStreamFailed as exc:
            code = exc.fields.get("aws_error_code") or "stream_error"
            raise RequestFailed(f"sagemaker_{code}", exc.message) from None
        except AwsError as exc:
            code = exc.fields.get("aws_error_code") or type(exc).__name__
            raise RequestFailed(f"sagemaker_{code}", exc.message) from None

    async def aclose(self) -> None:
        if self._owns_session:
            await self._session.close()


def _default_credentials(region: str) -> Callable[[], Any]:
    def provider() -> Any:
        import boto3

        credentials = boto3.Session(region_name=region).get_credentials()
        if credentials is None:
            from gemmaserve.errors import CredentialsMissing

            raise CredentialsMissing(
                "No AWS credentials found for the SageMaker target.",
                hint="Configure credentials (aws configure, AWS_PROFILE, or an instance role).",
                region=region,
            )
        return credentials.get_frozen_credentials()

    return provider


def open_transport(spec: TargetSpec, *, timeout_s: float, clock: Clock = time.perf_counter) -> Transport:
    """The transport for a parsed target (must be called inside the running event loop)."""
    if spec.kind == "http":
        assert spec.base_url is not None
        return HttpTransport(spec.base_url, timeout_s=timeout_s, clock=clock)
    return SageMakerTransport(spec, timeout_s=timeout_s, clock=clock)
