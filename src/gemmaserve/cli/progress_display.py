"""The one progress display of every long command, on stderr: lines redrawn in place on a terminal, plain
lines elsewhere (logs, CI, pipes).

Every command shows its progress events (:class:`~gemmaserve.progress.ProgressEvent`, or a richer event
with a ``phase``, such as ``bench measure``'s) through :func:`progress_display`. The display draws from
the thread that reports, never from a thread of its own: a display that redraws itself on a timer (rich's
``Progress`` does, ten times a second) holds the interpreter lock while a measured chunk arrives and
delays its timestamp (docs/bench-client-performance.md). A redraw is string formatting and one write.

On a terminal the live lines are redrawn at most every :data:`REDRAW_EVERY_S` and at once when the phase
changes; the last lines of a phase that ended stay in the scrollback, so a deploy's or a start's steps can
be read afterwards (unless ``keep_ended_phases`` is off: ``bench measure``'s lines show every phase at
once). Off a terminal a line is written when a phase starts and otherwise at most every ``plain_every_s``:
enough for a log, few enough to read. A phase starts when the event's phase differs from the last one's,
unless the command says otherwise (``phase_starts``: ``bench measure`` counts each phase once, so the pool
warmup before every load level is no new phase).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO, TypeVar

from gemmaserve.progress import ProgressEvent

REDRAW_EVERY_S = 0.5
#: Off a terminal: a line per phase change, else one this often. A first vLLM start on a T4 waits many
#: minutes in one stage; a line per poll would bury the log.
PLAIN_EVERY_S = 30.0
BAR_WIDTH = 24


class Phased(Protocol):
    @property
    def phase(self) -> str: ...


E = TypeVar("E", bound=Phased)


def bar(done: float, total: float, width: int = BAR_WIDTH) -> str:
    """``━━━━──────  42%``: the share of ``total`` done, as a bar and a percentage."""
    share = min(max(done / total, 0.0), 1.0) if total > 0 else 0.0
    filled = round(share * width)
    return f"{'━' * filled}{'─' * (width - filled)} {share:4.0%}"


def event_lines(event: ProgressEvent) -> list[str]:
    """A :class:`ProgressEvent` as one line: its message, with a bar where the work can be counted."""
    fraction = event.fraction
    if fraction is None or event.total is None:
        return [event.message]
    return [f"{event.message}  {bar(fraction, 1.0)}"]


class TerminalDisplay:
    """Lines redrawn in place (``lines_for(event)``); ``clock`` and ``width`` are a test's own.

    :meth:`close` erases the live lines (the result follows on stdout); the lines of each phase that
    ended were printed for good when the next one began, unless ``keep_ended_phases`` is off (then
    the next phase's lines are drawn over them).
    """

    def __init__(
        self,
        stream: TextIO,
        lines_for: Callable[[Any], list[str]],
        *,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
        keep_ended_phases: bool = True,
    ) -> None:
        self.stream, self.lines_for, self.clock, self.width = stream, lines_for, clock, width
        self.keep_ended_phases = keep_ended_phases
        self.drawn_lines = 0
        self.drawn_at: float | None = None
        self.phase: str | None = None
        self.shown: list[str] = []

    def __call__(self, event: Phased) -> None:
        now = self.clock()
        same_phase = event.phase == self.phase
        if same_phase and self.drawn_at is not None and now - self.drawn_at < REDRAW_EVERY_S:
            return
        if not same_phase and self.shown and self.keep_ended_phases:
            self._keep(self.shown)  # the ended phase's last lines stay in the scrollback
        self.phase, self.drawn_at = event.phase, now
        self.shown = self.lines_for(event)
        self.draw(self.shown)

    def draw(self, lines: list[str]) -> None:
        # A line wider than the terminal wraps, and the cursor arithmetic below would miss it.
        width = (self.width or shutil.get_terminal_size().columns) - 1
        text = self._back() + "".join(f"\x1b[2K{line[:width]}\n" for line in lines)
        if len(lines) < self.drawn_lines:
            text += "\x1b[J"
        self.drawn_lines = len(lines)
        self.stream.write(text)
        self.stream.flush()

    def _keep(self, lines: list[str]) -> None:
        self.draw(lines)
        self.drawn_lines = 0

    def close(self) -> None:
        if self.drawn_lines:
            self.stream.write(self._back() + "\x1b[J")
            self.stream.flush()
            self.drawn_lines = 0

    def _back(self) -> str:
        return f"\x1b[{self.drawn_lines}F" if self.drawn_lines else ""


class PlainDisplay:
    """A line (the first of ``lines_for(event)``) when a phase starts, else at most every ``every_s``.

    ``phase_starts(event)`` says whether the event starts a phase; by default, when its phase differs from
    the last event's.
    """

    def __init__(
        self,
        stream: TextIO,
        lines_for: Callable[[Any], list[str]],
        *,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        phase_starts: Callable[[Any], bool] | None = None,
    ) -> None:
        self.stream, self.lines_for, self.every_s, self.clock = stream, lines_for, every_s, clock
        self.phase_starts = phase_starts
        self.phase: str | None = None
        self.written_at: float | None = None

    def __call__(self, event: Phased) -> None:
        now = self.clock()
        starts = self.phase_starts(event) if self.phase_starts is not None else event.phase != self.phase
        self.phase = event.phase
        if not starts and self.written_at is not None and now - self.written_at < self.every_s:
            return
        self.written_at = now
        lines = self.lines_for(event)
        if lines:
            self.stream.write(lines[0] + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Nothing to erase: every line written stays."""


@contextmanager
def progress_display(
    lines_for: Callable[[E], list[str]] = event_lines,  # type: ignore[assignment]
    *,
    plain_every_s: float = PLAIN_EVERY_S,
    phase_starts: Callable[[E], bool] | None = None,
    keep_ended_phases: bool = True,
    stream: TextIO | None = None,
) -> Iterator[Callable[[E], None]]:
    """The progress callback of one command: a :class:`TerminalDisplay` when ``stream`` (stderr) is a
    terminal, a :class:`PlainDisplay` otherwise; the live lines are erased when the block ends.

    ``phase_starts`` and ``keep_ended_phases`` are a command's own notion of a phase (see the module's
    docstring); most commands leave them.
    """
    out = stream if stream is not None else sys.stderr
    display: TerminalDisplay | PlainDisplay = (
        TerminalDisplay(out, lines_for, keep_ended_phases=keep_ended_phases)
        if out.isatty()
        else PlainDisplay(out, lines_for, every_s=plain_every_s, phase_starts=phase_starts)
    )
    try:
        yield display
    finally:
        display.close()
