"""The progress display of ``bench measure`` on a terminal must not disturb the client's timing.

Every timestamp of a run is taken in the measuring event loop. Any other Python thread of the
process that runs while a chunk arrives holds the interpreter lock, and the loop waits for it: a
display that redraws itself from its own thread, ten times a second, is such a thread (on the
2-core machine a redraw of the seven-line display took 3-13 ms with the loop waiting, enough to
stop a one-stream decode step with ``ClientSaturated``; docs/bench-client-performance.md).
"""

from __future__ import annotations

import io
import sys
import threading

import pytest

from gemmaserve.bench.run_progress import MeasureProgress, PhaseProgress
from gemmaserve.cli import bench as bench_cli


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:  # rich asks; a StringIO has none
        raise io.UnsupportedOperation("fileno")


def _event(phase: str, done: int, elapsed_s: float = 1.0) -> MeasureProgress:
    phases = (
        PhaseProgress("decode", min(done, 10), 10, 10.0 * min(done, 10), 100.0),
        PhaseProgress("load:4", max(0, done - 10), 12, 0.0, 30.0),
    )
    return MeasureProgress(
        phase=phase,
        message=f"t: {phase} #1",
        done=done,
        total=22,
        phases=phases,
        done_work=10.0 * done,
        total_work=130.0,
        elapsed_s=elapsed_s,
        eta_s=12.0,
    )


def test_the_terminal_display_draws_in_the_measuring_thread_and_starts_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    before = set(threading.enumerate())
    with bench_cli._progress() as update:
        update(_event("decode", 3))
        started = [thread.name for thread in set(threading.enumerate()) - before]
        assert started == [], f"the display runs a thread beside the measuring loop: {started}"
    assert "t: decode #1" in terminal.getvalue() and "3/22 requests" in terminal.getvalue()


def test_the_display_redraws_at_most_every_interval_and_at_once_when_the_phase_changes() -> None:
    from gemmaserve.cli.bench_display import REDRAW_EVERY_S, TerminalDisplay

    now = [100.0]
    terminal = _Terminal()
    display = TerminalDisplay(terminal, lambda event: f"{event.done_requests} done", clock=lambda: now[0], width=80)
    draws = []
    display.draw = draws.append  # type: ignore[method-assign]
    for done in range(5):  # a burst of finished requests at one instant: one redraw
        display(_event("decode", done))
    now[0] += REDRAW_EVERY_S / 2
    display(_event("decode", 6))
    display(_event("load:4", 11))  # a new phase shows at once
    now[0] += REDRAW_EVERY_S
    display(_event("load:4", 12))
    assert [lines[0].split()[-2] for lines in draws] == ["0", "11", "12"]


def test_the_display_redraws_its_lines_in_place_within_the_width_and_erases_them_at_the_end() -> None:
    from gemmaserve.cli.bench_display import TerminalDisplay

    terminal = _Terminal()
    display = TerminalDisplay(terminal, lambda event: "x" * 200, clock=lambda: 0.0, width=60)
    display(_event("decode", 3))
    first = terminal.getvalue()
    assert first.count("\n") == 3 and "\x1b[" + "3F" not in first  # overall + two phases, nothing to go back over
    assert all(len(line.replace("\x1b[2K", "")) <= 59 for line in first.splitlines())
    display(_event("load:4", 12))
    assert terminal.getvalue()[len(first) :].startswith("\x1b[3F")  # back to the first line, then over it
    display.close()
    assert terminal.getvalue().endswith("\x1b[3F\x1b[J")
