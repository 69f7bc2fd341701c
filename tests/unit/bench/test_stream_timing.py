"""Timing follows the stream, not the text: vLLM's real stream shape, tokens that decode to "".

The bytes below are what vLLM's ``serving_chat`` stream generator writes (0.26–0.34:
``chat_completion/serving.py``): a role-only chunk sent with the first token, one chunk per
engine step whose ``content`` may be "" (a token that decodes to nothing, half a UTF-8
character), ``finish_reason`` on the last token's chunk, a usage chunk with ``choices: []``
(``exclude_none``), then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from gemmaserve.bench import results
from gemmaserve.bench.engine import run_request
from gemmaserve.bench.metrics import compute_request_metrics
from gemmaserve.bench.sse import SseDecoder, decode_event
from gemmaserve.bench.transports import ChatRequest, Chunk
from gemmaserve.measurements.schema import ClientSettings, RequestKind, RequestRecord
from tests.support.bench.fixtures import decode_record

from .conftest import ScriptedClock, ScriptedTransport

HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'


def vllm_event(kind: str, text: str = "", finish: str | None = None, tokens: int = 0) -> bytes:
    if kind == "role":
        body = HEAD + (
            '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
            '"finish_reason":null}],"prompt_token_ids":null}'
        )
    elif kind == "token":
        tail = (
            ',"logprobs":null,"finish_reason":%s,"stop_reason":null,"token_ids":null}]}' % json.dumps(finish)  # noqa: UP031
            if finish
            else ',"logprobs":null,"finish_reason":null,"token_ids":null}]}'
        )
        body = HEAD + '[{"index":0,"delta":{"content":%s}' % json.dumps(text) + tail  # noqa: UP031
    elif kind == "usage":
        body = HEAD + '[],"usage":{"prompt_tokens":7,"total_tokens":%d,"completion_tokens":%d}}' % (7 + tokens, tokens)  # noqa: UP031
    else:
        body = "[DONE]"
    return b"data: " + body.encode() + b"\n\n"


def timed_chunks(texts: list[str], *, ttft_s: float, itl_s: float, usage_after_s: float = 0.2) -> list[Chunk]:
    """Decode a vLLM stream through the real SSE decoder; token k arrives at ttft + k·itl."""
    events: list[tuple[float, bytes]] = [(ttft_s, vllm_event("role"))]
    for k, text in enumerate(texts):
        finish = "length" if k == len(texts) - 1 else None
        events.append((ttft_s + k * itl_s, vllm_event("token", text, finish)))
    last = ttft_s + (len(texts) - 1) * itl_s
    events += [
        (last + usage_after_s, vllm_event("usage", tokens=len(texts))),
        (last + usage_after_s, vllm_event("done")),
    ]
    decoder = SseDecoder()
    chunks = []
    for arrival_s, data in events:
        for event in decoder.feed(data):
            chunks.append(decode_event(event, arrival_s))
    return chunks


def test_role_chunk_is_no_token_and_empty_content_chunks_are() -> None:
    role, empty, text = (
        decode_event(vllm_event(k, t)[6:-2], 0.0) for k, t in (("role", ""), ("token", ""), ("token", "hi"))
    )
    assert not role.token and empty.token and empty.content == "" and text.token
    usage = decode_event(vllm_event("usage", tokens=3)[6:-2], 0.0)
    assert not usage.token and usage.completion_tokens == 3


@pytest.mark.parametrize("pattern", ["all-empty", "text-then-empty", "empty-then-text", "every-third-empty"])
def test_timing_does_not_depend_on_which_tokens_have_text(pattern: str) -> None:
    n, ttft_s, itl_s = 64, 0.120, 0.003
    texts = {
        "all-empty": ["" for _ in range(n)],
        "text-then-empty": ["w " if k < n // 2 else "" for k in range(n)],
        "empty-then-text": ["" if k < n // 2 else "w " for k in range(n)],
        "every-third-empty": ["" if (k + 1) % 3 == 0 else "w " for k in range(n)],
    }[pattern]
    m = compute_request_metrics(0.0, timed_chunks(texts, ttft_s=ttft_s, itl_s=itl_s))
    assert m.ttft_s == pytest.approx(ttft_s)
    assert m.e2el_s == pytest.approx(ttft_s + (n - 1) * itl_s)  # the finish chunk, not the late usage
    assert len(m.itl_s) == n - 1 and all(gap == pytest.approx(itl_s) for gap in m.itl_s)
    assert m.tpot_s == pytest.approx(itl_s)
    assert m.output_tokens == n and m.usage_reported and m.token_chunks == n
    assert m.e2el_s - m.ttft_s == pytest.approx(sum(m.itl_s))


def test_empty_text_reply_with_full_usage_is_a_timing_success(scripted_clock: ScriptedClock) -> None:
    n = 16
    script: list[tuple[float, dict[str, object]]] = [(0.05, {"content": ""})]
    script += [
        (0.05 + k * 0.01, {"content": "", "token": True, "finish_reason": "length" if k == n - 1 else None})
        for k in range(n)
    ]
    script += [(0.3, {"completion_tokens": n}), (0.3, {"done": True})]
    request = ChatRequest("p", n, ignore_eos=True)
    outcome = asyncio.run(
        run_request(ScriptedTransport(scripted_clock, script), "r", request, clock=scripted_clock, timeout_s=5)
    )
    assert outcome.success, outcome.reason
    record = results.to_record(outcome, kind=RequestKind.DECODE, concurrency=1, repeat=0, run_started_s=0.0)
    assert record.success and record.empty_text and record.output_tokens == n
    assert record.e2el_s == pytest.approx(0.05 + 15 * 0.01)
    assert results.failure_summary([record]).empty_text_replies == 1
    assert results.failure_summary([record]).failed == 0


def test_empty_text_quality_answer_is_a_miss_not_a_failure(scripted_clock: ScriptedClock) -> None:
    from gemmaserve.measurements.questions import get_question_set

    question = get_question_set("published-40").questions[0]
    script: list[tuple[float, dict[str, object]]] = [
        (0.01, {"content": "", "token": True}),
        (0.02, {"content": "", "token": True, "finish_reason": "length"}),
        (0.02, {"completion_tokens": 2}),
        (0.02, {"done": True}),
    ]
    outcome = asyncio.run(
        run_request(
            ScriptedTransport(scripted_clock, script),
            "q",
            ChatRequest(question.prompt, 2),
            clock=scripted_clock,
            timeout_s=5,
        )
    )
    answer = results.quality_answer(question, outcome)
    assert outcome.success and answer.error is None and not answer.correct and answer.answer_text == ""


def test_request_body_sends_max_completion_tokens() -> None:
    body = ChatRequest("p", 33, ignore_eos=True).body("m")
    assert body["max_completion_tokens"] == 33 and "max_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}


def _decode_records(
    short_s: list[float], long_s: list[float], long_tpot_s: float, *, ttft_s: float = 0.01
) -> list[RequestRecord]:
    return [
        decode_record(
            tokens, i, e2el_s=wall, ttft_s=ttft_s, tpot_s=long_tpot_s if tokens == 512 else None, start_offset_s=0.0
        )
        for tokens, walls in ((16, short_s), (512, long_s))
        for i, wall in enumerate(walls)
    ]


def test_negative_intercept_is_flagged_not_a_fixed_cost() -> None:
    # The real failing case: 404.8 tok/s and an intercept of −10 ms, while TPOT said 3.12 ms.
    rate, intercept = 404.8, -0.010
    short = [intercept + 16 / rate] * 3
    long = [intercept + 512 / rate] * 3
    decode = results.decode_measurement(_decode_records(short, long, 0.00312), ClientSettings())
    assert decode.rate_tokens_per_s == pytest.approx(rate)
    assert decode.intercept_s == pytest.approx(intercept)
    assert decode.intercept_flag == "negative"
    assert decode.stream_rate_tokens_per_s == pytest.approx(1 / 0.00312)
    assert decode.warnings and "not a fixed cost" in decode.warnings[0] and "320.5" in decode.warnings[0]


def test_positive_intercept_is_a_fixed_cost() -> None:
    # Calls that keep the model: first token at TTFT, then one gap per token, so the line meets 0 tokens
    # at TTFT − one token (a fixed cost above the TTFT is flagged: tests/unit/bench/test_plausibility.py).
    short = [0.02 + 16 / 300] * 3
    long = [0.02 + 512 / 300] * 3
    records = _decode_records(short, long, 1 / 300, ttft_s=0.02 + 1 / 300)
    decode = results.decode_measurement(records, ClientSettings())
    assert decode.intercept_s == pytest.approx(0.02) and decode.intercept_flag is None and decode.warnings == []
