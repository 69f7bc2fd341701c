"""The ETA of ``bench measure`` against a schedule whose real length is known, on an injected clock.

The server is the mock's timing model (TTFT 50 ms, 5 ms per token, replies of 32 tokens where the
length is not forced): every request's duration follows from it, and so does every step's and the
run's. The default run's plan is replayed through the tracker on a scripted clock: requests finish
when that timing says, tokens stream in between (the heartbeat every second), and every ETA the
tracker reports is compared with the time the schedule really has left. No wall clock, no server.
"""

from __future__ import annotations

import heapq
import math

import pytest

from gemmaserve.bench.engine import Outcome
from gemmaserve.bench.metrics import compute_request_metrics
from gemmaserve.bench.run_progress import MeasureProgress, ProgressTracker
from gemmaserve.bench.transports import ChatRequest, Chunk
from gemmaserve.bench.workloads import Step, plan_steps
from gemmaserve.measurements.schema import ClientSettings

TTFT_S, ITL_S, NATURAL_TOKENS = 0.05, 0.005, 32
TOLERANCE = 0.30
# Under a second left, a relative error means little (the display shows whole seconds).
FLOOR_S = 1.0


def reply_tokens(request: ChatRequest) -> int:
    return request.max_tokens if request.ignore_eos else min(request.max_tokens, NATURAL_TOKENS)


def duration_s(tokens: int) -> float:
    return TTFT_S + (tokens - 1) * ITL_S


def _outcome(request_id: str, request: ChatRequest, sent_s: float, tokens: int) -> Outcome:
    end_s = sent_s + duration_s(tokens)
    chunks = [
        Chunk(sent_s + TTFT_S, "a", token=True),
        Chunk(end_s, "b", token=True, finish_reason="length"),
        Chunk(end_s, completion_tokens=tokens, done=True),
    ]
    return Outcome(request_id, request, sent_s, end_s, compute_request_metrics(sent_s, chunks), chunks=tokens + 2)


class _Replay:
    """Runs a plan on a scripted clock the way the engine would: ``concurrency`` slots, FIFO."""

    def __init__(self, plans: list[list[Step]]) -> None:
        self.now_s = 0.0
        self.events: list[tuple[float, MeasureProgress]] = []
        self.tracker = ProgressTracker(plans, self.record, None, clock=lambda: self.now_s)
        self.plans = plans
        self.spans: list[tuple[str, float, float]] = []  # (phase, start, end) of every step

    def record(self, event: MeasureProgress) -> None:
        self.events.append((self.now_s, event))

    def run_step(self, step: Step) -> None:
        self.tracker.start("t", step)
        started = self.now_s
        slots = [started] * step.concurrency
        runs = []  # (sent, finished, tokens, planned)
        for planned in step.requests:
            sent = heapq.heappop(slots)
            tokens = reply_tokens(planned.request)
            runs.append((sent, sent + duration_s(tokens), tokens, planned))
            heapq.heappush(slots, sent + duration_s(tokens))
        ends = sorted(runs, key=lambda run: run[1])
        heartbeat = started + 1.0
        for sent, end, tokens, planned in ends:
            while heartbeat < end:  # tokens stream in while the step runs
                self.now_s = heartbeat
                self.tracker.tally.chunks = sum(self._arrived(run, heartbeat) for run in runs)
                self.tracker.emit()
                heartbeat += 1.0
            self.now_s = end
            self.tracker.tally.chunks = sum(self._arrived(run, end) for run in runs)
            self.tracker.done(_outcome(planned.request_id, planned.request, sent, tokens))
        self.tracker.finish(step)
        self.spans.append((step.phase, started, self.now_s))

    @staticmethod
    def _arrived(run: tuple[float, float, int, object], at_s: float) -> int:
        sent, end, tokens, _ = run
        if at_s >= end:
            return tokens + 2
        if at_s < sent + TTFT_S:
            return 0
        return min(tokens, 1 + math.floor((at_s - sent - TTFT_S) / ITL_S))

    def left_s(self, now_s: float, leaving_out: tuple[str, ...]) -> float:
        """The time the schedule really has left at ``now_s``, the phases ``leaving_out`` left out."""
        return sum(
            end - max(start, now_s) for phase, start, end in self.spans if end > now_s and phase not in leaving_out
        )

    def run(self) -> float:
        for index in range(len(self.plans[0])):
            for plan in self.plans:
                self.run_step(plan[index])
        return self.now_s


@pytest.mark.parametrize("targets", [1, 2])
def test_the_eta_of_the_default_run_is_within_30_percent_of_the_time_really_left(targets: int) -> None:
    settings = ClientSettings()
    replay = _Replay([plan_steps(settings, target_index=index) for index in range(targets)])
    end_s = replay.run()
    assert end_s == pytest.approx(targets * 27.6, rel=0.05)  # what the timing model says the run takes
    # An ETA leaves out a phase whose length is not known yet (no answer finished): it is compared with
    # the time the rest really takes, and it says which phase it leaves out.
    judged = [
        (now_s, event.eta_s, replay.left_s(now_s, event.eta_pending))
        for now_s, event in replay.events
        if event.eta_s is not None
    ]
    assert judged and judged[0][0] <= 0.1 * end_s, "an ETA from the first tenth of the run on"
    pending = {phase for _, event in replay.events for phase in event.eta_pending}
    assert pending == {"quality"}  # the only phase whose reply lengths the server decides
    whole = [event for now_s, event in replay.events if not event.eta_pending and event.eta_s is not None]
    assert whole, "once the first answers are in, the ETA covers the whole run"
    wrong = [
        f"at {now_s:.1f} s: ETA {eta_s:.1f} s, really {left_s:.1f} s"
        for now_s, eta_s, left_s in judged
        if abs(eta_s - left_s) > max(TOLERANCE * left_s, FLOOR_S)
    ]
    assert not wrong, wrong[:10]
