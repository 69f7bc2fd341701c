"""``bench measure``: run the planned steps on every target, interleaved, and save as it goes.

Step i runs on targets A, B, … before step i+1 (drift falls on all of them). After
every step the target's result file is rewritten atomically from its records, so
an interrupted run leaves valid files that list what is missing. A failed request
is a result; only bad usage raises. Returns a :class:`MeasureReport`; never prints.

Progress goes to an injected sink as :class:`~gemmaserve.bench.run_progress.MeasureProgress`: after
every request and, while requests stream, about once a second (:mod:`.run_progress` counts). A
:class:`~gemmaserve.progress.CancelToken` stops the run between two polls, as Ctrl-C does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import re
import socket
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gemmaserve import __version__
from gemmaserve.bench import results
from gemmaserve.bench.client_overhead import OverheadMeter
from gemmaserve.bench.engine import BatchDeps, BatchResult, lag_over_budget, run_batch, run_in_loop
from gemmaserve.bench.engine_facts import (
    build_engine_facts,
    facts_from_log,
    facts_from_metrics,
)
from gemmaserve.bench.requests import (
    EXIT_CODES,
    LatencyRow,
    MeasureReport,
    MeasureRequest,
    RunStatus,
    TargetOptions,
    TargetSummary,
    hardware_info,
)
from gemmaserve.bench.run_progress import MeasureProgress, PhaseProgress, ProgressSink, ProgressTracker
from gemmaserve.bench.shards import LaggedRun, judged_share, machine_load, saturation_error
from gemmaserve.bench.transports import (
    Clock,
    TargetSpec,
    Transport,
    open_transport,
    parse_target,
)
from gemmaserve.bench.workloads import Step, plan_steps, planned_phases
from gemmaserve.errors import UsageError
from gemmaserve.measurements import stats
from gemmaserve.measurements.schema import (
    ClientSettings,
    Completeness,
    HostInfo,
    QualityAnswer,
    RequestKind,
    RequestRecord,
    ResultFile,
    RunInfo,
    TargetInfo,
    TargetKind,
    save_result,
)
from gemmaserve.progress import Cancelled, CancelToken, check

__all__ = [
    "MeasureProgress",
    "MeasureReport",
    "PhaseProgress",
    "RunStatus",
    "TargetOptions",
    "TargetSummary",
    "hardware_info",
    "measure_endpoints",
    "measure_targets",
]

# While a step runs, how often a progress event goes out even though no request finished.
HEARTBEAT_S = 1.0
# How often a running step looks at the cancellation token.
CANCEL_POLL_S = 0.2

TransportFactory = Callable[[TargetSpec], Transport]


@dataclass
class _TargetRun:
    index: int
    spec: TargetSpec
    options: TargetOptions
    label: str
    path: Path
    info: RunInfo
    settings: ClientSettings
    planned: list[str]
    transport: Transport | None = None
    model: str | None = None
    records: list[RequestRecord] = field(default_factory=list)
    answers: list[QualityAnswer] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    repeats_done: dict[str, int] = field(default_factory=dict)
    meter: OverheadMeter = field(default_factory=OverheadMeter)
    metrics_before: dict[str, Any] | None = None
    metrics_after: dict[str, Any] | None = None
    log_facts: dict[str, Any] | None = None
    interrupted: bool = False
    unreachable: str | None = None
    quality_total: int = 0

    def result(self) -> ResultFile:
        settings = self.settings
        load = [
            results.load_level(
                self.records, concurrency=level, settings=settings, repeats_finished=self.repeats_done[f"load:{level}"]
            )
            for level in settings.concurrency_levels
            if self.repeats_done.get(f"load:{level}")
        ]
        return ResultFile(
            target=TargetInfo(
                url=self.spec.url,
                kind=TargetKind(self.spec.kind),
                label=self.label,
                model=self.model,
                catalog_model=self.options.served[0],
                encoding=self.options.served[1],
            ),
            hardware=self.options.hardware,
            run=self.info,
            client=settings.model_copy(update={"transport": self.transport.description if self.transport else None}),
            requests=self.records,
            decode=results.decode_measurement(self.records, settings) if self.repeats_done.get("decode") else None,
            load=load,
            quality=results.quality_section(self.answers, settings, total=self.quality_total) if self.answers else None,
            engine_facts=build_engine_facts(
                self.metrics_before, self.metrics_after, self.log_facts, log_path=self.options.log_path
            ),
            client_overhead=self.meter.result() if self.meter.chunks else None,
            completeness=Completeness(
                planned=self.planned,
                finished=list(self.finished),
                missing=[p for p in self.planned if p not in self.finished],
                interrupted=self.interrupted,
            ),
            failures=results.failure_summary(self.records),
        )

    def save(self) -> ResultFile:
        result = self.result()
        save_result(result, self.path)
        return result


def default_label(spec: TargetSpec) -> str:
    if spec.kind == "sagemaker":
        return spec.endpoint_name or "sagemaker"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", (spec.base_url or spec.url).split("://", 1)[-1]).strip("-")


def _labels(specs: Sequence[TargetSpec], options: Sequence[TargetOptions]) -> list[str]:
    labels: list[str] = []
    for spec, option in zip(specs, options, strict=True):
        base = option.label or default_label(spec)
        if not re.fullmatch(r"[A-Za-z0-9._-]+", base):
            raise UsageError(f"Label {base!r} may only use letters, digits, '.', '_' and '-'.")
        label, n = base, 2
        while label in labels:  # A-B-A: the same target twice gets a second file
            label, n = f"{base}-{n}", n + 1
        labels.append(label)
    return labels


def _host() -> HostInfo:
    return HostInfo(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        cpu_count=os.cpu_count(),
    )


@dataclass(frozen=True)
class MeasureDeps:
    """What a measure run is wired to: the transport per target (tests inject one; called in the event loop),
    its clocks, where progress goes and what cancels it, the command line recorded in each file, and
    whether the loop is uvloop's.

    ``cancel`` is checked between steps and while one runs; once set, the run stops as on Ctrl-C (files
    saved, marked interrupted) and the report's status is ``interrupted``."""

    transport_factory: TransportFactory | None = None
    clock: Clock = time.perf_counter
    cpu_clock: Callable[[], float] = time.process_time
    progress: ProgressSink | None = None
    cancel: CancelToken | None = None
    command: Sequence[str] = ()
    use_uvloop: bool = True


def measure_endpoints(
    request: MeasureRequest,
    *,
    progress: ProgressSink | None = None,
    cancel: CancelToken | None = None,
    command: Sequence[str] = (),
    transport_factory: TransportFactory | None = None,
    use_uvloop: bool = True,
) -> MeasureReport:
    """``bench measure``: what :class:`MeasureRequest` asks for, into ``request.out``; see the module docstring.

    Raises:
        UsageError: a malformed target, or an instance or GPU the catalog does not know (nothing is sent).
    """
    deps = MeasureDeps(
        transport_factory=transport_factory, progress=progress, cancel=cancel, command=command, use_uvloop=use_uvloop
    )
    return measure_targets(request.targets, request.out, request.client_settings(), request.target_options(), deps)


def measure_targets(
    targets: Sequence[str],
    out_dir: str | Path,
    settings: ClientSettings | None = None,
    target_options: Sequence[TargetOptions] | None = None,
    deps: MeasureDeps = MeasureDeps(),
) -> MeasureReport:
    """Measure every target into ``out_dir/<label>.json``; see the module docstring.

    Args:
        targets: ``http(s)://host:port`` or ``sagemaker://NAME?region=R``, in interleaving order;
            the same target may appear twice (A-B-A).
        deps: the transports, clocks, progress and cancel (:class:`MeasureDeps`).

    Raises:
        UsageError: a malformed target, label or setting (nothing is sent).
    """
    if not targets:
        raise UsageError("No target given.", hint="gemmaserve bench measure http://127.0.0.1:8000 --out results/")
    settings = settings or ClientSettings()
    if any(level < 1 for level in settings.concurrency_levels):
        raise UsageError("Concurrency levels must be >= 1.")
    if settings.decode_long_tokens <= settings.decode_short_tokens:
        raise UsageError("The long decode length must exceed the short one.")
    specs = [parse_target(url) for url in targets]
    options = list(target_options or [TargetOptions() for _ in specs])
    if len(options) != len(specs):
        raise UsageError(f"{len(options)} target option sets for {len(specs)} targets.")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    started_at = datetime.now(UTC)
    planned = planned_phases(settings)
    runs = [
        _TargetRun(
            index=index,
            spec=spec,
            options=option,
            label=label,
            path=out / f"{label}.json",
            info=RunInfo(
                gemmaserve_version=__version__,
                started_at=started_at,
                host=_host(),
                command=list(deps.command),
                run_id=run_id,
                target_order=index,
            ),
            settings=settings,
            planned=planned,
        )
        for index, (spec, option, label) in enumerate(zip(specs, options, _labels(specs, options), strict=True))
    ]
    for run in runs:
        if run.options.log_path:
            try:
                run.log_facts = facts_from_log(run.options.log_path)
            except OSError as exc:
                raise UsageError(f"Cannot read engine log {run.options.log_path}: {exc}") from None
        run.save()
    factory = deps.transport_factory or (
        lambda spec: open_transport(spec, timeout_s=settings.timeout_s, clock=deps.clock)
    )
    # Sharded load levels open their own sessions in worker processes: only with the real transports.
    shard = settings.client_processes > 1 and deps.transport_factory is None
    coroutine = _measure(runs, settings, factory, deps, shard)
    description = "aiohttp"
    interrupted = False
    try:
        description = run_in_loop(coroutine, use_uvloop=deps.use_uvloop)
    except (KeyboardInterrupt, Cancelled):
        interrupted = True
        for run in runs:
            if not run.interrupted:
                run.interrupted = True
                run.save()
    return _report(runs, run_id, out, description, interrupted)


async def _measure(
    runs: list[_TargetRun], settings: ClientSettings, factory: TransportFactory, deps: MeasureDeps, shard: bool
) -> str:
    run_started_s = deps.clock()
    plans = [plan_steps(settings, target_index=run.index) for run in runs]
    tracker = ProgressTracker(plans, deps.progress, deps.cancel)
    description = "aiohttp"
    try:
        for run in runs:
            run.transport = factory(run.spec)
            description = run.transport.description
            await _open_target(run)
        for step_index in range(len(plans[0])):
            for run, plan in zip(runs, plans, strict=True):
                step = plan[step_index]
                if run.unreachable:
                    tracker.finish(step)
                    continue
                tracker.start(run.label, step)
                assert run.transport is not None
                batch = await _with_heartbeat(_run_step(run, step, settings, deps, tracker, shard), tracker)
                tracker.finish(step)
                _account(run, step, batch, run_started_s)
                run.save()
        for run in runs:
            await _close_target(run)
            run.info = run.info.model_copy(update={"finished_at": datetime.now(UTC)})
            run.save()
    except BaseException:
        for run in runs:
            run.interrupted = True
            run.save()
            if run.transport is not None:
                await run.transport.aclose()
        raise
    return description


async def _with_heartbeat(step: Coroutine[Any, Any, BatchResult], tracker: ProgressTracker) -> BatchResult:
    """Await ``step``, sending a progress event every :data:`HEARTBEAT_S` while it runs.

    Both the heartbeat and the cancellation check run here, in the measuring coroutine, so a
    cancellation (or a sink that raises, as Ctrl-C does) interrupts the run between two polls and
    the step is cancelled; the caller's handler then saves every file marked interrupted.
    """
    task = asyncio.ensure_future(step)
    last = time.monotonic()
    try:
        while True:
            finished, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_S)
            if finished:
                return task.result()
            check(tracker.cancel)
            if time.monotonic() - last >= HEARTBEAT_S:
                last = time.monotonic()
                tracker.emit()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _run_step(
    run: _TargetRun, step: Step, settings: ClientSettings, deps: MeasureDeps, tracker: ProgressTracker, shard: bool
) -> BatchResult:
    """One step's batch, sharded over processes for a load level when asked; stop if the client lagged."""
    on_done = tracker.done
    requests = [(p.request_id, p.request) for p in step.requests]
    processes = min(settings.client_processes, step.concurrency)
    budget = settings.max_client_lag_s
    if shard and step.kind == RequestKind.LOAD and run.spec.kind == "http" and processes > 1:
        from gemmaserve.bench.shards import ShardedRun, run_sharded_batch

        assert run.spec.base_url is not None
        how = ShardedRun(
            processes=processes,
            concurrency=step.concurrency,
            timeout_s=settings.timeout_s,
            max_lag_s=settings.max_client_lag_s or float("inf"),
            raise_on_saturation=False,
        )
        sharded = await asyncio.to_thread(run_sharded_batch, run.spec.base_url, requests, how)
        for outcome in sharded.batch.outcomes:
            on_done(outcome)
        batch = sharded.batch
        judged = [(shard.lag_verdict(budget), shard) for shard in sharded.shards] if budget is not None else []
        verdicts = [(verdict, shard.share_for(verdict)) for verdict, shard in judged if verdict is not None]
        where = f"{run.label} {step.label}, {len(sharded.shards)} worker processes"
    else:
        assert run.transport is not None
        batch = await run_batch(
            run.transport,
            requests,
            concurrency=step.concurrency,
            timeout_s=settings.timeout_s,
            deps=BatchDeps(deps.clock, deps.cpu_clock, on_done, tracker.tally),
        )
        first_tokens = (batch.first_token_lag_p50_s, batch.first_token_lag_p90_s)
        verdict = (
            lag_over_budget((batch.lag_p50_s, batch.lag_p90_s), first_tokens, budget) if budget is not None else None
        )
        verdicts = (
            [(verdict, judged_share(verdict, batch.cpu_share, batch.first_token_cpu_share))]
            if verdict is not None
            else []
        )
        processes = 1
        where = f"{run.label} {step.label}, one process"
    if verdicts and budget is not None and step.kind in (RequestKind.DECODE, RequestKind.LOAD):
        worst, share = max(verdicts, key=lambda item: item[0].p50_s)
        raise saturation_error(where, worst, LaggedRun(budget, share, step.concurrency, processes), machine_load())
    return batch


async def _open_target(run: _TargetRun) -> None:
    transport = run.transport
    discover = getattr(transport, "discover_model", None)
    if discover is not None:
        run.model = await discover()
    get_text = getattr(transport, "get_text", None)
    if get_text is not None:
        page = await get_text("/metrics")
        run.metrics_before = facts_from_metrics(page) if page else None


async def _close_target(run: _TargetRun) -> None:
    if run.transport is None:
        return
    get_text = getattr(run.transport, "get_text", None)
    if get_text is not None and not run.unreachable:
        page = await get_text("/metrics")
        run.metrics_after = facts_from_metrics(page) if page else None
    await run.transport.aclose()


def _account(run: _TargetRun, step: Step, batch: BatchResult, run_started_s: float) -> None:
    for planned, outcome in zip(step.requests, batch.outcomes, strict=True):
        run.records.append(
            results.to_record(
                outcome,
                kind=step.kind,
                concurrency=step.concurrency,
                repeat=step.repeat,
                run_started_s=run_started_s,
                question_id=planned.question.id if planned.question else None,
            )
        )
        if planned.question is not None:
            run.answers.append(results.quality_answer(planned.question, outcome))
    if step.kind == RequestKind.QUALITY:
        run.quality_total += len(step.requests)
    if step.kind != RequestKind.WARMUP:
        chunks = sum(outcome.chunks for outcome in batch.outcomes)
        run.meter.add(
            step.label,
            cpu_s=batch.cpu_s,
            wall_s=batch.finished_s - batch.started_s,
            chunks=chunks,
            judged=step.kind in (RequestKind.DECODE, RequestKind.LOAD),
        )
        run.repeats_done[step.phase] = run.repeats_done.get(step.phase, 0) + 1
        if step.last_of_phase:
            run.finished.append(step.phase)
    elif all(outcome.reason == "connect_error" for outcome in batch.outcomes):
        # Nothing listens there: skip its remaining steps instead of failing each one slowly.
        run.unreachable = batch.outcomes[0].detail or "connection refused"


def _summary(run: _TargetRun, result: ResultFile) -> TargetSummary:
    measured = [r for r in run.records if r.kind != RequestKind.WARMUP]
    failures = result.failures
    missing = result.completeness.missing
    if run.interrupted:
        status = RunStatus.INTERRUPTED
    elif not any(r.success for r in measured):
        status = RunStatus.FAILED
    elif failures.failed or missing:
        status = RunStatus.PARTIAL
    else:
        status = RunStatus.SUCCESS
    note = f"target unreachable, its steps were skipped: {run.unreachable}" if run.unreachable else None
    return TargetSummary(
        url=run.spec.url,
        label=run.label,
        path=str(run.path),
        status=status,
        requests=failures.requests,
        failed=failures.failed,
        short_replies=failures.short_replies,
        failures_by_reason=failures.by_reason,
        finished=result.completeness.finished,
        missing=missing,
        decode_tokens_per_s=result.decode.rate_tokens_per_s if result.decode else None,
        intercept_s=result.decode.intercept_s if result.decode else None,
        intercept_flag=result.decode.intercept_flag if result.decode else None,
        decode_warnings=list(result.decode.warnings) if result.decode else [],
        load_output_tokens_per_s={f"c{level.concurrency}": level.median_output_tokens_per_s for level in result.load},
        latency=latency_rows(result),
        quality_correct=result.quality.correct if result.quality else None,
        quality_total=result.quality.total if result.quality else None,
        quality_answered=results.answered(result.quality) if result.quality else None,
        client_warning=result.client_overhead.warning if result.client_overhead else None,
        note=note,
    )


def latency_rows(result: ResultFile) -> list[LatencyRow]:
    """TTFT, ITL and TPOT percentiles of the decode calls (one stream) and of each load level."""
    rows = []
    decode = [r for r in result.requests if r.kind == RequestKind.DECODE and r.success]
    if decode:
        rows.append(
            LatencyRow(
                phase="decode",
                concurrency=1,
                ttft_s=stats.summarize([r.ttft_s for r in decode if r.ttft_s is not None]),
                itl_s=stats.summarize_stream_gaps([gap for r in decode for gap in r.itl_s]),
                tpot_s=stats.summarize_stream_gaps([r.tpot_s for r in decode if r.tpot_s is not None]),
            )
        )
    for level in result.load:
        if level.ttft_s is not None and level.itl_s is not None and level.tpot_s is not None:
            rows.append(
                LatencyRow(
                    phase=f"load:{level.concurrency}",
                    concurrency=level.concurrency,
                    ttft_s=level.ttft_s,
                    itl_s=level.itl_s,
                    tpot_s=level.tpot_s,
                )
            )
    return rows


def _report(runs: list[_TargetRun], run_id: str, out: Path, description: str, interrupted: bool) -> MeasureReport:
    summaries = [_summary(run, run.result()) for run in runs]
    statuses = {summary.status for summary in summaries}
    if interrupted or RunStatus.INTERRUPTED in statuses:
        status = RunStatus.INTERRUPTED
    elif statuses == {RunStatus.SUCCESS}:
        status = RunStatus.SUCCESS
    elif statuses == {RunStatus.FAILED}:
        status = RunStatus.FAILED
    else:
        status = RunStatus.PARTIAL
    failed = sum(s.failed for s in summaries)
    requests = sum(s.requests for s in summaries)
    messages = {
        RunStatus.SUCCESS: f"All {requests} requests on {len(runs)} target(s) succeeded; every phase finished.",
        RunStatus.PARTIAL: f"{failed} of {requests} requests failed or phases are missing; results are partial.",
        RunStatus.FAILED: f"No measured request succeeded ({failed} of {requests} failed).",
        RunStatus.INTERRUPTED: "Interrupted: finished steps are saved; each file lists what is missing.",
    }
    return MeasureReport(
        run_id=run_id,
        out_dir=str(out),
        status=status,
        exit_code=EXIT_CODES[status],
        transport=description,
        targets=summaries,
        message=messages[status],
    )
