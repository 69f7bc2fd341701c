from __future__ import annotations

import pytest

from gemmaserve.bench.sse import MalformedStream, SseDecoder, decode_chat_event

STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\r\n\r\n'
    b'event: message\ndata: {"choices":[{"delta":{"content":"lo"},"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def _decode_all(pieces: list[bytes]) -> list[str]:
    decoder = SseDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events + decoder.close()


def test_events_are_the_same_whatever_the_chunk_boundaries() -> None:
    whole = _decode_all([STREAM])
    assert len(whole) == 5
    for cut in range(1, len(STREAM)):
        assert _decode_all([STREAM[:cut], STREAM[cut:]]) == whole
    assert _decode_all([bytes([b]) for b in STREAM]) == whole


def test_multiline_data_is_joined_and_unterminated_tail_is_flushed() -> None:
    assert _decode_all([b"data: a\ndata: b\n\n"]) == ["a\nb"]
    decoder = SseDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.pending_bytes > 0
    assert decoder.close() == ["[DONE]"]


def test_chat_events_decode_to_deltas() -> None:
    role, content, last, usage, done = (decode_chat_event(e) for e in _decode_all([STREAM]))
    assert role.content == "" and role.finish_reason is None
    assert content.content == "Hel"
    assert last.content == "lo" and last.finish_reason == "length"
    assert usage.content == "" and usage.completion_tokens == 2 and usage.prompt_tokens == 3
    assert done.done and not usage.done


def test_reasoning_content_counts_as_content() -> None:
    assert decode_chat_event('{"choices":[{"delta":{"reasoning_content":"hmm"}}]}').content == "hmm"


@pytest.mark.parametrize("payload", ['{"choices": [', "[1, 2]", '{"error": {"message": "engine died"}}'])
def test_malformed_and_error_events_raise(payload: str) -> None:
    with pytest.raises(MalformedStream):
        decode_chat_event(payload)
