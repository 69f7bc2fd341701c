"""``bench measure``'s progress on a terminal: a few lines redrawn in place, from the measuring thread.

Every timestamp of a run is taken in the measuring event loop, so the display must not run beside
it. A display that redraws itself from a thread of its own (rich's ``Progress`` refreshes ten times a
second that way) holds the interpreter lock while a chunk arrives, and the loop waits for it: on the
2-core machine a redraw of the seven-line display took 3-13 ms with the loop waiting, and a one-stream
decode step at 6% of a core stopped with ``ClientSaturated``. Here the sink itself redraws, in the
loop's thread, at most every :data:`REDRAW_EVERY_S`, and a redraw is string formatting and one write
(tens of microseconds). Renders; never measures.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from gemmaserve.bench.run_progress import MeasureProgress

REDRAW_EVERY_S = 0.5  # the run's heartbeat is 1 s; a phase change redraws at once
BAR_WIDTH = 24


def bar(done: float, total: float, width: int = BAR_WIDTH) -> str:
    """``━━━━──────  42%``: the share of ``total`` done, as a bar and a percentage."""
    share = min(max(done / total, 0.0), 1.0) if total > 0 else 0.0
    filled = round(share * width)
    return f"{'━' * filled}{'─' * (width - filled)} {share:4.0%}"


class TerminalDisplay:
    """The sink for :class:`~gemmaserve.bench.run_progress.MeasureProgress` on a terminal.

    ``describe(event)`` is the overall line's detail (requests, elapsed, ETA); ``clock`` and ``width``
    are injectable for tests. :meth:`close` erases the lines (the tables follow on stdout).
    """

    def __init__(
        self,
        stream: TextIO,
        describe: Callable[[MeasureProgress], str],
        *,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
    ) -> None:
        self.stream = stream
        self.describe = describe
        self.clock = clock
        self.width = width
        self.drawn_lines = 0
        self.drawn_at: float | None = None
        self.phase: str | None = None

    def __call__(self, event: MeasureProgress) -> None:
        now = self.clock()
        if event.phase == self.phase and self.drawn_at is not None and now - self.drawn_at < REDRAW_EVERY_S:
            return
        self.phase, self.drawn_at = event.phase, now
        self.draw(self.lines(event))

    def lines(self, event: MeasureProgress) -> list[str]:
        rows = [(event.message, bar(event.done_work, event.total_work), self.describe(event))]
        rows += [
            (
                f"  {phase.phase}",
                bar(phase.done_work, phase.total_work),
                f"{phase.done_requests}/{phase.total_requests} requests",
            )
            for phase in event.phases
        ]
        label_width = max(len(label) for label, _, _ in rows)
        return [f"{label:<{label_width}}  {shown}  {detail}" for label, shown, detail in rows]

    def draw(self, lines: list[str]) -> None:
        # A line wider than the terminal wraps and the cursor arithmetic below would miss it.
        width = (self.width or shutil.get_terminal_size().columns) - 1
        text = self._back() + "".join(f"\x1b[2K{line[:width]}\n" for line in lines)
        if len(lines) < self.drawn_lines:
            text += "\x1b[J"
        self.drawn_lines = len(lines)
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.drawn_lines:
            self.stream.write(self._back() + "\x1b[J")
            self.stream.flush()
            self.drawn_lines = 0

    def _back(self) -> str:
        return f"\x1b[{self.drawn_lines}F" if self.drawn_lines else ""
