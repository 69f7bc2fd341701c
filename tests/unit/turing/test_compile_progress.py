"""A long compile run reports each compile with the launches left and an ETA (an injected clock, no compiling)."""

from __future__ import annotations

import pytest

from gemmaserve.progress import Cancelled, CancelToken, ProgressEvent
from gemmaserve.turing.kernel_compile import CompileRun, LaunchFigures, LaunchSpec
from tests.support.turing.launches import e2b_global_launch


def _spec(warps: int, *, stages: int = 3) -> LaunchSpec:
    return e2b_global_launch(16, warps, stages=stages)


def _figures(spec: LaunchSpec) -> LaunchFigures:
    return LaunchFigures(smem_bytes=65_536, registers=254, spill_store_bytes=0, spill_load_bytes=0)


class _Clock:
    """Each compile takes ``step_s`` on this clock: the compiler advances it."""

    def __init__(self, step_s: float) -> None:
        self.now = 100.0
        self.step_s = step_s
        self.compiled: list[LaunchSpec] = []

    def __call__(self) -> float:
        return self.now

    def compile(self, spec: LaunchSpec) -> LaunchFigures:
        self.now += self.step_s
        self.compiled.append(spec)
        return _figures(spec)


def test_each_compile_is_reported_with_what_is_left_and_an_eta() -> None:
    clock = _Clock(step_s=4.0)
    events: list[ProgressEvent] = []
    run = CompileRun(clock.compile, 3, progress=events.append, clock=clock)
    for warps in (4, 8, 4, 16):  # the second 4-warp launch is answered from memory
        run(_spec(warps))
    assert [spec.num_warps for spec in clock.compiled] == [4, 8, 16]
    assert [(e.phase, e.done, e.total) for e in events] == [
        ("compiling", 1, 3),
        ("compiling", 2, 3),
        ("compiling", 3, 3),
    ]
    assert [e.message for e in events] == [
        "Compiled head 512 2D tile 16, 4 warps, 8 query heads, 8 per KV head (1/3 launches, about 8 s left)",
        "Compiled head 512 2D tile 16, 8 warps, 8 query heads, 8 per KV head (2/3 launches, about 4 s left)",
        "Compiled head 512 2D tile 16, 16 warps, 8 query heads, 8 per KV head (3/3 launches)",
    ]


def test_the_eta_follows_the_pace_and_a_skipped_compile_shortens_it() -> None:
    clock = _Clock(step_s=10.0)
    events: list[ProgressEvent] = []
    run = CompileRun(clock.compile, 4, progress=events.append, clock=clock)
    run(_spec(4))
    clock.step_s = 30.0  # slower compiles raise the mean pace: (10 + 30) / 2 = 20 s each
    run(_spec(8))
    run.skip()
    run(_spec(16, stages=1))
    assert [e.message.split("(")[1] for e in events] == [
        "1/4 launches, about 30 s left)",
        "2/4 launches, about 40 s left)",
        "3/3 launches)",
    ]
    assert events[-1].message.startswith(
        "Compiled head 512 2D tile 16, 16 warps, 8 query heads, 8 per KV head, 1 stage "
    )


def test_a_cancel_stops_before_the_next_compile() -> None:
    clock = _Clock(step_s=1.0)
    cancel = CancelToken()
    run = CompileRun(clock.compile, 2, cancel=cancel, clock=clock)
    run(_spec(4))
    cancel.cancel()
    with pytest.raises(Cancelled):
        run(_spec(8))
    assert len(clock.compiled) == 1
    assert run(_spec(4)).registers == 254  # what was compiled is still answered
