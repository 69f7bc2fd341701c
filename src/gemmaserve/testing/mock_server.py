"""A local OpenAI-compatible streaming server with known timing and injectable faults.

Routes: ``POST /v1/chat/completions`` (SSE in vLLM's stream shape, from its
``serving_chat`` stream generator: a role-only first chunk sent with the first token, one
chunk per engine step whose text may be "", ``finish_reason`` on the last token's chunk, a
usage chunk with ``choices: []`` when ``stream_options.include_usage``, then ``[DONE]``), ``GET /v1/models``, ``GET /health``, ``GET /metrics``
(vLLM's Prometheus names), ``POST /endpoints/{name}/invocations-response-stream``
(the same stream inside AWS event-stream frames, SigV4 not checked), and
``GET|POST /mock/config``, ``GET|DELETE /mock/requests`` to steer and read it from a test.
Timeline of one reply, from arrival: ``fixed_cost_s`` (before headers), then content
token k (1-based) at ``fixed_cost_s + ttft_s + (k − 1) · itl_s``, scheduled on absolute
deadlines so sleep overshoot does not accumulate. ``python -m gemmaserve.testing.mock_server``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import os
import socket
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from aiohttp import web

from gemmaserve.testing.eventstream import model_stream_error, payload_part

FAULTS = (
    "http_500",  # answer 500 before streaming
    "http_429",  # answer 429 (rate limited)
    "timeout",  # accept, then send nothing for hang_s
    "stall",  # stream half the reply, then send nothing for hang_s
    "disconnect",  # stream half the reply, then drop the connection
    "truncated",  # stream half the reply, then end the body cleanly: no finish_reason, no [DONE]
    "malformed_sse",  # stream half the reply, then a data line that is not JSON
    "error_event",  # stream half the reply, then {"error": …} as vLLM does on an engine error
    "short_reply",  # finish properly after half the requested tokens (ignore_eos not honoured)
    "no_usage",  # omit the usage chunk even when asked for it
    "malformed_frame",  # event-stream route only: a frame with a bad CRC
    "model_stream_error",  # event-stream route only: a ModelStreamError exception event
)

# Faults that stream only the first half of the reply before they strike.
_CUT_SHORT = frozenset(
    {
        "stall",
        "disconnect",
        "truncated",
        "malformed_sse",
        "error_event",
        "short_reply",
        "malformed_frame",
        "model_stream_error",
    }
)


@dataclass(frozen=True)
class MockConfig:
    ttft_s: float = 0.020
    itl_s: float = 0.010
    fixed_cost_s: float = 0.0
    tokens_per_chunk: int = 1
    natural_tokens: int = 32  # reply length when ignore_eos is false (capped by max_tokens)
    reply_text: str | None = None  # words cycled as tokens; default "t1 t2 …"
    model: str = "mock-model"
    role_chunk: bool = True  # vLLM first sends {"role": "assistant", "content": ""} with no token
    empty_text_every: int = 0  # token k (1-based) decodes to "" when k is a multiple of this; 0: never
    usage_delay_s: float = 0.0  # delay of the usage chunk after the last token
    fault: str | None = None
    fault_every: int = 1  # the fault hits requests whose 1-based number is a multiple of this
    hang_s: float = 3600.0
    kv_blocks: int = 4096
    block_size: int = 16
    # vLLM's own group-aware capacity (cache_config_info kv_cache_size_tokens): for a hybrid
    # model such as Gemma 4 it is not kv_blocks × block_size (half of it here, as on the real engine).
    kv_cache_tokens: int = 32_768
    max_model_len: int = 8192
    record: bool = False  # keep per-request server-side timings (GET /mock/requests)

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; known: {', '.join(FAULTS)}")
        if self.fault_every < 1 or self.tokens_per_chunk < 1:
            raise ValueError("fault_every and tokens_per_chunk must be >= 1")
        if self.empty_text_every < 0:
            raise ValueError("empty_text_every must be >= 0")

    def updated(self, changes: dict[str, Any]) -> MockConfig:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)


@dataclass
class _Stats:
    running: int = 0
    finished: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0


class MockServer:
    """The app and its state. ``reply_for(prompt) -> text`` overrides the reply (in-process use);
    ``clock`` and ``sleep`` are the timeline's time source, a test's own where the timeline is under test."""

    def __init__(
        self,
        config: MockConfig | None = None,
        *,
        reply_for: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config or MockConfig()
        self.reply_for = reply_for
        self.clock = clock
        self.sleep = sleep
        self.records: deque[dict[str, Any]] = deque(maxlen=100_000)
        self.stats = _Stats()
        self._counter = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/endpoints/{name}/invocations-response-stream", self._sagemaker_stream)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/mock/config", self._get_config)
        app.router.add_post("/mock/config", self._set_config)
        app.router.add_get("/mock/requests", self._get_records)
        app.router.add_delete("/mock/requests", self._clear_records)
        return app

    # --- reply generation ------------------------------------------------------

    def _fault_for(self, number: int) -> str | None:
        config = self.config
        return config.fault if config.fault and number % config.fault_every == 0 else None

    def _tokens(self, prompt: str, max_tokens: int, ignore_eos: bool) -> list[str]:
        words: list[str]
        if self.reply_for is not None:
            words = self.reply_for(prompt).split()
        elif self.config.reply_text:
            words = self.config.reply_text.split()
        else:
            words = []
        if ignore_eos:
            count = max_tokens
        else:
            count = min(max_tokens, len(words) if words else self.config.natural_tokens)
        every = self.config.empty_text_every
        if words:
            tokens = [words[i % len(words)] + " " for i in range(count)]
        else:
            tokens = [f"t{i + 1} " for i in range(count)]
        if every:  # tokens that decode to nothing still stream, as a chunk with "content": ""
            tokens = ["" if (i + 1) % every == 0 else token for i, token in enumerate(tokens)]
        return tokens

    async def _events(self, body: dict[str, Any], fault: str | None, received_s: float) -> Any:
        """Yield (bytes, is_token) in the reply's timeline; raises _Drop to cut the connection."""
        config = self.config
        request_id = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        model = json.dumps(body.get("model") or config.model)
        head = '{"id":"%s","object":"chat.completion.chunk","created":%d,"model":%s,"choices":' % (  # noqa: UP031 - JSON braces
            request_id,
            int(time.time()),
            model,
        )
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))
        prompt_tokens = max(1, len(prompt.split()))
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        tokens = self._tokens(prompt, max_tokens, bool(body.get("ignore_eos")))
        self.stats.prompt_tokens += prompt_tokens
        tokens_to_send = tokens[: max(1, len(tokens) // 2)] if fault in _CUT_SHORT else tokens
        # The last token's chunk carries finish_reason, unless a fault cuts the stream short.
        finishes = fault not in _CUT_SHORT or fault == "short_reply"
        start_s = received_s + config.fixed_cost_s + config.ttft_s
        per = config.tokens_per_chunk
        sent = 0
        for index in range(0, len(tokens_to_send), per):
            group = tokens_to_send[index : index + per]
            # Token k is due at start + (k-1)·itl; a chunk of several tokens goes out when its last is due.
            due_s = start_s + (index + len(group) - 1) * config.itl_s
            delay_s = due_s - self.clock()
            if delay_s > 0:
                await self.sleep(delay_s)
            if index == 0 and config.role_chunk:
                # vLLM sends the role once the first engine output is there, just before its text.
                yield (
                    (
                        head + '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                        '"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}'
                    ).encode(),
                    0,
                )
            sent += len(group)
            content = json.dumps("".join(group))
            if finishes and index + per >= len(tokens_to_send):
                finish = json.dumps("length" if sent >= max_tokens else "stop")
                tail = ',"logprobs":null,"finish_reason":%s,"stop_reason":null,"token_ids":null}]}' % finish  # noqa: UP031
            else:
                tail = ',"logprobs":null,"finish_reason":null,"token_ids":null}]}'
            yield (head + '[{"index":0,"delta":{"content":%s}' % content + tail).encode(), len(group)  # noqa: UP031
        if fault in ("stall",):
            await self.sleep(config.hang_s)
        if fault == "disconnect":
            raise _Drop
        if fault == "truncated":
            return
        if fault == "malformed_sse":
            yield b'{"id": "broken", "choices": [', 0
            return
        if fault == "error_event":
            yield b'{"error": {"message": "mock engine error", "type": "InternalServerError", "code": 500}}', 0
            return
        if fault == "model_stream_error":
            raise _StreamException
        if fault == "malformed_frame":
            raise _CorruptFrame
        stream_options = body.get("stream_options") or {}
        if stream_options.get("include_usage") and fault != "no_usage":
            if config.usage_delay_s:
                await self.sleep(config.usage_delay_s)
            # vLLM dumps this one with exclude_none; 0.32 stamps its fingerprint here.
            usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + sent, "completion_tokens": sent}
            yield (
                (
                    head
                    + '[],"usage":%s,"system_fingerprint":"vllm-0.32.0-mock"}'  # noqa: UP031
                    % json.dumps(usage, separators=(",", ":"))
                ).encode(),
                0,
            )
        yield b"[DONE]", 0

    # --- routes ----------------------------------------------------------------

    async def _read_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON", "code": 400}}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": {"message": "body is not an object", "code": 400}}, status=400)
        return body

    async def _before_stream(self, fault: str | None, received_s: float) -> web.Response | None:
        if self.config.fixed_cost_s:
            await self.sleep(max(0.0, received_s + self.config.fixed_cost_s - self.clock()))
        if fault == "http_500":
            return web.json_response({"error": {"message": "mock internal error", "code": 500}}, status=500)
        if fault == "http_429":
            return web.json_response({"error": {"message": "mock rate limit", "code": 429}}, status=429)
        if fault == "timeout":
            await self.sleep(self.config.hang_s)
        return None

    async def _admit(self, request: web.Request) -> _Call | web.Response:
        """Stamp and number the request, read its body and play its fault up to the first byte; a bad body's
        400 answer instead."""
        received_s = self.clock()
        number = next(self._counter)
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            return body
        fault = self._fault_for(number)
        return _Call(number, received_s, body, fault, await self._before_stream(fault, received_s))

    async def _stream(
        self, call: _Call, record: dict[str, Any], response: web.StreamResponse, frame: Callable[[bytes], bytes]
    ) -> None:
        """Write each SSE event through ``frame`` (as is, or in an event-stream message), noting its tokens."""
        async for data, tokens in self._events(call.body, call.fault, call.received_s):
            written_s = self.clock()
            await response.write(frame(b"data: " + data + b"\n\n"))
            self._note(record, tokens, written_s)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        call = await self._admit(request)
        if isinstance(call, web.Response):
            return call
        if call.refusal is not None:
            return call.refusal
        if not call.body.get("stream"):
            return await self._complete(call.body, call.fault, call.received_s)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        record = self._start_record(call)
        try:
            await self._stream(call, record, response, lambda event: event)  # SSE as is
        except _Drop:
            assert request.transport is not None
            request.transport.abort()
            self._finish(record)
            return response
        self._finish(record)
        await response.write_eof()
        return response

    async def _complete(self, body: dict[str, Any], fault: str | None, received_s: float) -> web.Response:
        text = ""
        tokens = 0
        async for data, count in self._events(body, fault, received_s):
            if count:
                text += json.loads(data)["choices"][0]["delta"]["content"]
                tokens += count
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
                "object": "chat.completion",
                "model": body.get("model") or self.config.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": tokens},
            }
        )

    async def _sagemaker_stream(self, request: web.Request) -> web.StreamResponse:
        call = await self._admit(request)
        if isinstance(call, web.Response):
            return call
        if (refusal := call.refusal) is not None:
            kind = "ThrottlingException" if refusal.status == 429 else "ModelError"
            return web.json_response(
                {"message": f"mock {kind}", "__type": kind},
                status=refusal.status if refusal.status == 429 else 424,
                headers={"x-amzn-ErrorType": kind, "x-amzn-RequestId": uuid.uuid4().hex},
            )
        response = web.StreamResponse(
            headers={
                "Content-Type": "application/vnd.amazon.eventstream",
                "x-amzn-RequestId": uuid.uuid4().hex,
                "X-Amzn-Invoked-Production-Variant": "AllTraffic",
            }
        )
        await response.prepare(request)
        record = self._start_record(call)
        record["signed"] = request.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256")
        try:
            await self._stream(call, record, response, payload_part)
        except _StreamException:
            await response.write(model_stream_error("mock container failure"))
        except _CorruptFrame:
            await response.write(payload_part(b"data: {}\n\n", corrupt_crc=True))
        except _Drop:
            assert request.transport is not None
            request.transport.abort()
        self._finish(record)
        await response.write_eof()
        return response

    def _start_record(self, call: _Call) -> dict[str, Any]:
        self.stats.running += 1
        record = {"number": call.number, "received_s": call.received_s, "token_times_s": [], "tokens": 0}
        if self.config.record:
            record["prompt_key"] = _body_prompt_key(call.body)
        return record

    def _note(self, record: dict[str, Any], tokens: int, written_s: float) -> None:
        """``written_s`` is read before the write: the bytes reach the kernel inside it, and a client
        on another core can read them before a clock read after it (by ~20 µs on loopback)."""
        if tokens:
            record["tokens"] += tokens
            self.stats.generation_tokens += tokens
            if self.config.record:
                record["token_times_s"].append(written_s)

    def _finish(self, record: dict[str, Any]) -> None:
        self.stats.running -= 1
        self.stats.finished += 1
        if self.config.record:
            self.records.append(record)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.config.model, "object": "model", "owned_by": "gemmaserve-mock"}]}
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=render_metrics(self.config, self.stats), content_type="text/plain")

    async def _get_config(self, request: web.Request) -> web.Response:
        return web.json_response(asdict(self.config))

    async def _set_config(self, request: web.Request) -> web.Response:
        try:
            self.config = self.config.updated(await request.json())
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400)
        return web.json_response(asdict(self.config))

    async def _get_records(self, request: web.Request) -> web.Response:
        return web.json_response(list(self.records))

    async def _clear_records(self, request: web.Request) -> web.Response:
        self.records.clear()
        return web.json_response({"cleared": True})


def prompt_key(prompt: str) -> str:
    """A short digest of a prompt: joins a client's record of a request with the server's."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def _body_prompt_key(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        return prompt_key(content) if isinstance(content, str) else None
    return None


@dataclass
class _Call:
    """One chat or SageMaker request as admitted: its number, arrival, body and fault."""

    number: int
    received_s: float
    body: dict[str, Any]
    fault: str | None
    refusal: web.Response | None  # the fault's answer before any token (HTTP 500 or 429), else None


class _Drop(Exception):
    pass


class _StreamException(Exception):
    pass


class _CorruptFrame(Exception):
    pass


def render_metrics(config: MockConfig, stats: _Stats) -> str:
    """A /metrics page with the vLLM names gemmaserve reads (a subset of vLLM's exposition)."""
    label = f'model_name="{config.model}"'
    return "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(stats.running)}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} 0.0",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} 0.0",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {float(stats.prompt_tokens)}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {float(stats.generation_tokens)}",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{finished_reason="length",{label}}} {float(stats.finished)}',
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
            "# TYPE vllm:cache_config_info gauge",
            # vLLM labels this gauge with every CacheConfig field (metrics_info(): str of __dict__).
            (
                f'vllm:cache_config_info{{block_size="{config.block_size}",cache_dtype="auto",'
                f'enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",'
                f'kv_cache_max_concurrency="{config.kv_cache_tokens / config.max_model_len!r}",'
                f'kv_cache_size_tokens="{config.kv_cache_tokens}",'
                f'num_cpu_blocks="None",num_gpu_blocks="{config.kv_blocks}"}} 1.0'
            ),
            "",
        ]
    )


def _parser() -> argparse.ArgumentParser:
    """Options named after :class:`MockConfig`'s fields (times in ms), their defaults left to it."""
    parser = argparse.ArgumentParser(prog="python -m gemmaserve.testing.mock_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on stdout)")
    for name in MS_OPTIONS:
        parser.add_argument(f"--{name.replace('_', '-')}-ms", type=float)
    parser.add_argument("--tokens-per-chunk", type=int)
    parser.add_argument(
        "--empty-text-every",
        type=int,
        help="token k decodes to empty text when k is a multiple of this (1: all); 0: never",
    )
    parser.add_argument("--natural-tokens", type=int)
    parser.add_argument("--reply-text")
    parser.add_argument("--model")
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--fault-every", type=int)
    parser.add_argument("--hang-s", type=float)
    parser.add_argument("--record", action="store_true", help="keep per-request timings for GET /mock/requests")
    parser.add_argument("--reuse-port", action="store_true", help="let several processes share one port")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (coarser, 1 ms timers)")
    return parser


# The settings given in milliseconds on the command line (``--ttft-ms``), in seconds in MockConfig.
MS_OPTIONS = ("ttft", "itl", "fixed_cost")


def config_from_args(args: argparse.Namespace) -> MockConfig:
    given = {name: value for name, value in vars(args).items() if value is not None}
    settings = {field.name: given[field.name] for field in fields(MockConfig) if field.name in given}
    settings |= {f"{name}_s": given[f"{name}_ms"] / 1000 for name in MS_OPTIONS if f"{name}_ms" in given}
    return MockConfig(**settings)


def bind_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


async def serve(
    server: MockServer,
    sock: socket.socket,
    ready: Callable[[int], None] | None = None,
    own_sock: socket.socket | None = None,
) -> None:
    """Serve on an already bound socket until cancelled; also on ``own_sock``, a port that only this
    process holds, when several processes share ``sock``: there each one's records can be read."""
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    for listening in (sock, own_sock):
        if listening is not None:
            await web.SockSite(runner, listening, backlog=4096).start()
    if ready is not None:
        ready(sock.getsockname()[1])
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        server = MockServer(config_from_args(args))
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    sock = bind_socket(args.host, args.port, reuse_port=args.reuse_port)
    # A shared port reaches one process at random: the records of each need a port of its own.
    own_sock = bind_socket(args.host, 0) if args.reuse_port and args.record else None

    def ready(port: int) -> None:
        own = f" own http://{args.host}:{own_sock.getsockname()[1]}" if own_sock else ""
        print(f"listening on http://{args.host}:{port} pid {os.getpid()}{own}", flush=True)

    if args.uvloop:
        import uvloop

        uvloop.install()
    try:
        asyncio.run(serve(server, sock, ready, own_sock))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
