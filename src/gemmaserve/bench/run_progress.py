"""Where a ``bench measure`` run stands: requests and planned work per phase, and the time left.

:class:`ProgressTracker` is fed by the measuring loop (a step starts, a request finishes, a step ends)
and sends :class:`MeasureProgress` events, the shared :class:`~gemmaserve.progress.ProgressEvent` with
the run's own detail. Work is counted in output tokens as one stream sees them
(:func:`~gemmaserve.bench.workloads.step_work`); the request streaming now counts by the token chunks
that have arrived, so a long request moves the figures while it runs. No I/O; it never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gemmaserve.bench.engine import Outcome, StreamTally
from gemmaserve.bench.workloads import Step, remaining_s, request_work, step_work
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

    @property
    def done_requests(self) -> int:
        return int(self.done or 0)

    @property
    def total_requests(self) -> int:
        return int(self.total or 0)


ProgressSink = Callable[[MeasureProgress], None]


@dataclass
class _Count:
    requests: int = 0
    work: float = 0.0


class ProgressTracker:
    """Counts requests and planned work per phase; sends :class:`MeasureProgress` to ``sink``.

    Timed on the monotonic clock, never the run's injected measuring clock (tests script that one).
    ``cancel`` is checked when a step starts (:meth:`start`) and by the caller while one runs.
    """

    def __init__(self, plans: Sequence[Sequence[Step]], sink: ProgressSink | None, cancel: CancelToken | None) -> None:
        self.sink = sink
        self.cancel = cancel
        self.started = time.monotonic()
        self.planned: dict[str, _Count] = {}
        self.finished: dict[str, _Count] = {}
        for plan in plans:
            for step in plan:
                planned = self.planned.setdefault(step.phase, _Count())
                planned.requests += len(step.requests)
                planned.work += step_work(step)
                self.finished.setdefault(step.phase, _Count())
        self.total_requests = sum(count.requests for count in self.planned.values())
        self.total_work = sum(count.work for count in self.planned.values())
        self.done_requests = 0
        self.done_work = 0.0  # of finished (or skipped) steps
        self.description = "starting"
        self.step: Step | None = None
        self.tally = StreamTally()  # the running step's chunks, counted by the engine
        self.retired_work = 0.0  # work of the running step's finished requests, not yet over concurrency
        self.retired_chunks = 0

    def start(self, label: str, step: Step) -> None:
        """``label``'s ``step`` starts (raises :class:`~gemmaserve.progress.Cancelled` if cancelled)."""
        check(self.cancel)
        self.step, self.description = step, f"{label}: {step.label}"
        self.tally, self.retired_work, self.retired_chunks = StreamTally(), 0.0, 0
        self.emit()

    def done(self, outcome: Outcome) -> None:
        """One request of the running step finished (either way)."""
        self.done_requests += 1
        self.retired_work += request_work(outcome.request)
        self.retired_chunks += outcome.chunks
        if self.step is not None:
            self.finished[self.step.phase].requests += 1
        self.emit()

    def finish(self, step: Step) -> None:
        """The step is over, or skipped (its target is unreachable): its whole planned work is retired."""
        work = step_work(step)
        self.done_work += work
        self.finished[step.phase].work += work
        self.step = None

    def _in_step(self) -> float:
        step = self.step
        if step is None:
            return 0.0
        streaming = max(0, self.tally.chunks - self.retired_chunks)
        return min(step_work(step), (self.retired_work + streaming) / step.concurrency)

    def emit(self) -> None:
        """Send where the run stands now (also the caller's heartbeat while a step runs)."""
        if self.sink is None:
            return
        in_step = self._in_step()
        running = self.step.phase if self.step else ""
        done_work = self.done_work + in_step
        elapsed = time.monotonic() - self.started
        phases = tuple(
            PhaseProgress(
                phase=phase,
                done_requests=self.finished[phase].requests,
                total_requests=planned.requests,
                done_work=self.finished[phase].work + (in_step if phase == running else 0.0),
                total_work=planned.work,
            )
            for phase, planned in self.planned.items()
        )
        self.sink(
            MeasureProgress(
                phase=running,
                message=self.description,
                done=self.done_requests,
                total=self.total_requests,
                phases=phases,
                done_work=done_work,
                total_work=self.total_work,
                elapsed_s=elapsed,
                eta_s=remaining_s(elapsed, done_work, self.total_work),
            )
        )
