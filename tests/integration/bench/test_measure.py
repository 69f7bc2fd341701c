"""``measure_targets`` end to end against the mock server: files, interleaving, faults, interruption."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gemmaserve.bench.measure import MeasureDeps, RunStatus, TargetOptions, measure_targets
from gemmaserve.bench.transports import ChatRequest, Chunk, TargetSpec
from gemmaserve.bench.workloads import plan_steps
from gemmaserve.measurements import stats
from gemmaserve.measurements.schema import ClientSettings, RequestKind, load_result
from gemmaserve.testing.mock_server import MockConfig, MockServer
from gemmaserve.testing.runner import MockProcess, ThreadedMockServer
from tests.support.bench.fixtures import short_settings


def _small(**changes: object) -> ClientSettings:
    """Two of each: decode calls, load repeats; concurrency 1 and 3."""
    return short_settings(
        **{
            "decode_calls": 2,
            "decode_long_tokens": 48,
            "concurrency_levels": [1, 3],
            "load_repeats": 2,
            "load_input_tokens": 20,
            "load_output_tokens": 12,
            **changes,
        }
    )


def test_small_run_writes_a_valid_complete_file(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    report = measure_targets([mock_server.url], tmp_path, settings=_small(), deps=MeasureDeps(use_uvloop=False))
    assert report.status == RunStatus.SUCCESS and report.exit_code == 0
    result = load_result(report.targets[0].path)
    assert result.completeness.finished == ["decode", "load:1", "load:3"] and not result.completeness.missing
    assert result.run.finished_at is not None and result.target.model == "mock-model"
    assert [level.concurrency for level in result.load] == [1, 3]
    assert all(len(level.output_tokens_per_s) == 2 for level in result.load)
    assert result.decode is not None and result.decode.rate_tokens_per_s is not None
    assert result.failures.requests == 1 + 4 + (1 + 2) + (3 + 6) and result.failures.failed == 0
    # the engine's own capacity label, not num_gpu_blocks × block_size (4096 × 16)
    assert result.engine_facts is not None and result.engine_facts.kv_cache_tokens == 32_768
    facts = result.engine_facts.model_dump()
    assert facts["generation_tokens_during_run"] == sum(r.output_tokens or 0 for r in result.requests)
    assert result.client_overhead is not None and result.client_overhead.chunks > 0


def test_the_decode_rate_is_the_fit_of_the_calls_the_file_keeps(timed_server: MockProcess, tmp_path: Path) -> None:
    settings = _small(decode_calls=3, decode_long_tokens=256, load_repeats=0)
    report = measure_targets([timed_server.url], tmp_path, settings=settings)
    result = load_result(report.targets[0].path)
    assert result.decode is not None and result.decode.rate_tokens_per_s is not None
    # The reported line is the fit of the calls the file keeps, so anyone can recompute it from them.
    # How close it comes to the server's true rate is shown by benchmarks/bench_client_performance.py
    # (within 1%), not by a timed unit test: a busy machine stretches the server's 2 ms sleeps.
    walls = {
        tokens: [
            r.e2el_s for r in result.requests if r.kind == RequestKind.DECODE and r.requested_output_tokens == tokens
        ]
        for tokens in (16, 256)
    }
    assert [len(w) for w in walls.values()] == [3, 3] and all(w is not None for ws in walls.values() for w in ws)
    line = stats.decode_rate(walls[16], walls[256], short_tokens=16, long_tokens=256)  # type: ignore[arg-type]
    assert (result.decode.rate_tokens_per_s, result.decode.intercept_s) == pytest.approx(
        (line.rate_tokens_per_s, line.intercept_s), rel=1e-12
    )


def test_prompts_are_distinct_across_requests_and_targets() -> None:
    settings = _small(concurrency_levels=[1, 4, 16], load_repeats=3)
    prompts = [
        p.request.prompt for index in (0, 1) for step in plan_steps(settings, target_index=index) for p in step.requests
    ]
    assert len(prompts) == len(set(prompts))
    # the nonce opens the prompt, so a block-wise prefix cache misses from the first token
    assert len({p.split()[1] for p in prompts}) == len(prompts)


class _Recorder:
    """Transports that log (target, prompt) in one shared list and answer instantly."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def factory(self, spec: TargetSpec) -> _RecordingTransport:
        return _RecordingTransport(spec.url, self.calls)


class _RecordingTransport:
    kind = "http"
    description = "recording"

    def __init__(self, url: str, calls: list[tuple[str, str]]) -> None:
        self.url = url
        self.calls = calls

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.calls.append((self.url, request.prompt))
        for k in range(request.max_tokens):
            yield Chunk(float(k), content="x", token=True)
        yield Chunk(float(request.max_tokens), finish_reason="length", completion_tokens=request.max_tokens)

    async def aclose(self) -> None:
        return None


def test_targets_are_interleaved_step_by_step(tmp_path: Path) -> None:
    recorder = _Recorder()
    a, b = "http://127.0.0.1:1", "http://127.0.0.1:2"
    settings = _small(concurrency_levels=[2], load_repeats=2)
    report = measure_targets(
        [a, b, a], tmp_path, settings=settings, deps=MeasureDeps(transport_factory=recorder.factory, use_uvloop=False)
    )
    order = [url for url, _ in recorder.calls]
    # warmup, 4 decode calls: one request per step, A B A each time; then the connection
    # warm-up of the load level and its 2 repeats, 2 requests each
    assert order[:15] == [a, b, a] * 5
    assert order[15:] == [a, a, b, b, a, a] * 3
    assert [t.label for t in report.targets] == ["127.0.0.1-1", "127.0.0.1-2", "127.0.0.1-1-2"]
    assert {load_result(t.path).run.run_id for t in report.targets} == {report.run_id}


def test_failures_are_results_and_the_run_goes_on(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    mock_server.configure(fault="http_500", fault_every=4)
    report = measure_targets([mock_server.url], tmp_path, settings=_small(), deps=MeasureDeps(use_uvloop=False))
    assert report.status == RunStatus.PARTIAL and report.exit_code == 1
    result = load_result(report.targets[0].path)
    assert not result.completeness.missing  # every phase still ran
    failed = [r for r in result.requests if not r.success]
    assert result.failures.failed == len(failed) == 17 // 4
    assert result.failures.by_reason == {"http_500": len(failed)}
    assert all(r.error and r.error.startswith("http_500") for r in failed)


def test_short_replies_are_counted(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    mock_server.configure(fault="short_reply", fault_every=2)
    report = measure_targets([mock_server.url], tmp_path, settings=_small(), deps=MeasureDeps(use_uvloop=False))
    result = load_result(report.targets[0].path)
    assert result.failures.short_replies == result.failures.failed > 0
    short = [r for r in result.requests if not r.success]
    assert all(r.output_tokens is not None and r.output_tokens < r.requested_output_tokens for r in short)


def test_unreachable_target_is_recorded_and_the_others_measured(
    mock_server: ThreadedMockServer, tmp_path: Path
) -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    report = measure_targets([dead, mock_server.url], tmp_path, settings=_small(), deps=MeasureDeps(use_uvloop=False))
    down, up = report.targets
    assert down.status == RunStatus.FAILED and down.failures_by_reason == {"connect_error": 1}
    assert down.missing == ["decode", "load:1", "load:3"] and down.note and "unreachable" in down.note
    assert up.status == RunStatus.SUCCESS
    assert report.status == RunStatus.PARTIAL and report.exit_code == 1


def test_interruption_keeps_finished_steps_and_says_what_is_missing(
    mock_server: ThreadedMockServer, tmp_path: Path
) -> None:
    seen: list[str] = []

    def progress(event: object) -> None:
        seen.append(event.message)  # type: ignore[attr-defined]
        if "load:3" in event.message:  # type: ignore[attr-defined]
            raise KeyboardInterrupt

    report = measure_targets(
        [mock_server.url], tmp_path, settings=_small(), deps=MeasureDeps(progress=progress, use_uvloop=False)
    )
    assert report.status == RunStatus.INTERRUPTED and report.exit_code == 130
    result = load_result(report.targets[0].path)
    assert result.completeness.interrupted and result.run.finished_at is None
    assert result.completeness.finished == ["decode", "load:1"]
    assert result.completeness.missing == ["load:3"]
    assert {r.kind for r in result.requests} == {RequestKind.WARMUP, RequestKind.DECODE, RequestKind.LOAD}


def test_file_is_rewritten_after_every_step(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    sizes: list[int] = []

    def progress(event: object) -> None:
        path = tmp_path / "t.json"
        if path.exists():
            sizes.append(len(load_result(path).requests))

    measure_targets(
        [mock_server.url],
        tmp_path,
        settings=_small(),
        target_options=[TargetOptions(label="t")],
        deps=MeasureDeps(progress=progress, use_uvloop=False),
    )
    assert sizes[0] == 0 and sizes[-1] > 0 and sizes == sorted(sizes) and len(set(sizes)) >= 6


def test_quality_answers_are_scored_and_stored(tmp_path: Path) -> None:
    from gemmaserve.measurements.questions import get_question_set
    from gemmaserve.testing.runner import ThreadedMockServer as Threaded

    questions = {q.prompt: q for q in get_question_set("published-40").questions}

    def reply(prompt: str) -> str:  # right on products, wrong elsewhere
        question = questions[prompt]
        answer = question.expected if question.kind == "product" else "nothing"
        return f"Let me think. Answer: {answer}"

    server = MockServer(MockConfig(ttft_s=0.001, itl_s=0.0002), reply_for=reply)
    with Threaded(server).start() as running:
        report = measure_targets(
            [running.url],
            tmp_path,
            settings=_small(decode_calls=0, load_repeats=0, quality_set="published-40"),
            deps=MeasureDeps(use_uvloop=False),
        )
    result = load_result(report.targets[0].path)
    assert result.quality is not None and result.quality.total == 40 and len(result.quality.answers) == 40
    assert result.quality.correct == sum(1 for q in questions.values() if q.kind == "product") == 15
    assert all(a.answer_text and a.answer_text.startswith("Let me think.") for a in result.quality.answers)


def test_engine_log_facts_are_read(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO Model loading took 8.01 GiB memory and 66.190265 seconds\nINFO GPU KV cache size: 867,999 tokens\n"
    )
    report = measure_targets(
        [mock_server.url],
        tmp_path / "out",
        settings=_small(decode_calls=0, load_repeats=0),
        target_options=[TargetOptions(log_path=str(log))],
        deps=MeasureDeps(use_uvloop=False),
    )
    facts = load_result(report.targets[0].path).engine_facts
    # /metrics states the capacity itself (unrounded), so it wins; the log adds what only it says
    assert facts is not None and facts.kv_cache_tokens == 32_768 and facts.weights_gib == pytest.approx(8.01)
    assert facts.source == f"metrics+log:{log}"


def test_sagemaker_target_through_the_event_stream_route(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    target = f"sagemaker://gemma-mock?region=us-east-1&endpoint_url={mock_server.url}"
    report = measure_targets([target], tmp_path, settings=_small(), deps=MeasureDeps(use_uvloop=False))
    assert report.status == RunStatus.SUCCESS, report.targets[0].failures_by_reason
    result = load_result(report.targets[0].path)
    assert result.target.kind == "sagemaker" and result.target.label == "gemma-mock"
    assert result.client.transport is not None and result.client.transport.endswith("+sigv4")
    assert result.decode is not None and result.decode.rate_tokens_per_s is not None


@pytest.mark.parametrize("every", [1, 3])
def test_empty_text_tokens_are_timed_like_any_other(tmp_path: Path, every: int) -> None:
    """Tokens that decode to "" (a random-weight model on a real vLLM) are stamped as tokens: each call
    has its TTFT and one gap per token after the first, so the decode rate and TTFT cannot move. How close
    the figures come to the server's own is shown by benchmarks/bench_client_performance.py --empty-text."""
    from gemmaserve.testing.runner import fetch_json, start_mock_process

    ttft_s = 0.05
    config = MockConfig(ttft_s=ttft_s, itl_s=0.004, empty_text_every=every, record=True)
    settings = _small(
        decode_calls=3, decode_long_tokens=128, concurrency_levels=[], load_repeats=0, extra={"warmup_calls": 0}
    )
    with start_mock_process(config) as server:
        report = measure_targets([server.url], tmp_path, settings=settings, deps=MeasureDeps(use_uvloop=False))
        records = fetch_json(server.url + "/mock/requests")
    result = load_result(report.targets[0].path)
    assert result.failures.failed == 0, result.failures.by_reason
    decode = [r for r in result.requests if r.kind == RequestKind.DECODE]
    assert sorted(r.requested_output_tokens for r in decode) == [16] * 3 + [128] * 3
    assert sorted(r["tokens"] for r in records) == [16] * 3 + [128] * 3  # the same calls, no warm-up among them
    for request in decode:
        assert request.ttft_s is not None and request.output_tokens == request.requested_output_tokens
        assert len(request.itl_s) == request.requested_output_tokens - 1
    assert result.decode is not None and result.decode.rate_tokens_per_s is not None
    # Each call's TTFT spans the server's (request sent before it arrived, first token read after it left),
    # so the client's median cannot fall below the server's, however loaded the machine.
    server_ttft = stats.median([r["token_times_s"][0] - r["received_s"] for r in records])
    client_ttft = stats.median([r.ttft_s for r in decode if r.ttft_s is not None])
    assert client_ttft >= server_ttft >= ttft_s  # sleeps only overshoot
    empty = [r.empty_text for r in decode]
    assert all(empty) if every == 1 else not any(empty)


class _LoopBlocking:
    """A transport whose parsing blocks the event loop 20 ms per chunk: a client that cannot keep up."""

    kind = "http"
    description = "blocking"

    def __init__(self, url: str) -> None:
        self.url = url

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        import asyncio
        import time

        for k in range(request.max_tokens):
            await asyncio.sleep(0.001)
            time.sleep(0.02)  # CPU-bound work on the loop: every timer in this process fires late
            yield Chunk(float(k), content="x", token=True)
        yield Chunk(float(request.max_tokens), finish_reason="length", completion_tokens=request.max_tokens)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("cpu_clock", "cause", "helps"),
    [
        # the process had the CPU all along: its own work kept the loop late
        (time.perf_counter, "CPU-bound", "--client-processes"),
        # it ran no CPU at all while the loop stood still: it waited for a core
        (lambda: 0.0, "the machine did not give it the CPU", "taskset"),
    ],
)
def test_a_lagging_client_stops_the_run_instead_of_reporting_inflated_latencies(
    tmp_path: Path, cpu_clock: Callable[[], float], cause: str, helps: str
) -> None:
    from gemmaserve.errors import ClientSaturated

    settings = _small(
        decode_calls=1,
        decode_short_tokens=4,
        decode_long_tokens=8,
        concurrency_levels=[2],
        load_repeats=1,
        max_client_lag_s=0.005,
    )
    with pytest.raises(
        ClientSaturated,
        match=r"client could not keep time: .* lagged [\d.]+ ms (over the run|while the first tokens arrived) "
        r"\(median; p90 [\d.]+ ms\)",
    ) as info:
        measure_targets(
            ["http://127.0.0.1:1"],
            tmp_path,
            settings=settings,
            deps=MeasureDeps(
                transport_factory=lambda spec: _LoopBlocking(spec.url), cpu_clock=cpu_clock, use_uvloop=False
            ),
        )
    assert info.value.fields["lag_p50_s"] > 0.005
    assert cause in info.value.message and helps in (info.value.hint or "")
    saved = load_result(tmp_path / "127.0.0.1-1.json")
    assert "decode" in saved.completeness.missing and not any(r.kind == RequestKind.DECODE for r in saved.requests)


def test_load_levels_can_be_sent_from_several_processes(timed_server: MockProcess, tmp_path: Path) -> None:
    settings = _small(decode_calls=0, concurrency_levels=[4], load_repeats=1, load_output_tokens=16, client_processes=2)
    report = measure_targets([timed_server.url], tmp_path, settings=settings)
    result = load_result(report.targets[0].path)
    level = [r for r in result.requests if r.kind == RequestKind.LOAD]
    assert len(level) == 4 and all(r.success and r.output_tokens == 16 for r in level)
    assert all(r.client_queue_s is not None for r in level)  # stamped by each worker's trace hooks
    assert result.client.client_processes == 2 and result.load[0].client_queue_s is not None
