"""serve start's progress events and its cancellation, in the library (no MCP), against the dummy vLLM.

A start cancelled while it waits (a :class:`CancelToken` set from another thread, as the MCP server
does, or Ctrl-C, as in the CLI) stops the server it launched, its whole process group, and frees the
port before :class:`Cancelled` (or ``KeyboardInterrupt``) reaches the caller.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest

from gemmaserve.engine_log import EngineStage
from gemmaserve.progress import Cancelled, CancelToken, ProgressEvent
from gemmaserve.serve import records
from gemmaserve.serve.launcher import LaunchSeams
from gemmaserve.serve.supervisor import stop_server
from tests.support.serve.fixtures import Spawned, report, seams_for, start_dummy

PLAN_ARGS = ["google/gemma-4-E2B-it-qat-w4a16-ct", "--dtype", "float16"]
TIMEOUT_S = 20.0


def never_ready(spawned: Spawned, **update: object) -> LaunchSeams:
    """Seams for a server that never answers /health (DUMMY_STRAGGLER_S: a child that ignores SIGTERM)."""
    seams = seams_for(report(), spawned, mode="never-ready", ready_after_s=0.2)
    return replace(seams, env={**seams.env, "DUMMY_STRAGGLER_S": "0.3"}, **update)  # type: ignore[arg-type]


def start(port: int, seams: LaunchSeams, **kwargs: object):  # type: ignore[no-untyped-def]
    return start_dummy(PLAN_ARGS, seams, port, model="gemma-4-e2b", timeout=TIMEOUT_S, **kwargs)


def assert_nothing_left(port: int, spawned: Spawned) -> None:
    (process,) = spawned.processes
    assert process.poll() is not None, "the launched server is still running"
    assert records.group_members(process.pid) == [], "a process of its group is still running"
    assert records.load_record(port) is None
    # The locks died with the server: the port and the GPU are free again.
    for kind, key in (("port", port), ("gpu", 0)):
        os.close(records.acquire_lock(kind, key))


def test_a_start_cancelled_while_it_waits_stops_its_server_and_raises_cancelled(port: int, spawned: Spawned) -> None:
    cancel = CancelToken()
    events: list[ProgressEvent] = []
    waiting = threading.Event()

    def progress(event: ProgressEvent) -> None:
        events.append(event)
        if records.load_record(port) is not None:
            waiting.set()

    def cancel_once_waiting() -> None:  # the caller's thread, as the MCP server's
        if waiting.wait(timeout=TIMEOUT_S):
            cancel.cancel()

    canceller = threading.Thread(target=cancel_once_waiting)
    canceller.start()
    # sleep=None: real time between polls, cut short by the token (no scripted sleep).
    with pytest.raises(Cancelled):
        start(port, never_ready(spawned, sleep=None), progress=progress, cancel=cancel)
    canceller.join(timeout=5)
    assert waiting.is_set() and events, "cancelled before the wait began"
    assert_nothing_left(port, spawned)


def test_a_scripted_sleep_is_still_the_seam_and_the_token_is_checked_around_it(port: int, spawned: Spawned) -> None:
    cancel = CancelToken()
    naps: list[float] = []

    def scripted(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:
            cancel.cancel()

    with pytest.raises(Cancelled):
        start(port, never_ready(spawned, sleep=scripted), cancel=cancel)
    assert naps == [1.0, 1.0, 1.0]  # the poll interval, asked of the scripted sleep, never slept for real
    assert_nothing_left(port, spawned)


def test_ctrl_c_while_it_waits_stops_its_server_and_propagates(port: int, spawned: Spawned) -> None:
    naps: list[float] = []

    def interrupted(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start(port, never_ready(spawned, sleep=interrupted))
    assert_nothing_left(port, spawned)


def test_a_start_cancelled_before_it_launches_starts_nothing(port: int, spawned: Spawned) -> None:
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        start(port, seams_for(report(), spawned), cancel=cancel)
    assert spawned.processes == [] and records.load_record(port) is None


def test_the_wait_reports_the_engine_stage_and_the_seconds_waited_of_the_timeout(port: int, spawned: Spawned) -> None:
    events: list[ProgressEvent] = []
    result = start(port, seams_for(report(), spawned, ready_after_s=0.6), progress=events.append)
    try:
        assert result.ready and events
        stages = {stage.value for stage in EngineStage}
        for event in events:
            assert event.phase in stages and event.total == TIMEOUT_S and event.done is not None
            assert event.message == f"vLLM {event.phase} — {event.done:.0f} s"
        waited = [event.done for event in events]
        assert waited == sorted(waited) and waited[-1] <= result.waited_s  # type: ignore[type-var]
        assert "loading" in {event.phase for event in events}
    finally:
        stop_server(port, timeout_s=10)


def test_the_cli_shows_a_plain_line_per_stage_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from gemmaserve.cli.progress_display import PLAIN_EVERY_S, PlainDisplay, progress_display
    from gemmaserve.cli.serve import stage_lines

    with progress_display(stage_lines) as shown:  # stderr is captured here: not a terminal
        assert isinstance(shown, PlainDisplay) and shown.every_s == PLAIN_EVERY_S == 30.0
    stream, now = io.StringIO(), [0.0]
    show = PlainDisplay(stream, stage_lines, clock=lambda: now[0])
    for stage, waited in (
        ("starting", 0.0),
        ("loading", 1.0),
        ("loading", 2.0),
        ("loading", 31.0),
        ("compiling", 32.0),
    ):
        now[0] = waited
        show(ProgressEvent(stage, f"vLLM {stage} — {waited:.0f} s", waited, TIMEOUT_S))
    assert capsys.readouterr().out == ""  # stdout carries the result alone
    assert stream.getvalue().splitlines() == [
        "vLLM starting — 0 s",
        "vLLM loading — 1 s",
        "vLLM loading — 31 s",  # the same stage, 30 s on
        "vLLM compiling — 32 s",
    ]


def test_the_wait_reads_only_what_this_launch_logged(port: int, spawned: Spawned) -> None:
    from gemmaserve.errors import ServerDied

    # An earlier run's lines stay in the appended log: they must say nothing about this one.
    earlier = "INFO:     Application startup complete.\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    (records.server_dir(port) / records.LOG_NAME).write_text(earlier)
    events: list[ProgressEvent] = []
    with pytest.raises(ServerDied) as died:
        start(port, seams_for(report(), spawned, mode="crash", ready_after_s=0.6), progress=events.append)
    assert events and "serving" not in {event.phase for event in events}
    assert len(died.value.fields["errors"]) == 1 and "OutOfResources" in died.value.fields["errors"][0]
    assert not any("CUDA out of memory" in line for line in died.value.fields["last_lines"])
    spawned.processes[0].wait(timeout=5)
