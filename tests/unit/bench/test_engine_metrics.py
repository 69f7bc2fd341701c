"""Timing invariants with a scripted clock and scripted chunks: no socket, no sleep."""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import AsyncIterator

import pytest

from gemmaserve.bench.engine import BatchDeps, run_batch, run_request
from gemmaserve.bench.metrics import compute_request_metrics
from gemmaserve.bench.transports import ChatRequest, Chunk, RequestFailed

from .conftest import ScriptedClock, ScriptedTransport

ROLE: dict[str, object] = {"content": ""}  # vLLM's role-only opening: no token


def _script(
    tokens: int, *, ttft_s: float = 0.05, itl_s: float = 0.01, usage: bool = True, usage_after_s: float = 0.5
) -> list[tuple[float, dict[str, object]]]:
    """vLLM's stream shape: role chunk, one chunk per token, finish_reason on the last one."""
    script: list[tuple[float, dict[str, object]]] = [(0.001, ROLE)]
    for k in range(tokens):
        fields: dict[str, object] = {"content": f"t{k} ", "token": True}
        if k == tokens - 1:
            fields["finish_reason"] = "length"
        script.append((ttft_s + k * itl_s, fields))
    last = ttft_s + (tokens - 1) * itl_s
    if usage:
        script.append((last + usage_after_s, {"completion_tokens": tokens, "prompt_tokens": 7}))
    script.append((last + usage_after_s, {"done": True}))
    return script


def _run(transport: ScriptedTransport, clock: ScriptedClock, request: ChatRequest, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
    return asyncio.run(run_request(transport, "r", request, clock=clock, timeout_s=timeout_s))


def test_ttft_skips_role_chunk_and_usage_does_not_move_the_end(scripted_clock: ScriptedClock) -> None:
    transport = ScriptedTransport(scripted_clock, _script(16, ttft_s=0.05, itl_s=0.01))
    outcome = _run(transport, scripted_clock, ChatRequest("p", 16, ignore_eos=True))
    m = outcome.metrics
    assert outcome.success and m is not None
    assert m.ttft_s == pytest.approx(0.05)
    assert m.e2el_s == pytest.approx(0.05 + 15 * 0.01)  # not + 0.5 s of the late usage chunk
    assert m.e2el_s - m.ttft_s == pytest.approx(sum(m.itl_s))
    assert len(m.itl_s) == 15 and all(gap == pytest.approx(0.01) for gap in m.itl_s)
    assert m.tpot_s == pytest.approx(0.01)
    assert m.output_tokens == 16 and m.usage_reported and m.prompt_tokens == 7
    assert outcome.finished_s - outcome.sent_s == pytest.approx(m.e2el_s + 0.5)


@pytest.mark.parametrize("per_chunk", [1, 3, 4])
def test_invariant_holds_for_multi_token_chunks(per_chunk: int) -> None:
    chunks = [Chunk(10.0 + 0.3 + i * 0.07, content="x" * per_chunk, token=True) for i in range(9)]
    chunks.append(Chunk(11.5, completion_tokens=9 * per_chunk, done=True))
    m = compute_request_metrics(10.0, chunks)
    assert m.e2el_s is not None and m.ttft_s is not None
    assert math.isclose(m.e2el_s - m.ttft_s, sum(m.itl_s))
    assert m.output_tokens == 9 * per_chunk  # usage wins over the chunk count
    assert m.tpot_s == pytest.approx((m.e2el_s - m.ttft_s) / (9 * per_chunk - 1))


def test_without_usage_tokens_are_counted_by_chunk(scripted_clock: ScriptedClock) -> None:
    transport = ScriptedTransport(scripted_clock, _script(5, usage=False))
    m = _run(transport, scripted_clock, ChatRequest("p", 5, ignore_eos=True)).metrics
    assert m is not None and m.output_tokens == 5 and not m.usage_reported


def test_one_token_reply_has_no_tpot() -> None:
    m = compute_request_metrics(0.0, [Chunk(0.2, content="a", token=True), Chunk(0.3, done=True)])
    assert m.ttft_s == m.e2el_s == pytest.approx(0.2) and m.tpot_s is None and m.itl_s == ()


def test_short_reply_with_ignore_eos_is_a_failure_that_keeps_its_timing(scripted_clock: ScriptedClock) -> None:
    transport = ScriptedTransport(scripted_clock, _script(10))
    outcome = _run(transport, scripted_clock, ChatRequest("p", 16, ignore_eos=True))
    assert outcome.reason == "short_reply" and "10 of 16" in outcome.detail
    assert outcome.metrics is not None and outcome.metrics.ttft_s == pytest.approx(0.05)


def test_short_reply_without_ignore_eos_is_fine(scripted_clock: ScriptedClock) -> None:
    transport = ScriptedTransport(scripted_clock, _script(10))
    assert _run(transport, scripted_clock, ChatRequest("p", 16)).success


def test_stream_ending_without_finish_or_done_is_truncated(scripted_clock: ScriptedClock) -> None:
    script = [(0.01, ROLE), (0.02, {"content": "a", "token": True}), (0.03, {"content": "b", "token": True})]
    outcome = _run(ScriptedTransport(scripted_clock, script), scripted_clock, ChatRequest("p", 2))
    assert outcome.reason == "truncated_stream"


def test_role_only_reply_is_empty(scripted_clock: ScriptedClock) -> None:
    script = [(0.01, ROLE), (0.02, {"completion_tokens": 0}), (0.02, {"done": True})]
    outcome = _run(ScriptedTransport(scripted_clock, script), scripted_clock, ChatRequest("p", 2))
    assert outcome.reason == "empty_reply" and outcome.metrics is not None and outcome.metrics.ttft_s is None


def test_transport_failure_mid_stream_keeps_partial_metrics(scripted_clock: ScriptedClock) -> None:
    script = [(0.01, ROLE), (0.02, {"content": "a", "token": True})]
    transport = ScriptedTransport(scripted_clock, script, error=RequestFailed("truncated_stream", "cut"))
    outcome = _run(transport, scripted_clock, ChatRequest("p", 2))
    assert outcome.reason == "truncated_stream" and outcome.detail == "cut"
    assert outcome.metrics is not None and outcome.metrics.ttft_s == pytest.approx(0.02)


class _Hanging:
    kind = "http"
    url = "http://hang"
    description = "hang"

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        await asyncio.sleep(30)
        yield Chunk(0.0)

    async def aclose(self) -> None:
        return None


def test_timeout_is_a_result_not_an_exception() -> None:
    import time

    outcome = asyncio.run(run_request(_Hanging(), "r", ChatRequest("p", 2), clock=time.perf_counter, timeout_s=0.05))
    assert outcome.reason == "timeout" and outcome.metrics is None


class _Counting:
    kind = "http"
    url = "http://count"
    description = "count"

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        yield Chunk(0.0, content=request.prompt, token=True, finish_reason="stop")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("concurrency", [1, 3, 10])
def test_batch_bounds_concurrency_and_keeps_order(concurrency: int) -> None:
    import time

    transport = _Counting()
    requests = [(f"r{i}", ChatRequest(f"p{i}", 1)) for i in range(10)]
    done: list[str] = []
    batch = asyncio.run(
        run_batch(
            transport,
            requests,
            concurrency=concurrency,
            timeout_s=5,
            deps=BatchDeps(clock=time.perf_counter, on_done=lambda o: done.append(o.request_id)),
        )
    )
    assert transport.peak == concurrency
    assert [o.request_id for o in batch.outcomes] == [r for r, _ in requests]
    assert [o.metrics.text for o in batch.outcomes if o.metrics] == [f"p{i}" for i in range(10)]
    assert sorted(done) == sorted(r for r, _ in requests)
    assert batch.cpu_s >= 0 and batch.finished_s >= batch.started_s


def test_batch_rejects_zero_concurrency() -> None:
    with pytest.raises(ValueError):
        asyncio.run(run_batch(_Counting(), [], concurrency=0, timeout_s=1, deps=BatchDeps(clock=lambda: 0.0)))


class _FreezeWatching(_Counting):
    """Notes how many objects the collector holds frozen while each request streams."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen: list[int] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.frozen.append(gc.get_freeze_count())
        async for chunk in super().stream(request):
            yield chunk


def test_a_batch_runs_with_the_heap_before_it_frozen_and_leaves_the_collector_as_it_was() -> None:
    """A full collection walks every object of the process: 17-31 ms for `bench measure`'s heap
    here, and a send stalled 18.7 ms inside a 16-stream burst on the GPU host. Frozen before the
    clock starts, the objects alive before the batch are not walked during it."""
    import time

    assert gc.get_freeze_count() == 0
    transport = _FreezeWatching()
    requests = [(f"r{i}", ChatRequest(f"p{i}", 1)) for i in range(6)]

    async def two_overlapping_batches() -> None:
        await asyncio.gather(
            run_batch(transport, requests[:3], concurrency=3, timeout_s=5, deps=BatchDeps(clock=time.perf_counter)),
            run_batch(transport, requests[3:], concurrency=3, timeout_s=5, deps=BatchDeps(clock=time.perf_counter)),
        )

    asyncio.run(two_overlapping_batches())
    assert len(transport.frozen) == 6 and min(transport.frozen) > 0
    assert gc.get_freeze_count() == 0  # unfrozen once the last overlapping batch ended


def test_a_batch_never_walks_the_callers_heap_itself() -> None:
    """Freezing is enough; a full collection of its own per batch walks the whole heap, which
    grows with a long-lived process (the MCP server, this test process)."""
    import time

    full_collections: list[str] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2 and phase == "start":
            full_collections.append(phase)

    thresholds = gc.get_threshold()
    gc.set_threshold(10**6, 10**6, 10**6)  # no automatic collection: any full one is the batch's own
    gc.callbacks.append(watch)
    try:
        requests = [(f"r{i}", ChatRequest(f"p{i}", 1)) for i in range(4)]
        asyncio.run(
            run_batch(_Counting(), requests, concurrency=4, timeout_s=5, deps=BatchDeps(clock=time.perf_counter))
        )
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*thresholds)
    assert full_collections == []
