"""A fake SageMaker runtime on 127.0.0.1 that speaks the real AWS event-stream wire format.

Frames are encoded here (prelude: total length, headers length, CRC32; headers;
payload; message CRC32) and decoded by botocore's own parser in the code under test.
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def encode_headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        raw_name = name.encode()
        raw_value = value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value)) + raw_value
    return out


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    raw_headers = encode_headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + raw_headers + payload
    return body + struct.pack("!I", zlib.crc32(body) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    return encode_frame(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, data
    )


def exception_frame(kind: str, message: str, error_code: str | None = None) -> bytes:
    detail: dict[str, str] = {"Message": message}
    if error_code:
        detail["ErrorCode"] = error_code
    return encode_frame(
        {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
        json.dumps(detail).encode(),
    )


def sse_chunk(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': text}}]})}\n\n".encode()


@dataclass
class Script:
    """What the fake sends for one request: raw byte pieces (each written and flushed), or an HTTP error."""

    pieces: list[bytes] = field(default_factory=list)
    status: int = 200
    error_body: dict[str, Any] | None = None
    error_type: str | None = None


@dataclass
class FakeRuntime:
    script: Callable[[str, dict[str, Any]], Script]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def start_fake_runtime(runtime: FakeRuntime) -> Callable[[], None]:
    """Run the fake in a thread with its own loop; return a stopper."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        raw = await request.read()
        body = json.loads(raw)
        runtime.requests.append({"name": name, "path": request.path, "headers": dict(request.headers), "body": body})
        plan = runtime.script(name, body)
        if plan.status != 200:
            headers = {"x-amzn-RequestId": "req-err-1"}
            if plan.error_type:
                headers["x-amzn-ErrorType"] = plan.error_type
            return web.json_response(plan.error_body or {}, status=plan.status, headers=headers)
        response = web.StreamResponse(
            headers={"Content-Type": "application/vnd.amazon.eventstream", "x-amzn-RequestId": "req-ok-1"}
        )
        await response.prepare(request)
        for piece in plan.pieces:
            await response.write(piece)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    async def boot() -> None:
        app = web.Application()
        app.router.add_post("/endpoints/{name}/invocations-response-stream", handle)
        app_runner = web.AppRunner(app, access_log=None)
        await app_runner.setup()
        site = web.TCPSite(app_runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        runtime.url = f"http://127.0.0.1:{port}"
        holder["runner"] = app_runner
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(boot())
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("fake runtime did not start")

    def stop() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return stop
