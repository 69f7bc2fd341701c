"""The stream decoder's short path against the slow references, read by read.

:class:`StreamDecoder` decodes a read that is exactly one token event shaped like the stream's
previous one without splitting or matching it. Whatever a stream holds, each read must give the
chunks (and the failure, at the same event) that the line-at-a-time reference and a full
``json.loads`` of every event give: vLLM's streams with the wire format's awkward forms mixed in
(events split across reads, several in one read, ``data:`` with no space or two, CR and CRLF
line ends, comments and keep-alives, other fields, non-JSON data, ``[DONE]``) and near misses of
the token event arriving where the short path would take them.
"""

from __future__ import annotations

import json
import random

import pytest

from gemmaserve.bench.sse import Chunk, MalformedStream, StreamDecoder

from .test_transports_sse import HEAD, WORDS, ReferenceSse, _mutations, reference_decode

TOKEN = '[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null,"token_ids":null}]}'
FAILED = "malformed"


def token_payload(text: str, *, head: str = HEAD, ensure_ascii: bool = True) -> bytes:
    return (head + TOKEN % json.dumps(text, ensure_ascii=ensure_ascii)).encode()


def event(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


def reference_reads(pieces: list[bytes]) -> list[list[Chunk | str]]:
    """Each read's chunks (stamped with the read's index) through the references; FAILED ends the stream."""
    sse = ReferenceSse()
    reads: list[list[Chunk | str]] = []
    for stamp, piece in enumerate([*pieces, None]):
        got: list[Chunk | str] = []
        reads.append(got)
        for data in sse.feed(piece) if piece is not None else sse.close():
            try:
                got.append(reference_decode(data, float(stamp)))
            except MalformedStream:
                got.append(FAILED)
                return reads
    return reads


def decoder_reads(pieces: list[bytes]) -> list[list[Chunk | str]]:
    """The same through one StreamDecoder; the last entry is what closing the stream flushed."""
    decoder = StreamDecoder()
    reads: list[list[Chunk | str]] = []
    for stamp, piece in enumerate([*pieces, None]):
        got: list[Chunk | str] = []
        reads.append(got)
        try:
            if piece is not None:
                decoder.decode(piece, float(stamp), got)  # type: ignore[arg-type]
            else:
                decoder.decode_rest(float(stamp), got)  # type: ignore[arg-type]
        except MalformedStream:
            got.append(FAILED)
            return reads
    return reads


def _text(rng: random.Random) -> str:
    """Mostly plain words (the short path's case), sometimes text that JSON must escape."""
    if rng.random() < 0.7:
        return rng.choice(["t1 ", "word ", "", "héllo", "日本", "🦙", "x" * 40])
    return rng.choice(WORDS) + chr(rng.choice([rng.randrange(0x20), rng.randrange(0x80, 0xD800), 0x22, 0x5C]))


def _awkward(rng: random.Random, payload: bytes) -> bytes:
    """One event in one of the wire format's other legal (or not) forms."""
    newline = rng.choice([b"\r\n", b"\r"])
    return rng.choice(
        [
            b"data: " + payload + newline + newline,  # CR or CRLF line ends
            b"data:" + payload + b"\n\n",  # no space after the colon
            b"data:  " + payload + b"\n\n",  # two spaces: the second is the data's
            b": keep-alive\n\n" + event(payload),  # a comment first
            event(payload) + b": keep-alive\n\n",  # a comment after, in the same read
            b"event: message\nid: 7\n" + event(payload),
            b"retry: 10\n" + event(payload),
            b"data: " + payload[:9] + b"\ndata:" + payload[9:] + b"\n\n",  # two data lines
            event(payload) + b"\n",  # an extra blank line
            event(payload) + event(payload),  # two events in one read
            event(payload)[:-1],  # the blank line comes in the next read
            b"\n" + event(payload),
            event(payload) + b"data: ",  # the next event starts in this read
        ]
    )


def _stream(rng: random.Random) -> list[bytes]:
    """A vLLM stream (one head throughout, as vLLM sends it) cut into reads, mostly one event a read."""
    head = HEAD.replace("chatcmpl-1", f"chatcmpl-{rng.randrange(10**6)}")
    reads = [event((head + '[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}').encode())]
    for _ in range(rng.randint(1, 30)):
        payload = token_payload(_text(rng), head=head, ensure_ascii=rng.random() < 0.5)
        kind = rng.random()
        if kind < 0.6:
            reads.append(event(payload))
        elif kind < 0.75:
            reads.append(_awkward(rng, payload))
        elif kind < 0.8:  # a near miss where the short path would take it
            reads.append(event(rng.choice(_mutations(rng, payload.replace(head.encode(), HEAD.encode())))))
        elif kind < 0.85:  # one byte changed, the length kept: the text stays where the short path looks
            position = rng.randrange(len(payload))
            swapped = payload[:position] + bytes([rng.choice(b'"\\{}[],:01nux \x01\xff')]) + payload[position + 1 :]
            reads.append(event(swapped))
        elif kind < 0.9:  # another head, or a reasoning model's text
            other = head.replace('"created":1', f'"created":{rng.randrange(2, 99)}')
            reads.append(event(token_payload(_text(rng), head=other)))
        elif kind < 0.95:
            reads.append(event(payload.replace(b'"content"', b'"reasoning_content"')))
        else:
            reads.append(event(rng.choice([b"[DONE]", b"not json", b'{"error": {"message": "x"}}', b"{}"])))
    tail = [
        event((head + '[{"index":0,"delta":{"content":"end"},"finish_reason":"length"}]}').encode()),
        event((head + '[],"usage":{"prompt_tokens":7,"completion_tokens":2}}').encode()),
        event(b"[DONE]"),
    ]
    reads += tail if rng.random() < 0.5 else [b"".join(tail)]
    if rng.random() < 0.3:  # some reads cut anywhere: the short path must not take half an event
        joined = b"".join(reads)
        cuts = sorted(rng.sample(range(1, len(joined)), k=min(len(joined) - 1, rng.randint(1, 20))))
        reads = [joined[a:b] for a, b in zip([0, *cuts], [*cuts, len(joined)], strict=True)]
    return reads


@pytest.mark.parametrize("seed", range(400))
def test_random_vllm_streams_decode_read_by_read_as_the_references_do(seed: int) -> None:
    pieces = _stream(random.Random(seed))
    assert decoder_reads(pieces) == reference_reads(pieces), pieces


def _learned(*reads: bytes) -> list[bytes]:
    """Two plain token events first: the decoder knows the stream's token shape before ``reads``."""
    return [event(token_payload("a ")), event(token_payload("b ")), *reads]


@pytest.mark.parametrize(
    "read",
    [
        event(token_payload("plain")),
        event(token_payload("")),
        event(token_payload('say "hi"')),
        event(token_payload("back\\slash")),
        event(token_payload("tab\there")),
        event(token_payload("é", ensure_ascii=True)),
        event(token_payload("é", ensure_ascii=False)),
        event(token_payload("x").replace(b'"x"', b'"\xff\xfe"')),  # not UTF-8: replaced, as before
        event(token_payload("x").replace(b'"x"', b'"a\x01b"')),  # a raw control character: not JSON
        event(token_payload("x").replace(b'"x"', b'"a"b"')),
        event(token_payload("x").replace(b'"x"', b'"a","content":"b"')),
        event(token_payload("x").replace(b'"x"', b'"a\nb"')),
        event(token_payload("x").replace(b'"x"', b'"a\r\n\r\ndata: "b"')),
        event(token_payload("x").replace(b'"x"', b'"a"}}]}\n\ndata: {"x":"b"')),  # two events joined
        event(token_payload("x").replace(b'"x"', b'"')),
        event(token_payload("x").replace(b'"x"', b"")),
        event(token_payload("x").replace(b'"x"', b"null")),
        event(token_payload("x").replace(b'"x"', b"7")),
        event(token_payload("x").replace(b'"x"', b'"x" ')),
        event(token_payload("x").replace(b'"finish_reason":null', b'"finish_reason":"stop"')),
        # the same length as the stream's token event, the text where it was: only the bytes around it differ
        event(token_payload("x").replace(b'"finish_reason":null', b'"finish_reason":"ab"')),
        event(token_payload("x").replace(b"}]}", b"}]]")),
        event(token_payload("x").replace(b'{"id"', b'["id"')),
        event(token_payload("x").replace(b'"model":"m"', b'"error":"m"')),
        event(token_payload("x").replace(b'"content"', b'"contenu"')),
        event(token_payload("x").replace(b'"created":1', b'"created":2')),
        event(token_payload("x").replace(b'"chatcmpl-1"', b'"chatcmpl-2"')),
        b"data: " + token_payload("x") + b"\r\n\r\n",
        b"data: " + token_payload("x") + b"\n\r\n",
        b"data:  " + token_payload("x") + b"\n\n",
        b"data:" + token_payload("x") + b"\n\n",
        b"data: " + token_payload("x") + b"\n\n\n",
        b"data: " + token_payload("x") + b"\n",
        b"data: " + token_payload("x"),
        b": keep-alive\n\n",
        b":\n\n",
        event(b"[DONE]"),
        event(b"[DONE] "),
        event(b"not json"),
        event(b""),
        event(b'{"error":{"message":"engine died"}}'),
        event(token_payload("x")) + event(token_payload("y")),
        event(token_payload("x")) + event(b"not json"),
    ],
)
def test_each_near_miss_after_the_shape_is_known_decodes_as_the_references_do(read: bytes) -> None:
    pieces = _learned(read, event(token_payload("after")))
    assert decoder_reads(pieces) == reference_reads(pieces)


def test_after_a_read_that_ends_inside_an_event_the_next_read_is_not_taken_alone() -> None:
    cut = event(token_payload("x"))
    for pieces in (
        _learned(b"data: " + token_payload("x")[:20], token_payload("x")[20:] + b"\n\n" + event(token_payload("y"))),
        _learned(cut[:-1], cut[-1:] + event(token_payload("y"))),  # the blank line split off
        _learned(b"data: " + token_payload("x") + b"\r", b"\n\r\n", event(token_payload("y"))),
        _learned(event(token_payload("x"))[:-2] + b"\r", event(token_payload("y"))),  # CR, then a whole event
        _learned(b"data: 1\n", event(token_payload("y"))),  # the same event goes on: two data lines
    ):
        assert decoder_reads(pieces) == reference_reads(pieces), pieces


def test_tokens_are_stamped_with_their_read_and_the_others_decode_fully() -> None:
    pieces = _learned(
        event(token_payload("c ")),
        event((HEAD + '[{"index":0,"delta":{"content":"d"},"finish_reason":"length"}]}').encode()),
        event((HEAD + '[],"usage":{"prompt_tokens":7,"completion_tokens":4}}').encode()),
        event(b"[DONE]"),
    )
    reads = decoder_reads(pieces)
    assert reads == [
        [Chunk(0.0, "a ", True)],
        [Chunk(1.0, "b ", True)],
        [Chunk(2.0, "c ", True)],
        [Chunk(3.0, "d", True, finish_reason="length")],
        [Chunk(4.0, completion_tokens=4, prompt_tokens=7)],
        [Chunk(5.0, done=True)],
        [],
    ]
    assert all(type(chunk) is Chunk for read in reads for chunk in read)


def test_a_malformed_event_after_good_ones_in_one_read_keeps_those_before_it() -> None:
    pieces = _learned(event(token_payload("x")) + event(b'{"choices": [') + event(token_payload("y")))
    assert decoder_reads(pieces)[-1] == [Chunk(2.0, "x", True), FAILED]
