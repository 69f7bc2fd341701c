"""What ``bench measure`` tells a person while it runs and at the end: progress per phase, ETA, latency rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.bench.measure import MeasureDeps, measure_targets
from gemmaserve.bench.run_progress import MeasureProgress, StepWork
from gemmaserve.bench.transports import ChatRequest
from gemmaserve.bench.workloads import (
    REQUEST_OVERHEAD_TOKENS,
    PlannedRequest,
    Step,
    plan_steps,
    remaining_s,
    request_work,
)
from gemmaserve.measurements.schema import RequestKind, load_result
from gemmaserve.progress import CancelToken, ProgressEvent
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import ThreadedMockServer, start_mock_thread
from tests.support.bench.fixtures import short_measure_request, short_settings


def test_step_work_is_the_token_time_of_one_stream() -> None:
    def planned(tokens: int) -> PlannedRequest:
        return PlannedRequest("r", ChatRequest(prompt="p", max_tokens=tokens, ignore_eos=True))

    one = Step("decode", RequestKind.DECODE, 1, 0, (planned(512),))
    four = Step("load:4", RequestKind.LOAD, 4, 0, tuple(planned(256) for _ in range(4)))
    assert request_work(planned(512).request) == 512 + REQUEST_OVERHEAD_TOKENS
    assert StepWork.of(one).expected(None) == 512 + REQUEST_OVERHEAD_TOKENS
    # four streams at once take about as long as one of them
    assert StepWork.of(four).expected(None) == 256 + REQUEST_OVERHEAD_TOKENS
    # five requests on four streams: two waves
    five = Step("load:4", RequestKind.LOAD, 4, 0, tuple(planned(256) for _ in range(5)))
    assert StepWork.of(five).expected(None) == 2 * (256 + REQUEST_OVERHEAD_TOKENS)


def test_answers_of_the_servers_own_length_count_at_the_length_seen_not_at_max_tokens() -> None:
    def answer() -> PlannedRequest:
        return PlannedRequest("q", ChatRequest(prompt="p", max_tokens=2048))  # no ignore_eos

    quality = StepWork.of(Step("quality", RequestKind.QUALITY, 8, 0, tuple(answer() for _ in range(20))))
    assert quality.expected(None) is None  # unknown until an answer is in: never 2,048 tokens each
    assert quality.expected(32.0) == 3 * (32 + REQUEST_OVERHEAD_TOKENS)


@pytest.mark.parametrize(
    ("elapsed", "done", "total", "expected"),
    [
        (10.0, 25.0, 100.0, 30.0),  # a quarter in 10 s: 30 s to go
        (10.0, 100.0, 100.0, 0.0),
        (0.5, 50.0, 100.0, None),  # too early to tell
        (10.0, 0.5, 100.0, None),  # under 1% done
        (10.0, 0.0, 0.0, None),  # nothing planned
    ],
)
def test_remaining_extrapolates_the_pace_so_far(
    elapsed: float, done: float, total: float, expected: float | None
) -> None:
    assert remaining_s(elapsed, done, total) == expected


def test_events_count_requests_and_work_per_phase(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    events: list[MeasureProgress] = []
    settings = short_settings()
    measure_targets(
        [mock_server.url], tmp_path, settings=settings, deps=MeasureDeps(progress=events.append, use_uvloop=False)
    )
    assert all(isinstance(event, ProgressEvent) for event in events)
    last = events[-1]
    planned = plan_steps(settings)
    assert last.done_requests == last.total_requests == sum(len(step.requests) for step in planned)
    assert last.done == last.done_requests and last.message == events[-1].message
    assert [phase.phase for phase in last.phases] == ["warmup", "decode", "load:1", "load:2"]
    assert last.total_work == pytest.approx(sum(StepWork.of(step).expected(None) or 0.0 for step in planned))
    finished = {phase.phase: phase for phase in last.phases}
    assert finished["decode"].done_requests == finished["decode"].total_requests == 2
    works = [event.done_work for event in events]
    assert works == sorted(works) and works[-1] <= last.total_work
    assert {event.phase for event in events} >= {"decode", "load:1", "load:2"}


def test_a_long_request_moves_the_progress_while_it_streams(tmp_path: Path) -> None:
    """One 400-token call at 5 ms a token: heartbeats report tokens arriving before it finishes."""
    events: list[MeasureProgress] = []
    settings = short_settings(decode_calls=1, decode_short_tokens=2, decode_long_tokens=400, load_repeats=0)
    with start_mock_thread(MockConfig(ttft_s=0.001, itl_s=0.005)) as server:
        measure_targets(
            [server.url],
            tmp_path,
            settings=settings.model_copy(update={"extra": {"warmup_calls": 0}}),
            deps=MeasureDeps(progress=events.append, use_uvloop=False),
        )
    during = [event for event in events if event.done_requests == 1 and "decode" in event.message]
    moving = [event.done_work for event in during]
    assert len(moving) >= 2 and moving[-1] > moving[0], [(e.message, e.done_work) for e in events]
    assert any(event.eta_s is not None for event in during)


def test_a_cancelled_run_stops_and_saves_marked_interrupted(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    cancel = CancelToken()

    def progress(event: MeasureProgress) -> None:
        if event.phase == "load:1":
            cancel.cancel()

    report = measure_targets(
        [mock_server.url],
        tmp_path,
        settings=short_settings(),
        deps=MeasureDeps(progress=progress, cancel=cancel, use_uvloop=False),
    )
    assert report.status.value == "interrupted" and report.exit_code == 130
    result = load_result(report.targets[0].path)
    assert result.completeness.interrupted and "decode" in result.completeness.finished
    assert "load:2" in result.completeness.missing


def test_latency_rows_are_the_result_files_percentiles(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    from gemmaserve.bench.measure import measure_endpoints
    from gemmaserve.measurements import stats

    request = short_measure_request(mock_server.url, tmp_path, "t", concurrency=[1, 2], repeats=2)
    report = measure_endpoints(request, use_uvloop=False)
    rows = {row.phase: row for row in report.targets[0].latency}
    assert list(rows) == ["decode", "load:1", "load:2"]
    result = load_result(report.targets[0].path)
    for level in result.load:
        row = rows[f"load:{level.concurrency}"]
        assert (row.ttft_s, row.itl_s, row.tpot_s) == (level.ttft_s, level.itl_s, level.tpot_s)
    decode = [r for r in result.requests if r.kind == RequestKind.DECODE]
    assert rows["decode"].ttft_s == stats.summarize([r.ttft_s for r in decode if r.ttft_s is not None])
    for row in rows.values():
        for metric in (row.ttft_s, row.itl_s, row.tpot_s):
            # a figure, or (tokens 0.5 ms apart often land in one read) the reason there is none
            measured = metric.p50 is not None and metric.p99 is not None and metric.p50 <= metric.p99
            assert measured or (metric.not_measurable or "").startswith("not measurable: about")
