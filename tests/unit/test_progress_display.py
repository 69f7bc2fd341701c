"""The one progress display: what a terminal and a log get, on a scripted clock (no wall-clock time)."""

from __future__ import annotations

import io

from gemmaserve.cli.progress_display import (
    PLAIN_EVERY_S,
    REDRAW_EVERY_S,
    PlainDisplay,
    TerminalDisplay,
    bar,
    event_lines,
    progress_display,
)
from gemmaserve.progress import ProgressEvent


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_per_phase_and_otherwise_one_per_interval() -> None:
    out, clock = io.StringIO(), Clock()
    display = PlainDisplay(out, event_lines, clock=clock)
    display(ProgressEvent("creating", "Creating the model"))
    clock.now = 1.0
    display(ProgressEvent("creating", "still creating"))  # same phase, too soon: not written
    display(ProgressEvent("waiting", "Waiting for InService"))  # a new phase: written at once
    clock.now = 1.0 + PLAIN_EVERY_S
    display(ProgressEvent("waiting", "Waiting for InService (30 s)"))
    assert out.getvalue().splitlines() == [
        "Creating the model",
        "Waiting for InService",
        "Waiting for InService (30 s)",
    ]


def test_counted_work_gets_a_bar() -> None:
    assert event_lines(ProgressEvent("pack", "packing q_proj", done=1, total=4)) == [f"packing q_proj  {bar(1, 4)}"]
    assert event_lines(ProgressEvent("wait", "waiting", done=3, total=None)) == ["waiting"]
    assert bar(1, 4, width=4) == "━───  25%"
    assert bar(5, 0, width=2) == "──   0%"  # nothing to count: no division by zero


def test_on_a_terminal_lines_are_redrawn_in_place_and_an_ended_phase_stays_in_the_scrollback() -> None:
    out, clock = io.StringIO(), Clock()
    display = TerminalDisplay(out, event_lines, clock=clock, width=80)
    display(ProgressEvent("compiling", "compiling 1 of 3"))
    clock.now = REDRAW_EVERY_S / 2
    display(ProgressEvent("compiling", "compiling 2 of 3"))  # too soon: skipped
    clock.now = REDRAW_EVERY_S
    display(ProgressEvent("compiling", "compiling 3 of 3"))
    display(ProgressEvent("loading", "loading weights"))
    display.close()
    text = out.getvalue()
    assert "compiling 2 of 3" not in text
    # The last compiling line is drawn once more, kept (the cursor does not go back over it), and the
    # loading line is drawn below it, then erased at close.
    assert text.endswith("\x1b[2Kcompiling 3 of 3\n\x1b[2Kloading weights\n\x1b[1F\x1b[J")


def test_a_line_wider_than_the_terminal_is_cut_so_the_cursor_arithmetic_holds() -> None:
    out = io.StringIO()
    TerminalDisplay(out, lambda event: ["x" * 200], clock=Clock(), width=60)(ProgressEvent("a", "b"))
    assert out.getvalue() == "\x1b[2K" + "x" * 59 + "\n"


def test_the_display_is_plain_when_the_stream_is_not_a_terminal() -> None:
    out = io.StringIO()
    with progress_display(stream=out) as show:
        show(ProgressEvent("one", "first"))
    assert out.getvalue() == "first\n"


def test_a_burst_of_events_at_one_instant_is_one_redraw_and_a_new_phase_shows_at_once() -> None:
    out, clock = io.StringIO(), Clock()
    display = TerminalDisplay(out, lambda event: [event.message], clock=clock, width=80)
    draws: list[list[str]] = []
    display.draw = draws.append  # type: ignore[method-assign]
    for done in range(5):  # a burst of finished requests at one instant: one redraw
        display(ProgressEvent("decode", f"{done} done"))
    clock.now = REDRAW_EVERY_S / 2
    display(ProgressEvent("decode", "6 done"))
    display(ProgressEvent("load", "11 done"))  # a new phase shows at once
    clock.now += REDRAW_EVERY_S
    display(ProgressEvent("load", "12 done"))
    # The decode line is drawn again (kept in the scrollback) when the load phase begins.
    assert [lines[0] for lines in draws] == ["0 done", "0 done", "11 done", "12 done"]


def test_without_keeping_ended_phases_the_next_phase_is_drawn_over_the_last() -> None:
    out = io.StringIO()
    display = TerminalDisplay(
        out, lambda event: [event.message, "x" * 200], clock=Clock(), width=60, keep_ended_phases=False
    )
    display(ProgressEvent("decode", "decode"))
    first = out.getvalue()
    assert first.count("\n") == 2 and all(len(line.replace("\x1b[2K", "")) <= 59 for line in first.splitlines())
    display(ProgressEvent("load", "load"))
    assert out.getvalue()[len(first) :].startswith("\x1b[2F\x1b[2Kload\n")  # back over the decode lines
    display.close()
    assert out.getvalue().endswith("\x1b[2F\x1b[J") and out.getvalue().count("decode") == 1


def test_a_command_may_say_when_a_phase_starts_off_a_terminal() -> None:
    out, clock = io.StringIO(), Clock()
    seen: set[str] = set()

    def first_time(event: ProgressEvent) -> bool:
        new = event.phase not in seen
        seen.add(event.phase)
        return new

    display = PlainDisplay(out, event_lines, clock=clock, phase_starts=first_time)
    for phase in ("a", "b", "a", "c"):
        display(ProgressEvent(phase, phase))
    assert out.getvalue().splitlines() == ["a", "b", "c"]  # the return to "a" starts nothing


def test_on_a_terminal_the_display_draws_from_the_reporting_thread_and_starts_none() -> None:
    import threading

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    before = set(threading.enumerate())
    with progress_display(stream=out) as show:
        show(ProgressEvent("one", "first"))
        assert set(threading.enumerate()) == before, "a display thread would delay a measured chunk's timestamp"
        assert out.getvalue() == "\x1b[2Kfirst\n"  # drawn by the call itself, not later
    assert out.getvalue().endswith("\x1b[1F\x1b[J")
