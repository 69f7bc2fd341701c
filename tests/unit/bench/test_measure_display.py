"""``bench measure``'s progress lines, drawn by the one progress display (tests/unit/test_progress_display.py).

On a terminal: the run's line and one line per phase, redrawn over each other (no phase's lines are left
behind: they show every phase at once). Off a terminal: the run's line when a phase starts for the first
time (the first warmup, not the pool warmups before each load level), else at most every 10 s.
"""

from __future__ import annotations

import io
import sys
import threading

import pytest

from gemmaserve.bench.run_progress import MeasureProgress, PhaseProgress
from gemmaserve.cli import bench as bench_cli
from gemmaserve.cli.progress_display import PlainDisplay, bar, progress_display


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _event(phase: str, done: int, elapsed_s: float = 1.0, eta_s: float | None = 12.0) -> MeasureProgress:
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
        eta_s=eta_s,
    )


def test_the_run_line_then_a_line_per_phase_aligned_with_bars_and_the_eta() -> None:
    lines = bench_cli.measure_lines(_event("decode", 3, elapsed_s=65.0))
    assert lines == [
        f"t: decode #1  {bar(30, 130)}  3/22 requests, 1m05s elapsed, ETA 12s",
        f"  decode      {bar(30, 100)}  3/10 requests",
        f"  load:4      {bar(0, 30)}  0/12 requests",
    ]


def test_the_eta_names_the_phases_it_leaves_out_and_waits_until_it_can_extrapolate() -> None:
    pending = MeasureProgress(phase="quality", message="t: quality #1", eta_s=7.0, eta_pending=("quality",))
    assert bench_cli.measure_lines(pending)[0].endswith("0/0 requests, 0s elapsed, ETA 7s + quality")
    assert bench_cli.measure_lines(_event("decode", 0, eta_s=None))[0].endswith("0/22 requests, 1s elapsed")


def test_on_a_terminal_the_lines_are_drawn_from_the_measuring_thread_over_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    before = set(threading.enumerate())
    with progress_display(bench_cli.measure_lines, keep_ended_phases=False) as update:
        update(_event("decode", 3))
        first = terminal.getvalue()
        update(_event("load:4", 12))  # a new phase: drawn at once, over the decode lines
        started = [thread.name for thread in set(threading.enumerate()) - before]
    assert started == [], f"the display runs a thread beside the measuring loop: {started}"
    assert first.count("\n") == 3 and "t: decode #1" in first and "3/22 requests" in first
    assert terminal.getvalue()[len(first) :].startswith("\x1b[3F\x1b[2Kt: load:4 #1")
    assert terminal.getvalue().endswith("\x1b[3F\x1b[J")  # erased: the tables follow on stdout


def test_off_a_terminal_a_line_when_a_phase_first_starts_else_one_every_10_s() -> None:
    out, clock = io.StringIO(), Clock()
    display = PlainDisplay(
        out,
        bench_cli.measure_lines,
        every_s=bench_cli.PLAIN_EVERY_S,
        clock=clock,
        phase_starts=bench_cli.FirstOfEachPhase(),
    )
    for phase, done in (("warmup", 0), ("decode", 1), ("decode", 2), ("warmup", 10), ("load:4", 11)):
        display(_event(phase, done))
    clock.now = bench_cli.PLAIN_EVERY_S - 0.1
    display(_event("load:4", 12))  # same phase, too soon
    display(_event("warmup", 12))  # the pool warmup before the next level: no new phase
    clock.now = bench_cli.PLAIN_EVERY_S + 0.1
    display(_event("load:4", 13))  # the heartbeat: 10 s since the last line
    written = [line.split("  ")[0] for line in out.getvalue().splitlines()]
    assert written == ["t: warmup #1", "t: decode #1", "t: load:4 #1", "t: load:4 #1"]
    assert "13/22 requests" in out.getvalue().splitlines()[-1]
