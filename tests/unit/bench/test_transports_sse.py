"""The SSE decoder and the event decoder against slow references, over every kind of byte split.

The references are written for clarity, not speed: a line-at-a-time parser straight from the
WHATWG event-stream rules (html.spec.whatwg.org, "Interpreting an event stream") and a
``json.loads`` of every event. The fast code must give the same events, in the same read, with
the same fields, for streams that mix vLLM's shapes with the wire format's awkward parts.
"""

from __future__ import annotations

import json
import random

import pytest

from gemmaserve.bench.sse import Chunk, MalformedStream, SseDecoder, decode_event

HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'

STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\r\n\r\n'
    b'event: message\ndata: {"choices":[{"delta":{"content":"lo"},"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


class ReferenceSse:
    """One line at a time, as the spec reads a stream: CRLF, LF and CR all end a line."""

    def __init__(self) -> None:
        self.text = b""
        self.data: list[bytes] = []
        self.skip_lf = False

    def feed(self, piece: bytes) -> list[bytes]:
        events: list[bytes] = []
        for byte in piece:
            char = bytes([byte])
            if self.skip_lf:
                self.skip_lf = False
                if char == b"\n":
                    continue
            if char in (b"\r", b"\n"):
                self.skip_lf = char == b"\r"
                self.line(self.text, events)
                self.text = b""
            else:
                self.text += char
        return events

    def line(self, line: bytes, events: list[bytes]) -> None:
        if not line:
            if self.data:
                events.append(b"\n".join(self.data))
            self.data = []
            return
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            self.data.append(value)

    def close(self) -> list[bytes]:
        """A last event the server did not end with a blank line still counts (as before)."""
        return self.feed(b"\n\n") if self.text or self.data else []


def reference_decode(data: bytes, arrival_s: float) -> Chunk:
    """What one event means, through a full json.loads (the rules of vLLM's stream shape)."""
    text = data.decode("utf-8", errors="replace")
    if text == "[DONE]":
        return Chunk(arrival_s, done=True)
    try:
        document = json.loads(text)
    except ValueError:
        raise MalformedStream(f"malformed SSE data (not JSON): {text[:80]!r}") from None
    if not isinstance(document, dict):
        raise MalformedStream("not an object")
    if "error" in document:
        raise MalformedStream("error event")
    content, finish_reason, token = "", None, False
    choices = document.get("choices") or ()
    if choices:
        choice = choices[0]
        delta = choice.get("delta") or {}
        content = (
            delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or choice.get("text") or ""
        )
        finish_reason = choice.get("finish_reason")
        token = not ("role" in delta and not content and finish_reason is None and not delta.get("tool_calls"))
    usage = document.get("usage")
    completion_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Chunk(arrival_s, content, token, False, finish_reason, completion_tokens, prompt_tokens)


def _per_read(decoder: SseDecoder | ReferenceSse, pieces: list[bytes]) -> list[list[bytes]]:
    """The events each read completed; the last entry is what closing the stream flushed."""
    return [decoder.feed(piece) for piece in pieces] + [decoder.close()]


def _random_split(rng: random.Random, stream: bytes) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(stream)), k=min(len(stream) - 1, rng.randint(0, 12))))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


WORDS = ["t1 ", "", "héllo", "日本", "🦙", 'quote " and \\ back', "tab\tnew\nline", "\u2028", "x" * 300, "é"]
SHAPES = [
    # each makes one event's payload (what follows "data: ")
    lambda rng: (HEAD + '[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}').encode(),
    lambda rng: (
        HEAD
        + '[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null,"token_ids":null}]}'  # noqa: UP031
        % json.dumps(rng.choice(WORDS), ensure_ascii=rng.random() < 0.5)
    ).encode(),
    lambda rng: (
        (
            HEAD
            + '[{"index":0,"delta":{"reasoning_content":%s},"finish_reason":null}]}' % json.dumps(rng.choice(WORDS))  # noqa: UP031
        ).encode()
    ),
    lambda rng: (
        HEAD + '[{"index":0,"delta":{"content":"end"},"finish_reason":"length","stop_reason":null}]}'
    ).encode(),
    lambda rng: (HEAD + '[],"usage":{"prompt_tokens":7,"total_tokens":9,"completion_tokens":2}}').encode(),
    lambda rng: b"[DONE]",
]


def _random_stream(rng: random.Random) -> bytes:
    """vLLM-shaped events with the wire format's other legal forms mixed in."""
    out = []
    for _ in range(rng.randint(1, 12)):
        payload = rng.choice(SHAPES)(rng)
        newline = rng.choice([b"\n", b"\n", b"\r\n", b"\r"])
        kind = rng.random()
        if kind < 0.1:
            out.append(b": keep-alive" + newline + newline)
        elif kind < 0.2:
            out.append(b"event: message" + newline + b"id: 7" + newline + b"data: " + payload + newline + newline)
        elif kind < 0.25:  # one event's data over two lines (JSON allows a newline between tokens)
            cut = payload.find(b",")
            out.append(b"data: " + payload[:cut] + newline + b"data:" + payload[cut:] + newline + newline)
        elif kind < 0.3:
            out.append(b"data:" + payload + newline + newline + newline)  # no space, an extra blank line
        else:
            out.append(b"data: " + payload + newline + newline)
    return b"".join(out)


def test_events_are_the_same_whatever_the_chunk_boundaries() -> None:
    whole = _per_read(SseDecoder(), [STREAM])
    assert len(whole[0]) == 5
    for cut in range(1, len(STREAM)):
        pieces = [STREAM[:cut], STREAM[cut:]]
        assert _per_read(SseDecoder(), pieces) == _per_read(ReferenceSse(), pieces)
    single_bytes = [bytes([b]) for b in STREAM]
    assert _per_read(SseDecoder(), single_bytes) == _per_read(ReferenceSse(), single_bytes)


@pytest.mark.parametrize("seed", range(300))
def test_random_streams_split_at_random_points_match_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    stream = _random_stream(rng)
    for _ in range(5):
        pieces = _random_split(rng, stream)
        assert _per_read(SseDecoder(), pieces) == _per_read(ReferenceSse(), pieces), pieces


def test_a_crlf_split_between_reads_is_one_line_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == [b"a"]  # the blank line is whole at its CR: the event is due now
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [b"b"]


def test_several_events_in_one_read_come_out_of_that_read() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2\n\ndata: 3\n") == [b"1", b"2"]
    assert decoder.feed(b"\n") == [b"3"]


def test_multiline_data_is_joined_and_unterminated_tail_is_flushed() -> None:
    assert _per_read(SseDecoder(), [b"data: a\ndata: b\n\n"]) == [[b"a\nb"], []]
    decoder = SseDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.pending_bytes > 0
    assert decoder.close() == [b"[DONE]"]


def test_multibyte_characters_split_at_every_byte_decode_whole() -> None:
    text = "héllo 日本 🦙"
    event = b'data: {"choices":[{"delta":{"content":' + json.dumps(text, ensure_ascii=False).encode() + b"}}]}\n\n"
    for cut in range(1, len(event)):
        decoder = SseDecoder()
        events = decoder.feed(event[:cut]) + decoder.feed(event[cut:])
        assert [decode_event(e, 0.0).content for e in events] == [text]


def test_chat_events_decode_to_chunks() -> None:
    role, content, last, usage, done = (decode_event(e, 1.5) for e in _per_read(SseDecoder(), [STREAM])[0])
    assert role.content == "" and role.finish_reason is None and not role.token
    assert content.content == "Hel" and content.token and content.arrival_s == 1.5
    assert last.content == "lo" and last.finish_reason == "length" and last.token
    assert usage.content == "" and usage.completion_tokens == 2 and usage.prompt_tokens == 3 and not usage.token
    assert done.done and not usage.done


def test_reasoning_content_counts_as_content() -> None:
    assert decode_event(b'{"choices":[{"delta":{"reasoning_content":"hmm"}}]}', 0.0).content == "hmm"


@pytest.mark.parametrize(
    "payload", [b'{"choices": [', b"[1, 2]", b'{"error": {"message": "engine died"}}', b'{"error": "x", "choices": []}']
)
def test_malformed_and_error_events_raise(payload: bytes) -> None:
    with pytest.raises(MalformedStream):
        decode_event(payload, 0.0)


def _mutations(rng: random.Random, event: bytes) -> list[bytes]:
    """Near misses of the common token event: each must decode as json.loads reads it, or fail as it does."""
    variants = [event]
    for _ in range(6):
        position = rng.randrange(len(event))
        variants.append(event[:position] + event[position + 1 :])  # a byte dropped
        variants.append(event[:position] + bytes([rng.choice(b'"\\{}[],:0nu \x01\xff')]) + event[position:])
    for old, new in [
        (b'"finish_reason":null', b'"finish_reason":"stop"'),
        (b'"finish_reason":null', b'"finish_reason":null,"finish_reason":"stop"'),
        (b'"logprobs":null', b'"logprobs":{"content":[]}'),
        (b'"delta":{', b'"delta":{"role":"assistant",'),
        (b'"delta":{', b'"delta":{"tool_calls":[{"index":0}],'),
        (b'"content":', b'"text":'),
        (b'"index":0', b'"index":0,"text":"other"'),
        (b'"model":"m"', b'"model":"m","error":null'),
        (b'"model":"m"', b'"model":"m","usage":{"completion_tokens":4}'),
        (b'"model":"m"', b'"model":"m","usage":null'),
        (b'"model":"m"', b'"model":"m","choices":null'),
        (b"}]}", b'}],"choices":[]}'),
        (b"}]}", b'},{"index":1,"delta":{"content":"second"}}]}'),
        (b'"created":1', b'"created":1.5e3'),
        (b'"created":1', b'"created":01'),
        (b'"id":"chatcmpl-1"', b'"id":"chat\\u00e9"'),
        (b'"id":"chatcmpl-1"', b'"id":"bad\\q"'),
        (b'"id":"chatcmpl-1"', b'"id":"bad\\u12"'),
        (b":", b": "),
    ]:
        variants.append(event.replace(old, new, 1))
    return variants


@pytest.mark.parametrize("seed", range(200))
def test_token_events_decode_as_json_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3))) + "".join(
        chr(rng.choice([rng.randrange(0x20), rng.randrange(0x20, 0x7F), rng.randrange(0x80, 0xD800)]))
        for _ in range(rng.randint(0, 4))
    )
    event = (
        HEAD
        + '[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null,"token_ids":null}]}'  # noqa: UP031
        % json.dumps(text, ensure_ascii=rng.random() < 0.5)
    ).encode()
    for variant in _mutations(rng, event):
        try:
            expected: Chunk | type[MalformedStream] = reference_decode(variant, 2.0)
        except MalformedStream:
            expected = MalformedStream
        if expected is MalformedStream:
            with pytest.raises(MalformedStream):
                decode_event(variant, 2.0)
        else:
            assert decode_event(variant, 2.0) == expected, variant


def test_the_common_token_event_keeps_its_text_exactly() -> None:
    for text in [*WORDS, "\x00", "a\\b", "\ud83e"]:
        event = (HEAD + '[{"index":0,"delta":{"content":%s},"finish_reason":null}]}' % json.dumps(text)).encode()  # noqa: UP031
        assert decode_event(event, 3.0) == Chunk(3.0, text, True)
