"""The async engine: send requests through a Transport, time their chunks, never stop on a failure.

One request is one :class:`Outcome` (metrics, or the failure's reason); a batch runs
many at a bounded concurrency. The clock is injected (tests script it); nothing
here knows HTTP or SageMaker, and nothing here prints or writes files.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict, TypeVar

from gemmaserve.bench.metrics import RequestMetrics, compute_request_metrics
from gemmaserve.bench.transports import (
    ChatRequest,
    Chunk,
    Clock,
    RequestFailed,
    Transport,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request as the client saw it. ``reason`` is None on success."""

    request_id: str
    request: ChatRequest
    sent_s: float  # when the request left (the transport's stamp), else when it was started
    finished_s: float
    metrics: RequestMetrics | None  # None when no chunk arrived before the failure
    reason: str | None = None
    detail: str = ""
    chunks: int = 0
    client_queue_s: float | None = None  # started → left: time the request waited inside the client

    @property
    def success(self) -> bool:
        return self.reason is None


@dataclass(frozen=True, slots=True)
class BatchResult:
    outcomes: tuple[Outcome, ...]
    started_s: float
    finished_s: float
    cpu_s: float  # client CPU time while the batch ran
    # How late a timer due every LAG_PROBE_INTERVAL_S fired while the batch ran: a chunk that
    # arrives while the loop is busy is stamped that late. 0.0 when not probed.
    lag_p50_s: float = 0.0
    lag_p90_s: float = 0.0
    lag_max_s: float = 0.0
    # The same, only the ticks due before the batch's last first token: see first_token_lags.
    first_token_lag_p50_s: float = 0.0
    first_token_lag_p90_s: float = 0.0
    # The process's CPU share over that window (window_cpu_share); None when not probed.
    first_token_cpu_share: float | None = None

    @property
    def cpu_share(self) -> float:
        """The process's CPU time over the batch's wall time."""
        wall_s = self.finished_s - self.started_s
        return self.cpu_s / wall_s if wall_s > 0 else 0.0


LAG_PROBE_INTERVAL_S = 0.005


def first_token_lags(ticks: Sequence[tuple[float, float]], outcomes: Sequence[Outcome]) -> list[float]:
    """For each first token, the lateness of the probe tick due last before it was stamped.

    ``ticks``: (due time, lateness) in the order they were due. A burst keeps the loop busiest
    while the first replies arrive, and over a whole run the steady decode that follows dominates
    the median (2,048 streams from 4 processes: 2.2 ms over the run, TTFT 102 ms above the
    server's records). Weighting by first token, not by tick, matters as much: the loop idles
    through the server's TTFT, ticking on time, then reads every first token in one busy stretch
    that one late tick spans (512 streams on one core: ticks due before the last first token
    0.25 ms late at the median, the first tokens themselves read 13.8 ms after the server wrote
    them). Each first token is charged the whole lateness of the tick it followed; checked
    against the server's records by ``benchmarks/lag_guard_check.py``.
    """
    dues = [due for due, _ in ticks]
    lags = []
    for outcome in outcomes:
        if outcome.metrics is None or outcome.metrics.ttft_s is None or not ticks:
            continue
        stamped_s = outcome.sent_s + outcome.metrics.ttft_s
        # a first token before any tick fell due gets the first tick's lateness: the nearest known
        covering = max(0, bisect.bisect_right(dues, stamped_s) - 1)
        lags.append(ticks[covering][1])
    return lags


def window_cpu_share(
    ticks: Sequence[tuple[float, float]],
    cpu_s: Sequence[float],
    outcomes: Sequence[Outcome],
    *,
    started_s: float,
    cpu_started_s: float,
) -> float | None:
    """The process's CPU share from the batch's start until the tick that covers its last first token.

    ``cpu_s[i]``: the process CPU time read when tick ``i`` fired (at its due time plus its lateness).
    This is what tells a loop that lagged because it was busy (CPU-bound: near 1) from one that lagged
    because it waited for a core (starved by the machine: near 0) while the first tokens arrived: over
    the whole run the calm decode after a burst dilutes the share (512 streams on a core of their own:
    45% over the run, CPU-bound through the burst). None when no tick or no first token.
    """
    stamps = [
        outcome.sent_s + outcome.metrics.ttft_s
        for outcome in outcomes
        if outcome.metrics is not None and outcome.metrics.ttft_s is not None
    ]
    if not ticks or not stamps or len(cpu_s) != len(ticks):
        return None
    covering = max(0, bisect.bisect_right([due for due, _ in ticks], max(stamps)) - 1)
    due, lateness = ticks[covering]
    wall_s = due + lateness - started_s
    return (cpu_s[covering] - cpu_started_s) / wall_s if wall_s > 0 else None


FIRST_TOKENS_WINDOW = "while the first tokens arrived"
RUN_WINDOW = "over the run"


class LagVerdict(NamedTuple):
    """The loop's lateness (median, p90) that broke the timing budget, and when it was measured."""

    p50_s: float
    p90_s: float
    when: str


def lag_over_budget(run: tuple[float, float], first_tokens: tuple[float, float], budget_s: float) -> LagVerdict | None:
    """The worse of the two medians (p50, p90 pairs: over the run, while first tokens arrived) that
    exceeds the budget, or None when neither does."""
    candidates = (LagVerdict(*first_tokens, FIRST_TOKENS_WINDOW), LagVerdict(*run, RUN_WINDOW))
    over = [candidate for candidate in candidates if candidate.p50_s > budget_s]
    return max(over, key=lambda candidate: candidate.p50_s) if over else None


@dataclass(slots=True)
class StreamTally:
    """Token chunks received so far by a batch's requests, for progress while they stream.

    One integer increment per chunk: negligible next to the ~20-40 µs the client spends per chunk.
    """

    chunks: int = 0


def quantile(values: Sequence[float], share: float) -> float:
    """The order statistic at ``share`` (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class LagFigures(TypedDict):
    """The probe's lateness as a batch (:class:`BatchResult`) and a shard report it."""

    lag_p50_s: float
    lag_p90_s: float
    lag_max_s: float
    first_token_lag_p50_s: float
    first_token_lag_p90_s: float


def lag_figures(ticks: Sequence[tuple[float, float]], early: Sequence[float]) -> LagFigures:
    """Median, p90 and worst lateness over every (due, lateness) tick; median and p90 over ``early``
    (:func:`first_token_lags`)."""
    lags = [lateness for _, lateness in ticks]
    return LagFigures(
        lag_p50_s=quantile(lags, 0.5),
        lag_p90_s=quantile(lags, 0.9),
        lag_max_s=max(lags, default=0.0),
        first_token_lag_p50_s=quantile(early, 0.5),
        first_token_lag_p90_s=quantile(early, 0.9),
    )


def verify_reply(request: ChatRequest, metrics: RequestMetrics) -> tuple[str, str] | None:
    """Why a stream that ended is still a failure: no token, cut short, or fewer tokens than asked.

    A reply whose tokens all decode to empty text is not a failure here: its timing is
    sound, and the quality scorer counts its empty answer as wrong.
    """
    if not metrics.done:
        return "truncated_stream", "stream ended without finish_reason or [DONE]"
    if metrics.token_chunks == 0 or metrics.output_tokens == 0:
        return "empty_reply", f"no token in the stream (usage completion_tokens={metrics.output_tokens})"
    if request.ignore_eos and metrics.output_tokens != request.max_tokens:
        return (
            "short_reply",
            f"{metrics.output_tokens} of {request.max_tokens} tokens with ignore_eos "
            + f"(finish_reason={metrics.finish_reason})",
        )
    return None


async def run_request(
    transport: Transport,
    request_id: str,
    request: ChatRequest,
    *,
    clock: Clock,
    timeout_s: float,
    tally: StreamTally | None = None,
) -> Outcome:
    """Send one request and time it; every failure becomes an Outcome with a reason.

    ``tally`` (optional) counts the chunks as they arrive, for a progress display.
    """
    chunks: list[Chunk] = []
    append = chunks.append
    started_s = sent_s = clock()
    stamped = False
    reason: str | None = None
    detail = ""
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in transport.stream(request):
                if chunk.sent:
                    sent_s, stamped = chunk.arrival_s, True
                    continue
                append(chunk)
                if tally is not None:
                    tally.chunks += 1
    except RequestFailed as exc:
        reason, detail = exc.reason, exc.detail
    except TimeoutError:
        reason, detail = "timeout", f"no complete reply within {timeout_s:g} s"
    except OSError as exc:
        reason, detail = "connect_error", f"{type(exc).__name__}: {exc}"
    finished_s = clock()
    metrics = compute_request_metrics(sent_s, chunks) if chunks else None
    if reason is None:
        if metrics is None:
            reason, detail = "empty_reply", "the stream carried no events"
        else:
            verdict = verify_reply(request, metrics)
            if verdict is not None:
                reason, detail = verdict
    return Outcome(
        request_id=request_id,
        request=request,
        sent_s=sent_s,
        finished_s=finished_s,
        metrics=metrics,
        reason=reason,
        detail=detail[:300],
        chunks=len(chunks),
        client_queue_s=sent_s - started_s if stamped else None,
    )


_batches_in_flight = 0


@contextlib.contextmanager
def _heap_frozen() -> Iterator[None]:
    """Freeze every object the collector tracks until the last overlapping batch ends.

    A full collection walks every object of the process (17-31 ms for ``bench measure``'s
    heap), stalling the loop wherever it falls: a send waited 18.7 ms inside a 16-stream burst.
    Frozen objects are skipped by later collections, so one that falls inside the batch walks
    only what the batch made (vLLM freezes its heap after warm-up for the same reason:
    ``freeze_gc_heap`` in vllm/utils/gc_utils.py). No collection first: freezing is a list
    splice, while collecting would cost a full walk of the heap per batch (it grows with the
    process: the MCP server after a long session, a test process), and the garbage frozen with
    the rest is collected once the heap is unfrozen afterwards.
    """
    global _batches_in_flight
    if _batches_in_flight == 0:
        gc.freeze()
    _batches_in_flight += 1
    try:
        yield
    finally:
        _batches_in_flight -= 1
        if _batches_in_flight == 0:
            gc.unfreeze()


def run_in_loop(coroutine: Coroutine[Any, Any, T], *, use_uvloop: bool) -> T:
    """Run ``coroutine`` to its end in a fresh event loop: uvloop's when asked and installed, else asyncio's."""
    loop_factory = None
    if use_uvloop:
        try:
            import uvloop

            loop_factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover - uvloop is a base dependency off Windows
            loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coroutine)


class LagProbe:
    """A timer that wakes every ``interval_s`` and records how late it woke (on ``time.perf_counter``) and the
    process's CPU time then: the event loop's lateness while a batch runs."""

    def __init__(self, interval_s: float, cpu_clock: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self.cpu_clock = cpu_clock
        self.ticks: list[tuple[float, float]] = []
        self.tick_cpu_s: list[float] = []
        self.running = True

    async def run(self) -> None:
        while self.running:
            due = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.ticks.append((due, max(0.0, time.perf_counter() - due)))
            self.tick_cpu_s.append(self.cpu_clock())


@dataclass(frozen=True)
class BatchDeps:
    """What a batch is timed with and reports to: the clock its outcomes read, the process's CPU clock, a
    callback per finished request and the live stream tally."""

    clock: Clock
    cpu_clock: Callable[[], float] = time.process_time
    on_done: Callable[[Outcome], None] | None = None
    tally: StreamTally | None = None


async def run_batch(
    transport: Transport,
    requests: Sequence[tuple[str, ChatRequest]],
    *,
    concurrency: int,
    timeout_s: float,
    deps: BatchDeps,
    probe_lag: bool = True,
) -> BatchResult:
    """Run ``requests`` with at most ``concurrency`` in flight; outcomes keep the input order.

    With ``probe_lag`` a timer measures the event loop's lateness on the real clock while
    the batch runs (``lag_p50_s``, ``lag_p90_s``): how late this client's own timestamps are.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    clock, cpu_clock, on_done, tally = deps.clock, deps.cpu_clock, deps.on_done, deps.tally

    async def one(request_id: str, request: ChatRequest) -> Outcome:
        async with gate:
            outcome = await run_request(transport, request_id, request, clock=clock, timeout_s=timeout_s, tally=tally)
        if on_done is not None:
            on_done(outcome)
        return outcome

    probe = LagProbe(LAG_PROBE_INTERVAL_S, cpu_clock)
    ticks, tick_cpu_s = probe.ticks, probe.tick_cpu_s

    with _heap_frozen():
        probe_task = asyncio.create_task(probe.run()) if probe_lag else None
        cpu_started = cpu_clock()
        started_s = clock()
        try:
            outcomes = await asyncio.gather(*(one(request_id, request) for request_id, request in requests))
        finally:
            probe.running = False
            if probe_task is not None:
                probe_task.cancel()
        finished_s = clock()
    # The probe reads time.perf_counter; outcomes use ``clock``: only the same clock has a window.
    same_clock = clock is time.perf_counter
    early = first_token_lags(ticks, outcomes) if same_clock else []
    window_share = (
        window_cpu_share(ticks, tick_cpu_s, outcomes, started_s=started_s, cpu_started_s=cpu_started)
        if same_clock
        else None
    )
    return BatchResult(
        outcomes=tuple(outcomes),
        started_s=started_s,
        finished_s=finished_s,
        cpu_s=cpu_clock() - cpu_started,
        **lag_figures(ticks, early),
        first_token_cpu_share=window_share,
    )
