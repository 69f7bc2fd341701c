"""The benchmark's streaming connection on httptools: read stamps, framing, keep-alive, faults.

Two layers. The connection fed bytes directly (a recording transport stands in for the socket):
every split of the wire, the clock reading each chunk carries, what malformed or cut-short bytes
become. Then a raw asyncio server on 127.0.0.1 that writes exactly the bytes each test scripts,
in the pieces it scripts, on asyncio's loop and uvloop; the mock server's tests in
``test_transports.py`` cover the faults end to end.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import uvloop

from gemmaserve.bench.http_stream import DELIVERY_INTERVAL_S, StreamConnection
from gemmaserve.bench.sse import Chunk
from gemmaserve.bench.transports import ChatRequest, HttpTransport, RequestFailed

EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n'
LAST = b'data: {"choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked(*parts: bytes, extension: bytes = b"", trailers: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in parts) + b"0\r\n" + trailers + b"\r\n"


class CountingClock:
    """Each reading is the next integer: a chunk's arrival says which clock reading stamped it."""

    def __init__(self) -> None:
        self.readings = itertools.count()

    def __call__(self) -> float:
        return float(next(self.readings))


class RecordingTransport(asyncio.Transport):
    """Stands in for the socket: keeps what was written and whether it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class Fed:
    """What a connection did with scripted reads: the chunks each read released, its state after each."""

    def __init__(self, pieces: Sequence[bytes], *, eof: bool = False) -> None:
        self.transport = RecordingTransport()
        self.taken: list[list[Chunk]] = []
        self.finished: list[bool] = []
        self.closed_by_connection = False

        async def go() -> StreamConnection:
            connection = StreamConnection(CountingClock(), read_timeout_s=60.0)
            connection.connection_made(self.transport)
            connection.send(b"POST / HTTP/1.1\r\n\r\n")  # the clock's reading 0; read i is reading i + 1
            for piece in pieces:
                connection.data_received(piece)
                self.taken.append(connection.take())
                self.finished.append(connection.finished)
            if eof:
                connection.eof_received()
                connection.connection_lost(None)
                self.taken.append(connection.take())
            self.closed_by_connection = self.transport.closed
            connection.close()
            return connection

        self.connection = asyncio.run(go())

    @property
    def chunks(self) -> list[Chunk]:
        return [chunk for taken in self.taken for chunk in taken]


def _split(wire: bytes, rng: random.Random, most: int) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(wire)), k=min(len(wire) - 1, rng.randint(0, most))))
    return [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]


@pytest.mark.parametrize("seed", range(200))
def test_chunked_replies_decode_whole_and_stamp_each_event_with_the_read_that_completed_it(seed: int) -> None:
    rng = random.Random(seed)
    texts = ["".join(rng.choice("ab é漢") for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 12))]
    body = b"".join(EVENT % text.encode() for text in texts) + LAST
    # The body cut into chunks anywhere, not on event boundaries; each body byte's place on the wire kept.
    parts = _split(body, rng, 8)
    extension = rng.choice([b"", b";name=value", b";x"])
    trailers = rng.choice([b"", b"X-Trailer: 1\r\n"])
    wire = OK_HEAD + chunked(*parts, extension=extension, trailers=trailers)
    place_on_wire = []
    offset = len(OK_HEAD)
    for part in parts:
        offset += len(b"%x%s\r\n" % (len(part), extension))
        place_on_wire += range(offset, offset + len(part))
        offset += len(part) + 2
    pieces = _split(wire, rng, 20)
    piece_ends = list(itertools.accumulate(len(piece) for piece in pieces))

    fed = Fed(pieces)

    event_ends = [i + 2 for i in range(len(body) - 1) if body[i : i + 2] == b"\n\n"]  # each event's last byte + 1
    read_of_byte = [next(r for r, end in enumerate(piece_ends) if place < end) for place in place_on_wire]
    expected_stamps = [1.0 + read_of_byte[end - 1] for end in event_ends]
    assert [c.content for c in fed.chunks] == [*texts, "end", ""]
    assert [c.arrival_s for c in fed.chunks] == expected_stamps
    assert fed.chunks[-1].done and fed.chunks[-2].finish_reason == "length"
    assert fed.finished == [False] * (len(pieces) - 1) + [True]  # ends with the trailer's last byte, not before
    assert fed.connection.failure is None and fed.connection.keep_alive and not fed.closed_by_connection


def test_the_request_is_written_after_the_send_stamp_and_before_any_read() -> None:
    fed = Fed([OK_HEAD + chunked(LAST)])
    assert fed.transport.written == b"POST / HTTP/1.1\r\n\r\n"
    assert fed.connection.sent_s == 0.0 and [c.arrival_s for c in fed.chunks] == [1.0, 1.0]


def test_a_write_still_buffered_is_stamped_when_it_drains_or_by_the_first_read_of_the_answer() -> None:
    class SlowSocket(RecordingTransport):
        """Keeps the request in its buffer: the protocol is told to pause writing."""

        def write(self, data: bytes | bytearray | memoryview) -> None:
            super().write(data)
            connection.pause_writing()

    async def go(drains: bool) -> tuple[float | None, list[Chunk]]:
        nonlocal connection
        connection = StreamConnection(CountingClock(), read_timeout_s=60.0)
        connection.connection_made(SlowSocket())
        connection.send(b"POST / HTTP/1.1\r\n\r\n")  # reading 0, before the write: not the send time
        assert connection.sent_s is None
        if drains:
            connection.resume_writing()  # reading 1
        connection.data_received(OK_HEAD + chunked(LAST))
        connection.close()
        return connection.sent_s, connection.take()

    connection: StreamConnection
    sent_s, chunks = asyncio.run(go(drains=True))
    assert sent_s == 1.0 and [c.arrival_s for c in chunks] == [2.0, 2.0]
    sent_s, chunks = asyncio.run(go(drains=False))
    assert sent_s == 1.0 and [c.arrival_s for c in chunks] == [1.0, 1.0]


MALFORMED = {
    "status code": b"HTTP/1.1 2x0 OK\r\n\r\n",
    "protocol name": b"HTTQ/1.1 200 OK\r\n\r\n",
    "header line": b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    "content length": b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
    "two lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab",
    "length and chunked": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    "chunk size": OK_HEAD + b"zz\r\nab\r\n0\r\n\r\n",
    "chunk size with underscore": OK_HEAD + b"1_0\r\n",
    "chunk longer than its size": OK_HEAD + b"2\r\nabc\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("whole", [True, False], ids=["one read", "byte by byte"])
def test_malformed_responses_are_protocol_errors_saying_what_was_wrong(name: str, whole: bool) -> None:
    wire = MALFORMED[name]
    fed = Fed([wire] if whole else [wire[i : i + 1] for i in range(len(wire))])
    assert fed.connection.failure is not None
    reason, detail = fed.connection.failure
    assert reason == "protocol_error" and detail.startswith("ProtocolError: ")
    assert len(detail) > len("ProtocolError: ") + 5  # llhttp's reason follows
    assert not fed.connection.finished and not any(fed.finished) and fed.closed_by_connection and fed.chunks == []


@pytest.mark.parametrize(
    "wire",
    [
        b"HTTP/1.1 200 OK\r\nContent-Le",  # inside the head
        OK_HEAD + chunked(EVENT % b"a")[:-5] + b"9\r\nda",  # inside a chunk
        OK_HEAD + chunked(EVENT % b"a")[:-5],  # between chunks, the last one never came
        b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + EVENT % b"a",  # short of its length
    ],
)
def test_a_reply_cut_short_by_the_server_closing_is_truncated_never_finished(wire: bytes) -> None:
    fed = Fed([wire], eof=True)
    assert fed.connection.failure is not None and fed.connection.failure[0] == "truncated_stream"
    assert not fed.connection.finished
    assert [c.content for c in fed.chunks] == (["a"] if b"data:" in wire else [])  # what came is kept


def test_a_body_without_a_length_ends_with_the_connection_and_an_unended_event_counts() -> None:
    fed = Fed([b"HTTP/1.0 200 OK\r\n\r\n" + EVENT % b"a", LAST[:-2]], eof=True)
    assert fed.connection.failure is None and fed.connection.finished and not fed.connection.keep_alive
    assert [(c.content, c.arrival_s) for c in fed.chunks] == [("a", 1.0), ("end", 2.0), ("", 3.0)]  # EOF: reading 3


def test_an_interim_response_is_passed_over() -> None:
    fed = Fed([b"HTTP/1.1 100 Continue\r\n\r\n", OK_HEAD + chunked(EVENT % b"a" + LAST)])
    assert fed.connection.status == 200 and fed.connection.finished
    assert [c.content for c in fed.chunks] == ["a", "end", ""]


def test_bytes_after_the_reply_end_it_but_the_connection_is_not_reused() -> None:
    fed = Fed([OK_HEAD + chunked(LAST) + b"HTTP/1.1 200 OK\r\n\r\n"])
    assert fed.connection.failure is None and fed.connection.finished
    assert not fed.connection.keep_alive and fed.closed_by_connection
    fed = Fed([OK_HEAD + chunked(LAST), b"HTTP/1.1 200 OK\r\n"])  # in a later read
    assert fed.connection.finished and not fed.connection.keep_alive and fed.closed_by_connection


def test_connection_close_is_not_kept_alive() -> None:
    fed = Fed([b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(LAST)])
    assert fed.connection.finished and not fed.connection.keep_alive


def test_an_error_reply_keeps_its_body_and_decodes_no_events() -> None:
    body = json.dumps({"error": {"message": "maximum context length is 512 tokens"}}).encode()
    fed = Fed([b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body])
    assert fed.connection.status == 400 and fed.connection.finished and fed.connection.error_body == body
    assert fed.chunks == []


class SetClock:
    """Reads whatever the test set last."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _wakes(reads: Sequence[tuple[float, bytes]], *, eof: bool = False) -> tuple[StreamConnection, list[list[Chunk]]]:
    """A request waiting on the connection as the transport waits; what each wake gave it.

    ``reads``: (clock reading, bytes); after each read the request runs if it was woken.
    """

    async def go() -> tuple[StreamConnection, list[list[Chunk]]]:
        clock = SetClock()
        connection = StreamConnection(clock, read_timeout_s=60.0)
        connection.connection_made(RecordingTransport())
        connection.send(b"POST / HTTP/1.1\r\n\r\n")
        woken: list[list[Chunk]] = []

        async def request() -> None:
            while not connection.finished and connection.failure is None:
                await connection.wait()
                woken.append(connection.take())

        task = asyncio.create_task(request())
        await asyncio.sleep(0)
        for now, piece in reads:
            clock.now = now
            connection.data_received(piece)
            for _ in range(3):
                await asyncio.sleep(0)
        if eof:
            connection.eof_received()
            connection.connection_lost(None)
        async with asyncio.timeout(10):
            await task
        connection.close()
        return connection, woken

    return asyncio.run(go())


def test_streaming_chunks_wake_the_request_at_most_once_per_interval_and_keep_their_reads_stamps() -> None:
    step_s = 0.3 * DELIVERY_INTERVAL_S
    reads = [(0.0, OK_HEAD)] + [(step_s * (k + 1), chunked(EVENT % b"%d" % k)[:-5]) for k in range(8)]
    connection, woken = _wakes([*reads, (step_s * 9, chunked(LAST)[:-5] + b"0\r\n\r\n")])
    assert connection.finished and connection.failure is None
    # the status at once; the first chunk at once; then at most one wake per interval; the end at once
    assert [[c.content for c in taken] for taken in woken] == [
        [],
        ["0"],
        ["1", "2", "3", "4"],
        ["5", "6", "7", "end", ""],
    ]
    stamps = [c.arrival_s for taken in woken for c in taken]
    assert stamps == [step_s * (k + 1) for k in range(8)] + [step_s * 9] * 2


@pytest.mark.parametrize(
    ("last", "eof", "reason"),
    [
        (b"zz\r\n", False, "protocol_error"),
        (chunked(b'data: {"choices": [\n\n')[:-5], False, "malformed_sse"),
        (b"", True, "truncated_stream"),
    ],
)
def test_chunks_held_back_are_handed_over_with_the_failure(last: bytes, eof: bool, reason: str) -> None:
    reads = [(0.0, OK_HEAD)] + [(0.0, chunked(EVENT % b"%d" % k)[:-5]) for k in range(5)] + [(0.0, last)]
    connection, woken = _wakes(reads, eof=eof)  # the clock stands still: no interval ever passes
    assert connection.failure is not None and connection.failure[0] == reason
    assert [[c.content for c in taken] for taken in woken] == [[], ["0"], ["1", "2", "3", "4"]]


class ScriptedServer:
    """Answers each request with scripted pieces: (delay before, bytes); counts connections."""

    def __init__(
        self,
        replies: list[list[tuple[float, bytes]]],
        *,
        close_after: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.replies = iter(replies)
        self.close_after = close_after
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                self.requests.append(head + await reader.readexactly(length))
                for delay_s, piece in next(self.replies):
                    await asyncio.sleep(delay_s)
                    writer.write(piece)
                    await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, StopIteration, ConnectionError, ssl.SSLError):
            pass
        finally:  # also when the test's loop ends and cancels this
            writer.close()


def _script(*bodies: bytes) -> list[tuple[float, bytes]]:
    return [(0.0, OK_HEAD)] + [(0.01, chunked(body)[:-5]) for body in bodies] + [(0.0, b"0\r\n\r\n")]


async def _collect(transport: HttpTransport, request: ChatRequest) -> list[Chunk]:
    chunks: list[Chunk] = []
    stream: AsyncIterator[Chunk] = transport.stream(request)
    async with asyncio.timeout(10):  # a hang is a failure, not a stuck test
        async for chunk in stream:
            chunks.append(chunk)
    return chunks


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _run(loop: str, coroutine: Any) -> Any:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(coroutine)


async def _stream_once(url: str, *, clock: Any = None, request: ChatRequest | None = None) -> list[Chunk]:
    transport = HttpTransport(url, timeout_s=5, **({"clock": clock} if clock else {}))
    try:
        return await _collect(transport, request or ChatRequest("p", 4))
    finally:
        await transport.aclose()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_events_of_one_read_share_its_stamp_and_the_send_is_stamped_first(loop: str) -> None:
    script = _script(EVENT % b"a" + EVENT % b"b", EVENT % b"c", LAST)

    async def go() -> list[Chunk]:
        async with ScriptedServer([script]) as url:
            return await _stream_once(url, clock=CountingClock())

    chunks = _run(loop, go())
    assert chunks[0].sent
    events = chunks[1:]
    assert [c.content for c in events] == ["a", "b", "c", "end", ""]
    a, b, c, end, done = (c.arrival_s for c in events)
    assert a == b < c < end == done  # one read, one stamp; a later read, a later stamp
    assert chunks[0].arrival_s < a


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_events_split_over_reads_in_odd_places_arrive_with_the_read_that_completes_them(loop: str) -> None:
    wire = OK_HEAD + chunked(EVENT % "é".encode() + LAST)
    script = [(0.01, wire[i : i + 7]) for i in range(0, len(wire), 7)]

    async def go() -> list[Chunk]:
        async with ScriptedServer([script]) as url:
            return await _stream_once(url)

    chunks = _run(loop, go())
    assert [c.content for c in chunks if not c.sent] == ["é", "end", ""]
    assert chunks[-1].done


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_keep_alive_reuses_one_connection_and_close_opens_a_new_one(loop: str) -> None:
    async def go(close_after: bool) -> tuple[int, list[list[str]]]:
        server = ScriptedServer([_script(EVENT % b"x", LAST)] * 3, close_after=close_after)
        async with server as url:
            transport = HttpTransport(url, timeout_s=5)
            try:
                texts = []
                for _ in range(3):
                    texts.append([c.content for c in await _collect(transport, ChatRequest("p", 2)) if not c.sent])
                    await asyncio.sleep(0.05)  # the server's close of an idle connection arrives
            finally:
                await transport.aclose()
        return server.connections, texts

    connections, texts = _run(loop, go(close_after=False))
    assert connections == 1 and texts == [["x", "end", ""]] * 3
    connections, texts = _run(loop, go(close_after=True))
    assert connections == 3 and texts == [["x", "end", ""]] * 3


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\n",  # no length: the body ends when the server closes
    ],
)
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_bodies_framed_by_length_or_by_close(head: bytes, loop: str) -> None:
    body = EVENT % b"x" + LAST
    wire = (head % len(body) if b"%d" in head else head) + body

    async def go() -> list[str]:
        async with ScriptedServer([[(0.0, wire)]], close_after=True) as url:
            return [c.content for c in await _stream_once(url) if not c.sent]

    assert _run(loop, go()) == ["x", "end", ""]


def test_an_error_status_carries_the_servers_reason() -> None:
    body = json.dumps({"error": {"message": "maximum context length is 512 tokens"}}).encode()
    reply = [(0.0, b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body))]

    async def go() -> RequestFailed:
        async with ScriptedServer([reply]) as url:
            with pytest.raises(RequestFailed) as caught:
                await _stream_once(url)
            return caught.value

    failure = asyncio.run(go())
    assert failure.reason == "http_400" and "maximum context length is 512 tokens" in failure.detail


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_malformed_bytes_from_a_server_fail_the_request_by_name(loop: str) -> None:
    reply = [(0.0, OK_HEAD + chunked(EVENT % b"a")[:-5]), (0.01, b"zz\r\n")]

    async def go() -> tuple[list[Chunk], RequestFailed]:
        got: list[Chunk] = []
        async with ScriptedServer([reply]) as url:
            transport = HttpTransport(url, timeout_s=5)
            try:
                with pytest.raises(RequestFailed) as caught:
                    async with asyncio.timeout(10):
                        async for chunk in transport.stream(ChatRequest("p", 2)):
                            got.append(chunk)
            finally:
                await transport.aclose()
            return got, caught.value

    got, failure = _run(loop, go())
    assert failure.reason == "protocol_error" and "chunk size" in failure.detail
    assert [c.content for c in got if not c.sent] == ["a"]  # what arrived before the fault is kept


def test_the_request_is_one_json_post_with_its_length() -> None:
    server = ScriptedServer([_script(LAST)])

    async def go() -> None:
        async with server as url:
            await _stream_once(url + "/prefix", request=ChatRequest("hello", 3, ignore_eos=True))

    asyncio.run(go())
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /prefix/v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nContent-Length: %d\r\n" % len(body) in head + b"\r\n"
    assert json.loads(body) == ChatRequest("hello", 3, ignore_eos=True).body()
