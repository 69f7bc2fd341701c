"""Where a ``bench measure`` run stands: requests and planned work per phase, and the time left.

:class:`ProgressTracker` is fed by the measuring loop (a step starts, a request finishes, a step ends)
and sends :class:`MeasureProgress` events, the shared :class:`~gemmaserve.progress.ProgressEvent` with
the run's own detail. Work is counted in output tokens as one stream sees them (:class:`StepWork`:
a step's waves of requests, forced lengths as planned, the server's own lengths as measured so far);
the request streaming now counts by the token chunks that have arrived, so a long request moves the
figures while it runs. The ETA is the known work left at the pace so far. No I/O; it never prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gemmaserve.bench.engine import Outcome, StreamTally
from gemmaserve.bench.workloads import REQUEST_OVERHEAD_TOKENS, Step, remaining_s, request_work
from gemmaserve.progress import CancelToken, ProgressEvent, check


@dataclass(frozen=True, slots=True)
class PhaseProgress:
    """One phase (``warmup``, ``decode``, ``load:<c>``, ``quality``) over all targets."""

    phase: str
    done_requests: int
    total_requests: int
    done_work: float  # planned work done, in output tokens as one stream sees them
    total_work: float


@dataclass(frozen=True)
class MeasureProgress(ProgressEvent):
    """Where a run stands: ``done``/``total`` count requests, ``phase`` is the phase running now and
    ``message`` the step (``"a: load:4 #2"``); every phase's share of the planned work and the time left
    at the pace so far come with it."""

    phases: tuple[PhaseProgress, ...] = ()
    done_work: float = 0.0
    total_work: float = 0.0
    elapsed_s: float = 0.0
    eta_s: float | None = None  # None until enough is done to extrapolate
    # Phases whose length is not known yet (no answer finished), left out of the work and the ETA.
    eta_pending: tuple[str, ...] = ()

    @property
    def done_requests(self) -> int:
        return int(self.done or 0)

    @property
    def total_requests(self) -> int:
        return int(self.total or 0)


ProgressSink = Callable[[MeasureProgress], None]


@dataclass
class StepWork:
    """One planned step's work, in output tokens as one stream produces them (see :mod:`.workloads`).

    A step of ``n`` requests at concurrency ``c`` runs in ``ceil(n / c)`` waves, each as long as its
    requests: its work is the waves times the mean request's work. A request whose length the
    server decides (no ``ignore_eos``: the quality answers) is not counted at its ``max_tokens``, a
    ceiling real answers rarely approach (2,048 tokens for answers of ~30 on the mock made the ETA 3-4x
    long): it takes the mean length of the answers finished so far, and until one has finished its
    phase is left out of the ETA and named in ``eta_pending``.
    """

    step: Step
    waves: int
    forced_work: float  # requests whose length is known in advance
    open_requests: int  # requests whose length the server decides
    actual: float | None = None  # once the step ended: its work from the replies' real lengths

    @classmethod
    def of(cls, step: Step) -> StepWork:
        forced = [planned.request for planned in step.requests if planned.request.ignore_eos]
        return cls(
            step=step,
            waves=math.ceil(len(step.requests) / max(1, step.concurrency)),
            forced_work=sum(request_work(request) for request in forced),
            open_requests=len(step.requests) - len(forced),
        )

    def expected(self, open_tokens: float | None) -> float | None:
        """The step's work; None while some of its lengths are unknown."""
        if self.actual is not None:
            return self.actual
        if not self.step.requests:
            return 0.0
        if self.open_requests and open_tokens is None:
            return None
        open_work = self.open_requests * (open_tokens or 0.0) + self.open_requests * REQUEST_OVERHEAD_TOKENS
        return self.waves * (self.forced_work + open_work) / len(self.step.requests)


class ProgressTracker:
    """Counts requests and work per phase; sends :class:`MeasureProgress` to ``sink``.

    Timed on ``clock`` (monotonic; tests script it), never the run's injected measuring clock.
    ``cancel`` is checked when a step starts (:meth:`start`) and by the caller while one runs.
    """

    def __init__(
        self,
        plans: Sequence[Sequence[Step]],
        sink: ProgressSink | None,
        cancel: CancelToken | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.sink = sink
        self.cancel = cancel
        self.started = clock()
        self.works: dict[int, StepWork] = {}
        self.phases: dict[str, list[StepWork]] = {}
        self.planned_requests: dict[str, int] = {}
        self.finished_requests: dict[str, int] = {}
        for plan in plans:
            for step in plan:
                work = StepWork.of(step)
                self.works[id(step)] = work
                self.phases.setdefault(step.phase, []).append(work)
                self.planned_requests[step.phase] = self.planned_requests.get(step.phase, 0) + len(step.requests)
                self.finished_requests.setdefault(step.phase, 0)
        self.total_requests = sum(self.planned_requests.values())
        self.done_requests = 0
        self.answer_tokens = 0  # of finished requests whose length the server decided
        self.answers = 0
        self.description = "starting"
        self.step: Step | None = None
        self.tally = StreamTally()  # the running step's chunks, counted by the engine
        self.retired_work = 0.0  # the running step's finished requests' work, not yet over concurrency
        self.retired_chunks = 0
        self.retired_requests = 0

    @property
    def open_tokens(self) -> float | None:
        """The mean length of the answers so far, for the requests whose length the server decides."""
        return self.answer_tokens / self.answers if self.answers else None

    def start(self, label: str, step: Step) -> None:
        """``label``'s ``step`` starts (raises :class:`~gemmaserve.progress.Cancelled` if cancelled)."""
        check(self.cancel)
        self.step, self.description = step, f"{label}: {step.label}"
        self.tally, self.retired_work, self.retired_chunks, self.retired_requests = StreamTally(), 0.0, 0, 0
        self.emit()

    def done(self, outcome: Outcome) -> None:
        """One request of the running step finished (either way)."""
        tokens = _reply_tokens(outcome)
        if not outcome.request.ignore_eos and outcome.success:
            self.answer_tokens += tokens
            self.answers += 1
        self.done_requests += 1
        self.retired_work += request_work_of(tokens)
        self.retired_chunks += outcome.chunks
        self.retired_requests += 1
        if self.step is not None:
            self.finished_requests[self.step.phase] += 1
        self.emit()

    def finish(self, step: Step) -> None:
        """The step is over, or skipped (its target is unreachable: no request ran, so no work is left)."""
        work = self.works[id(step)]
        if self.step is step and self.retired_requests:
            # the replies' real lengths, in the step's waves
            work.actual = work.waves * self.retired_work / self.retired_requests
        else:
            work.actual = 0.0
        self.step = None

    def _in_step(self) -> float:
        step = self.step
        if step is None:
            return 0.0
        streaming = max(0, self.tally.chunks - self.retired_chunks)
        done = (self.retired_work + streaming) / step.concurrency
        expected = self.works[id(step)].expected(self.open_tokens)
        return done if expected is None else min(expected, done)

    def emit(self) -> None:
        """Send where the run stands now (also the caller's heartbeat while a step runs)."""
        if self.sink is None:
            return
        open_tokens = self.open_tokens
        in_step = self._in_step()
        running = self.step.phase if self.step else ""
        phases = []
        pending = []
        for phase, works in self.phases.items():
            expected = [work.expected(open_tokens) for work in works]
            known = None not in expected
            if not known:
                pending.append(phase)
            done = sum(work.actual for work in works if work.actual is not None)
            phases.append(
                PhaseProgress(
                    phase=phase,
                    done_requests=self.finished_requests[phase],
                    total_requests=self.planned_requests[phase],
                    done_work=done + (in_step if phase == running else 0.0),
                    total_work=sum(value for value in expected if value is not None) if known else 0.0,
                )
            )
        known_phases = [phase for phase in phases if phase.phase not in pending]
        done_work = sum(phase.done_work for phase in known_phases)
        total_work = sum(phase.total_work for phase in known_phases)
        elapsed = self.clock() - self.started
        self.sink(
            MeasureProgress(
                phase=running,
                message=self.description,
                done=self.done_requests,
                total=self.total_requests,
                phases=tuple(phases),
                done_work=done_work,
                total_work=total_work,
                elapsed_s=elapsed,
                eta_s=remaining_s(elapsed, done_work, total_work),
                eta_pending=tuple(pending),
            )
        )


def _reply_tokens(outcome: Outcome) -> int:
    if outcome.metrics is not None:
        return outcome.metrics.output_tokens
    return outcome.chunks


def request_work_of(tokens: int) -> float:
    return tokens + REQUEST_OVERHEAD_TOKENS
