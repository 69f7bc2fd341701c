"""A real HTTP server on 127.0.0.1 in front of moto's, doing the awkward things real SageMaker does and moto does not.

gemmaserve's clients talk to it as to SageMaker (``Boto3ClientFactory(endpoint_url=proxy.url)``); it passes
each request to moto unchanged, except where a test asked for one of these:

- :meth:`hold`: a request of that operation reaches the service only when released. The client is
  blocked on it (its answer never comes); the resource appears when the test releases it, the way a
  Create accepted by SageMaker after the client gave up appears later.
- :meth:`creating`: ``DescribeEndpoint`` and ``ListEndpoints`` say ``Creating`` for that endpoint, and
  ``DeleteEndpoint`` is refused with SageMaker's own ValidationException, until :meth:`finish_creating`.

Requests are recorded (``calls``: the ``X-Amz-Target`` operation and the request's JSON) so a test can
release a held request on, say, the second ``DescribeEndpoint``.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import SplitResult, urlsplit

Hook = Callable[[str, dict[str, Any]], None]


@dataclass
class Held:
    """One held operation: ``arrived`` once a request of it came in, ``forwarded`` once it reached moto."""

    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    forwarded: threading.Event = field(default_factory=threading.Event)


class MotoFront:
    """A real HTTP server on 127.0.0.1 (``url``) in front of moto's: each request goes to :meth:`_serve` (a GET with
    an empty body), which passes it to moto unchanged unless a subclass answers it itself."""

    def __init__(self, moto_url: str, name: str) -> None:
        self.moto = urlsplit(moto_url)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # An answer goes out as two writes (head, body): with Nagle the body waits for the client's
            # delayed ACK of the head, 40 ms a call on Linux, a wait no real service adds.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                front._serve(self, body)

            def do_GET(self) -> None:
                front._serve(self, b"")

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        status, headers, answer = forward(self.moto, handler, body)
        answer_with(handler, status, answer, headers)


class SageMakerProxy(MotoFront):
    def __init__(self, moto_url: str) -> None:
        self.held: dict[str, Held] = {}
        self.in_creation: set[str] = set()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.hooks: list[Hook] = []
        self._lock = threading.Lock()
        super().__init__(moto_url, "sagemaker-proxy")

    def hold(self, operation: str) -> Held:
        held = self.held[operation] = Held()
        return held

    def creating(self, endpoint_name: str) -> None:
        self.in_creation.add(endpoint_name)

    def finish_creating(self, endpoint_name: str) -> None:
        self.in_creation.discard(endpoint_name)

    def count(self, operation: str) -> int:
        with self._lock:
            return sum(1 for name, _ in self.calls if name == operation)

    def close(self) -> None:
        for held in self.held.values():
            held.release.set()
        super().close()

    # -- the server side --

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        target = handler.headers.get("X-Amz-Target", "")
        operation = target.rsplit(".", 1)[-1] if target.startswith("SageMaker.") else ""
        payload: dict[str, Any] = {}
        if operation and body:
            payload = json.loads(body)
        with self._lock:
            self.calls.append((operation, payload))
        for hook in list(self.hooks):
            hook(operation, payload)
        if operation == "DeleteEndpoint" and payload.get("EndpointName") in self.in_creation:
            answer_with(handler, 400, self._in_progress(payload["EndpointName"]))
            return
        held = self.held.get(operation)
        if held is not None:
            held.arrived.set()
            held.release.wait(timeout=60)
        status, headers, answer = self._forward(handler, body)
        if held is not None:
            held.forwarded.set()
        if operation in ("DescribeEndpoint", "ListEndpoints") and status == 200:
            answer = self._as_creating(operation, answer)
        try:
            answer_with(handler, status, answer, headers)
        except OSError:  # the client gave up on this request (an interrupt): the service still acted on it
            pass

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        return forward(self.moto, handler, body)

    def _as_creating(self, operation: str, answer: bytes) -> bytes:
        if not self.in_creation:
            return answer
        document = json.loads(answer)
        items = [document] if operation == "DescribeEndpoint" else document.get("Endpoints", [])
        for item in items:
            if item.get("EndpointName") in self.in_creation:
                item["EndpointStatus"] = "Creating"
        return json.dumps(document).encode()

    @staticmethod
    def _in_progress(name: str) -> bytes:
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}"
        return json.dumps(
            {"__type": "ValidationException", "Message": f'Cannot update in-progress endpoint "{arn}".'}
        ).encode()


def forward(moto: SplitResult, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """Pass ``handler``'s request to moto unchanged; its status, the headers a client reads, and its body."""
    connection = http.client.HTTPConnection(moto.hostname or "127.0.0.1", moto.port, timeout=30)
    try:
        headers = {key: value for key, value in handler.headers.items() if key.lower() != "host"}
        headers["Host"] = moto.netloc
        connection.request(handler.command, handler.path, body=body or None, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        keep = {"Content-Type", "x-amzn-RequestId"}
        return response.status, {k: v for k, v in response.getheaders() if k in keep}, answer
    finally:
        connection.close()


def answer_with(
    handler: BaseHTTPRequestHandler, status: int, answer: bytes, headers: dict[str, str] | None = None
) -> None:
    """Send one whole answer (JSON 1.1 unless ``headers`` say otherwise)."""
    handler.send_response(status)
    for key, value in (headers or {"Content-Type": "application/x-amz-json-1.1"}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(answer)))
    handler.end_headers()
    handler.wfile.write(answer)
    handler.wfile.flush()


@contextmanager
def sagemaker_proxy(moto_url: str) -> Iterator[SageMakerProxy]:
    proxy = SageMakerProxy(moto_url)
    try:
        yield proxy
    finally:
        proxy.close()
