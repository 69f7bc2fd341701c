"""HTTP/1.1 for the benchmark's hot request: POST a JSON body, read an SSE reply, stamp each read.

Bytes are handled where they arrive (``data_received``): each read is stamped once, framed by
httptools (llhttp, the parser of Node.js and aiohttp) and its events decoded into chunks at once;
the waiting request is woken with the chunks at most every ``DELIVERY_INTERVAL_S`` while the body
streams, and at once for everything else. Through aiohttp the same read cost ~19 µs of
client CPU on a loopback stream (its StreamReader wakes a task through several layers per read,
re-arms the read timer and re-enters the parser to resume reading) against ~13 µs for a bare
asyncio protocol (docs/bench-client-performance.md).

No framing is parsed here: status line, headers, chunked, Content-Length and read-until-close
bodies are llhttp's. Scope: http and https (verified as aiohttp's default session verifies),
keep-alive. No proxies, redirects, compression (it asks for identity), cookies or HTTP/2; model
discovery, ``/metrics`` and SageMaker stay on aiohttp. No retries.
"""

from __future__ import annotations

import asyncio
import math
import socket
import ssl
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from gemmaserve.bench.sse import Chunk, MalformedStream, StreamDecoder

Clock = Callable[[], float]
MAX_ERROR_BODY_BYTES = 65_536
# While a body streams, the waiting request is woken at most this often with the chunks decoded
# since (their stamps are the reads', taken in data_received). A wake is a task step through the
# request's coroutines, ~2 µs: once per read it cost as much as the read's own parsing (the
# client's Python per chunk on 256 streams of 50 tok/s, without sockets: 5.2 µs waking per read,
# 3.5 µs at this interval). Sent, status, the first chunk, end and failure wake it at once. What
# waits: a progress display counting chunks (it redraws twice a second) sees them this much later,
# and a request cancelled from outside (the engine's whole-request timeout) loses the chunks of
# its last interval, as a failure.
DELIVERY_INTERVAL_S = 0.25


class ProtocolError(ValueError):
    """The server's bytes are not an HTTP/1.1 response; the message is llhttp's reason."""


class _UnaskedReply(Exception):
    """A second response began on the connection after the one asked for."""


_IDLE, _HEAD, _BODY, _FINISHED = range(4)


class StreamConnection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time, driven by :class:`HttpStreamClient`.

    The consumer reads ``sent_s``, ``status``, ``finished``, ``failure`` and :meth:`take`, and
    awaits :meth:`wait` for the next change. A failure is (reason, detail) in the engine's words.
    """

    def __init__(self, clock: Clock, read_timeout_s: float) -> None:
        self._clock = clock
        self._read_timeout_s = read_timeout_s
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._write_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._body_pieces: list[bytes] = []
        # llhttp hands each chunk's payload to on_body; a bound append is the cheapest callback
        # (httptools looks the callbacks up once, when the parser is made).
        self.on_body = self._body_pieces.append
        self._reset()

    def _reset(self) -> None:
        self._state = _IDLE
        self._parser: httptools.HttpResponseParser | None = None
        self._sse = StreamDecoder()
        self._body_pieces.clear()
        self._framed = False  # the reply has a Content-Length or a Transfer-Encoding: EOF cuts it short
        self._complete = False
        self._ready: list[Chunk] = []
        self._last_read_s = 0.0
        self._delivery_due_s = -math.inf  # on the clock: chunks decoded from then on wake the request
        self.sent_s: float | None = None
        self.status: int | None = None
        self.error_body = b""
        self.finished = False
        self.keep_alive = False
        self.failure: tuple[str, str] | None = None

    # --- asyncio callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Told the moment any byte waits in the write buffer, and when it has all left:
        # the send is stamped when the request's last byte reached the kernel.
        self.transport.set_write_buffer_limits(high=0)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._state == _HEAD and self.sent_s is None:
            self.sent_s = self._clock()
            self._wake()

    def data_received(self, data: bytes) -> None:
        now = self._clock()
        parser = self._parser
        if parser is None or self._state == _FINISHED:  # bytes nobody asked for: this connection cannot be trusted
            self.keep_alive = False
            self.close()
            return
        self._last_read_s = self._loop.time()
        heading = self.status is None  # the request waits for the status: wake it after this read
        if self.sent_s is None:  # the answer came before the write buffer was seen to drain
            self.sent_s = now
        try:
            parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _UnaskedReply):  # httptools chains the callback's own error
                self._fail("protocol_error", f"ProtocolError: {exc}")  # a bug here: no hang, and its traceback
                raise
            self.keep_alive = False  # the reply asked for is whole; what follows it is not trusted
            self.close()
        except httptools.HttpParserError as exc:
            if not self._complete:
                self._take_body(now)
                self._fail("protocol_error", f"ProtocolError: {ProtocolError(str(exc))}")
                return
            self.keep_alive = False  # e.g. bytes after a reply that said Connection: close
            self.close()
        except httptools.HttpParserUpgrade:
            self._fail("protocol_error", "ProtocolError: the server switched protocols")
            return
        pieces = self._body_pieces
        if len(pieces) == 1 and self.status == 200:  # the common read: one piece of the stream, inline
            try:
                self._sse.decode(pieces.pop(), now, self._ready)
            except MalformedStream as exc:
                self._fail("malformed_sse", str(exc))
        elif pieces:
            self._take_body(now)
        if self._complete and self.failure is None:
            self._end(now)
        if self._state == _BODY and not heading:
            if not self._ready or now < self._delivery_due_s:
                return
            self._delivery_due_s = now + DELIVERY_INTERVAL_S
        self._wake()

    def eof_received(self) -> bool:
        if self._state == _BODY and not self._framed:
            now = self._clock()
            self.keep_alive = False
            self._end(now)  # a body without a length ends when the server closes
            self._wake()
        elif self._state in (_HEAD, _BODY):
            self._fail("truncated_stream", "connection closed mid-reply")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state in (_HEAD, _BODY) and self.failure is None:
            detail = f"connection closed mid-reply ({exc})" if exc else "connection closed mid-reply"
            self._fail("truncated_stream", detail)
        self._cancel_timer()

    # --- llhttp callbacks (httptools) ---------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:
            raise _UnaskedReply

    def on_header(self, name: bytes, value: bytes) -> None:
        # llhttp frames the body, but httptools has no llhttp_finish: whether EOF ends the body or
        # cuts it short is read from the headers that frame it (RFC 9112 §6.3).
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if status < 200:  # an interim response (100 Continue): the real one follows
            return
        self.status = status
        self._state = _BODY

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if self.status is None:  # the interim response ended
            self._framed = False
            return
        # Asked here: llhttp clears the message's flags once this callback returns.
        self.keep_alive = self._parser.should_keep_alive()
        self._complete = True

    # --- one exchange ---------------------------------------------------------------------

    def send(self, request: bytes) -> None:
        assert self.transport is not None
        self._reset()
        self._state = _HEAD
        self._parser = httptools.HttpResponseParser(self)
        # Read before the write: the bytes reach the kernel inside it, and after it another thread
        # (a server in this process, in tests) may hold the GIL before this one reads the clock.
        before_s = self._clock()
        self.transport.write(request)
        if not self._write_paused:
            self.sent_s = before_s
        self._last_read_s = self._loop.time()
        self._timer = self._loop.call_at(self._last_read_s + self._read_timeout_s, self._check_read_timeout)

    def take(self) -> list[Chunk]:
        """The chunks decoded since the last call, in order."""
        ready = self._ready
        if not ready:
            return []
        self._ready = []
        return ready

    async def wait(self) -> None:
        self._waiter = waiter = self._loop.create_future()
        await waiter

    def close(self) -> None:
        self._cancel_timer()
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    # --- inside -----------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _take_body(self, now: float) -> None:
        """The payload this read carried, decoded as one piece: its events share the read's stamp."""
        pieces = self._body_pieces
        if not pieces:
            return
        payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        if self.status != 200:
            if len(self.error_body) < MAX_ERROR_BODY_BYTES:
                self.error_body += payload
            return
        try:
            self._sse.decode(payload, now, self._ready)
        except MalformedStream as exc:
            self._fail("malformed_sse", str(exc))

    def _end(self, now: float) -> None:
        if self.status == 200:
            try:
                self._sse.decode_rest(now, self._ready)
            except MalformedStream as exc:
                self._fail("malformed_sse", str(exc))
                return
        self._state = _FINISHED
        self.finished = True
        self._cancel_timer()

    def _fail(self, reason: str, detail: str) -> None:
        if self.failure is None:
            self.failure = (reason, detail)
        self._state = _FINISHED
        self.keep_alive = False
        self.close()
        self._wake()

    def _check_read_timeout(self) -> None:
        self._timer = None
        if self._state not in (_HEAD, _BODY):
            return
        due_s = self._last_read_s + self._read_timeout_s
        if self._loop.time() >= due_s:
            self._fail("timeout", "no bytes within the read timeout")
        else:  # re-armed once per timeout, not once per read
            self._timer = self._loop.call_at(due_s, self._check_read_timeout)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def verified_tls_context() -> ssl.SSLContext:
    """What aiohttp's default session uses (aiohttp/connector.py ``_make_ssl_context(True)``): the
    system's trust store (or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), the host name checked, HTTP/1.1 by ALPN."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


class HttpStreamClient:
    """Keep-alive connections to one origin, most recently used first; POSTs that stream back."""

    def __init__(self, base_url: str, *, clock: Clock, read_timeout_s: float, connect_timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.secure else 80)
        self.authority = parts.netloc.rpartition("@")[2]
        self.path_prefix = parts.path.rstrip("/")
        self._clock = clock
        self._read_timeout_s = read_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._ssl: ssl.SSLContext | None = verified_tls_context() if self.secure else None
        self._idle: list[StreamConnection] = []
        self._open: set[StreamConnection] = set()

    def request_bytes(self, path: str, body: bytes) -> bytes:
        head = (
            f"POST {self.path_prefix}{path} HTTP/1.1\r\nHost: {self.authority}\r\nUser-Agent: gemmaserve\r\n"
            f"Accept: text/event-stream\r\nAccept-Encoding: identity\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body

    async def acquire(self) -> StreamConnection:
        """An idle open connection, else a new one. Raises OSError (ssl.SSLError for a refused
        certificate), or TimeoutError past the connect timeout."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)
        loop = asyncio.get_running_loop()
        clock, read_timeout_s = self._clock, self._read_timeout_s
        kwargs: dict[str, Any] = {"ssl": self._ssl, "server_hostname": self.host} if self._ssl else {}
        async with asyncio.timeout(self._connect_timeout_s):
            _, protocol = await loop.create_connection(
                lambda: StreamConnection(clock, read_timeout_s), self.host, self.port, **kwargs
            )
        self._open.add(protocol)
        return protocol

    def release(self, connection: StreamConnection, *, reusable: bool) -> None:
        if reusable and connection.finished and connection.keep_alive and not connection.closed:
            self._idle.append(connection)
        else:
            connection.close()
            self._open.discard(connection)

    def close(self) -> None:
        for connection in self._open:
            connection.close()
        self._open.clear()
        self._idle.clear()
