"""Turn engine outcomes into the result file's sections (pure: no I/O, no clock).

Each finished step appends its :class:`RequestRecord`s; sections (decode, load
levels, quality, failure counts, completeness) are recomputed from those records,
so the file on disk is always consistent with the requests it lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from gemmaserve.bench import plausibility
from gemmaserve.bench.engine import Outcome
from gemmaserve.measurements import stats
from gemmaserve.measurements.questions import Question, score_answer
from gemmaserve.measurements.schema import (
    ClientSettings,
    DecodeMeasurement,
    FailureSummary,
    LoadLevel,
    PlausibilityFlag,
    QualityAnswer,
    QualitySection,
    RequestKind,
    RequestRecord,
)


def to_record(
    outcome: Outcome,
    *,
    kind: RequestKind,
    concurrency: int,
    repeat: int,
    run_started_s: float,
    question_id: str | None = None,
) -> RequestRecord:
    metrics = outcome.metrics
    error = None if outcome.success else f"{outcome.reason}: {outcome.detail}" if outcome.detail else outcome.reason
    return RequestRecord(
        request_id=outcome.request_id,
        kind=kind,
        concurrency=concurrency,
        repeat=repeat,
        prompt_tokens=metrics.prompt_tokens if metrics else None,
        requested_output_tokens=outcome.request.max_tokens,
        output_tokens=metrics.output_tokens if metrics else None,
        success=outcome.success,
        error=error,
        empty_text=bool(outcome.success and metrics and metrics.output_tokens > 0 and not metrics.text),
        ttft_s=metrics.ttft_s if metrics else None,
        itl_s=list(metrics.itl_s) if metrics else [],
        e2el_s=metrics.e2el_s if metrics else None,
        tpot_s=metrics.tpot_s if metrics else None,
        start_offset_s=outcome.sent_s - run_started_s,
        client_queue_s=outcome.client_queue_s,
        question_id=question_id,
    )


def reason_of(record: RequestRecord) -> str:
    return (record.error or "unknown").split(":", 1)[0]


def failure_summary(records: Sequence[RequestRecord]) -> FailureSummary:
    failed = [r for r in records if not r.success]
    reasons = Counter(reason_of(r) for r in failed)
    return FailureSummary(
        requests=len(records),
        failed=len(failed),
        short_replies=reasons.get("short_reply", 0),
        empty_text_replies=sum(1 for r in records if r.success and r.empty_text),
        by_reason=dict(sorted(reasons.items())),
    )


def decode_measurement(records: Sequence[RequestRecord], settings: ClientSettings) -> DecodeMeasurement:
    """The differencing rate over successful decode calls; rate stays None when it cannot be computed.

    Its plausibility findings (:mod:`.plausibility`) are kept with it and said in its warnings; a fixed cost
    above the calls' own TTFT marks the intercept ``above_ttft``, as a negative one is marked ``negative``."""
    short_tokens, long_tokens = settings.decode_short_tokens, settings.decode_long_tokens

    def walls(tokens: int) -> list[float]:
        return [
            r.e2el_s
            for r in records
            if r.kind == RequestKind.DECODE
            and r.success
            and r.requested_output_tokens == tokens
            and r.e2el_s is not None
        ]

    short, long = walls(short_tokens), walls(long_tokens)
    measurement = DecodeMeasurement(
        short_tokens=short_tokens, long_tokens=long_tokens, short_e2el_s=short, long_e2el_s=long
    )
    if not short or not long:
        return measurement
    try:
        line = stats.decode_rate(short, long, short_tokens=short_tokens, long_tokens=long_tokens)
    except ValueError:
        return measurement.model_copy(
            update={"short_median_s": stats.median(short), "long_median_s": stats.median(long)}
        )
    interval = stats.decode_rate_ci(short, long, short_tokens=short_tokens, long_tokens=long_tokens)
    tpots = [
        r.tpot_s
        for r in records
        if r.kind == RequestKind.DECODE and r.success and r.requested_output_tokens == long_tokens and r.tpot_s
    ]
    stream_rate = 1.0 / stats.median(tpots) if tpots else None
    negative, warnings = judge_intercept(line.intercept_s, line.rate_tokens_per_s, stream_rate)
    flag: Literal["negative", "above_ttft"] | None = negative
    findings = plausibility.decode_findings(records, short_tokens=short_tokens, long_tokens=long_tokens)
    if flag is None and any(f.flag == PlausibilityFlag.FIXED_COST_ABOVE_TTFT for f in findings):
        flag = "above_ttft"
    warnings += [plausibility.finding_line(finding) for finding in findings]
    return measurement.model_copy(
        update={
            "short_median_s": line.short_median_s,
            "long_median_s": line.long_median_s,
            "rate_tokens_per_s": line.rate_tokens_per_s,
            "intercept_s": line.intercept_s,
            "intercept_flag": flag,
            "rate_ci_low": interval.low,
            "rate_ci_high": interval.high,
            "stream_rate_tokens_per_s": stream_rate,
            "findings": findings,
            "warnings": warnings,
        }
    )


def judge_intercept(
    intercept_s: float, rate_tokens_per_s: float, stream_rate_tokens_per_s: float | None
) -> tuple[Literal["negative"] | None, list[str]]:
    """The intercept's flag (:func:`stats.intercept_flag`) and the warning that says what it means."""
    flag = stats.intercept_flag(intercept_s)
    if flag is None:
        return None, []
    message = (
        f"decode intercept is negative ({intercept_s * 1000:.1f} ms): it is not a fixed cost, "
        + f"and the differencing rate {rate_tokens_per_s:.1f} tok/s is suspect"
    )
    if stream_rate_tokens_per_s is not None:
        message += f" (the streams' own 1/TPOT is {stream_rate_tokens_per_s:.1f} tok/s)"
    return flag, [message]


def load_level(
    records: Sequence[RequestRecord], *, concurrency: int, settings: ClientSettings, repeats_finished: int
) -> LoadLevel:
    """Aggregate output tok/s per repeat (first send → last token) and latency percentiles."""
    level = [r for r in records if r.kind == RequestKind.LOAD and r.concurrency == concurrency]
    per_repeat: list[float] = []
    walls: list[float] = []
    for repeat in sorted({r.repeat for r in level}):
        batch = [r for r in level if r.repeat == repeat]
        ok = [r for r in batch if r.success and r.e2el_s is not None]
        if not ok:
            continue
        first_sent = min(r.start_offset_s for r in batch)
        last_token = max(r.start_offset_s + (r.e2el_s or 0.0) for r in ok)
        wall = last_token - first_sent
        if wall > 0:
            walls.append(wall)
            per_repeat.append(sum(r.output_tokens or 0 for r in ok) / wall)
    ok_all = [r for r in level if r.success]
    median = stats.median(per_repeat) if per_repeat else None
    interval = stats.bootstrap_ci(per_repeat) if len(per_repeat) > 1 else None
    return LoadLevel(
        concurrency=concurrency,
        repeats=repeats_finished,
        requests_per_repeat=concurrency * int(settings.extra.get("load_requests_per_stream", 1)),
        input_tokens=settings.load_input_tokens,
        output_tokens=settings.load_output_tokens,
        output_tokens_per_s=per_repeat,
        wall_s=walls,
        median_output_tokens_per_s=median,
        ci_low=interval.low if interval else None,
        ci_high=interval.high if interval else None,
        ttft_s=stats.summarize([r.ttft_s for r in ok_all if r.ttft_s is not None]),
        tpot_s=stats.summarize_stream_gaps([r.tpot_s for r in ok_all if r.tpot_s is not None]),
        itl_s=stats.summarize_stream_gaps([gap for r in ok_all for gap in r.itl_s]),
        e2el_s=stats.summarize([r.e2el_s for r in ok_all if r.e2el_s is not None]),
        client_queue_s=stats.summarize([r.client_queue_s for r in level if r.client_queue_s is not None]),
        failed_requests=sum(1 for r in level if not r.success),
    )


def quality_answer(question: Question, outcome: Outcome) -> QualityAnswer:
    text = outcome.metrics.text if outcome.metrics and outcome.success else None
    scored = score_answer(question, text)
    error = None if outcome.success else f"{outcome.reason}: {outcome.detail}" if outcome.detail else outcome.reason
    return QualityAnswer(
        question_id=question.id,
        kind=question.kind,
        prompt=question.prompt,
        expected=question.expected,
        answer_text=text,
        extracted=scored.extracted,
        correct=scored.correct,
        error=error,
    )


def answered(section: QualitySection) -> int:
    """Questions that got an answer. The one rule for quality: correct of answered; a failed request (or a
    question never sent) is not a wrong answer, it is left out and counted apart, as the comparison does."""
    return sum(1 for answer in section.answers if answer.error is None)


def quality_section(answers: Sequence[QualityAnswer], settings: ClientSettings, *, total: int) -> QualitySection:
    assert settings.quality_set is not None
    from gemmaserve.measurements.questions import get_question_set

    question_set = get_question_set(settings.quality_set)
    return QualitySection(
        set_name=question_set.name,
        set_version=question_set.version,
        max_tokens=settings.quality_max_tokens,
        temperature=settings.temperature if settings.temperature is not None else 0.0,
        answers=list(answers),
        correct=sum(1 for a in answers if a.correct),
        total=total,
    )
