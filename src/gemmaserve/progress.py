"""One progress event and one cancellation check for every long action (pure: no I/O, no front end).

A long action (a deploy, a vLLM start, a repack, a measurement, an image build) takes
``progress: ProgressCallback | None`` and ``cancel: CancelToken | None``. It reports
:class:`ProgressEvent` values, checks ``cancel.check()`` at points where stopping is safe and waits with
``cancel.sleep()``; on :class:`Cancelled` it cleans up what it created, as on Ctrl-C, then lets it
propagate. The CLI prints events on stderr; the MCP server relays them as MCP progress notifications
and sets the token when the client cancels the request. Nothing is injected into the library: no
``KeyboardInterrupt`` from a callback, no signal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a long action.

    ``phase`` names what is happening in a word or two ("download", "compiling", "Creating", "request");
    ``message`` is the line a person reads; ``done``/``total`` count work where it can be counted
    (tensors, requests, seconds waited), ``total`` None when the end is not known in advance.
    """

    phase: str
    message: str
    done: float | None = None
    total: float | None = None

    @property
    def fraction(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)


ProgressCallback = Callable[[ProgressEvent], None]


def report(progress: ProgressCallback | None, event: ProgressEvent) -> None:
    """Send ``event`` if anyone listens (actions call this instead of testing for None each time)."""
    if progress is not None:
        progress(event)


class Cancelled(Exception):
    """The caller cancelled the action: whatever it created is cleaned up, then this propagates."""

    def __init__(self, message: str = "The request was cancelled.") -> None:
        super().__init__(message)


class CancelToken:
    """A flag the caller sets from another thread; the action polls it where stopping is safe."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if the caller cancelled."""
        if self._event.is_set():
            raise Cancelled()

    def sleep(self, seconds: float) -> None:
        """A ``time.sleep`` for wait loops that returns early, raising :class:`Cancelled`, once cancelled."""
        if self._event.wait(max(seconds, 0.0)):
            raise Cancelled()


def time_left(elapsed_s: float, done: int, total: int) -> str:
    """The ETA suffix (", about N s left") at the pace of the ``done`` steps so far; nothing before the first
    step ends (no pace, no guess), after the last, or when less than a second is left."""
    if done <= 0 or done >= total:
        return ""
    left = elapsed_s / done * (total - done)
    return f", about {left:.0f} s left" if left >= 1 else ""


class StepPace:
    """Names each step of a long action as it starts, with how many are left and an ETA from the pace of
    the steps before it (``clock``: monotonic seconds, a test's own)."""

    def __init__(
        self, total: int, phase: str, progress: ProgressCallback | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.phase, self.progress, self.clock = total, phase, progress, clock
        self.started = clock()
        self.done = 0

    def begin(self, what: str) -> None:
        """Say that step ``self.done + 1`` starts; the step before it, if any, has ended."""
        if self.progress is None:
            self.done += 1
            return
        eta = time_left(self.clock() - self.started, self.done, self.total)
        message = f"{what} (check {self.done + 1} of {self.total}{eta})"
        self.progress(ProgressEvent(self.phase, message, done=self.done, total=self.total))
        self.done += 1


def check(cancel: CancelToken | None) -> None:
    """``cancel.check()`` for an optional token."""
    if cancel is not None:
        cancel.check()


def pause(seconds: float, *, cancel: CancelToken | None = None, sleep: Callable[[float], None] | None = None) -> None:
    """Wait between two polls of a wait loop, stopping with :class:`Cancelled` once ``cancel`` is set.

    ``sleep`` is a test's scripted sleep (it cannot be cut short, so the token is checked before and
    after it); None is real time, which a cancel cuts short.
    """
    if sleep is not None:
        check(cancel)
        sleep(seconds)
        check(cancel)
    elif cancel is not None:
        cancel.sleep(seconds)
    else:
        time.sleep(seconds)


def utc_now() -> datetime:
    """The default clock of the wait loops (callers and tests pass their own)."""
    return datetime.now(UTC)
