"""Side-by-side comparison of result files: every ratio B/A with its interval, paired quality, drift, cost.

Reads only saved result files (never re-measures). The first file's target is the
baseline A; every other distinct target is compared with it. A target that appears
twice (A-B-A) is compared with itself as drift. Statistics come from :mod:`.stats`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from pydantic import BaseModel

from gemmaserve.bench import plausibility
from gemmaserve.bench.cost_table import cost_table, level_throughput
from gemmaserve.bench.results import answered as answered_questions
from gemmaserve.cost import BreakEven, CostTable, break_even
from gemmaserve.errors import UsageError
from gemmaserve.measurements import stats
from gemmaserve.measurements.schema import (
    LoadLevel,
    PlausibilityFinding,
    PlausibilityFlag,
    QualitySection,
    ResultFile,
    load_result,
)
from gemmaserve.result_model import ActionResult

ALPHA = 0.05
DRIFT_NOTABLE_PERCENT = 2.0  # a drift the interval resolves but smaller than this is called small
POWER = 0.8


class RatioRow(BaseModel):
    metric: str
    unit: str
    a: float | None
    b: float | None
    ratio: float | None  # b / a
    ci_low: float | None = None
    ci_high: float | None = None


class Disagreement(BaseModel):
    question_id: str
    prompt: str
    expected: str
    a_extracted: str | None
    b_extracted: str | None
    a_correct: bool
    b_correct: bool


class QualityComparison(BaseModel):
    set_name: str
    paired: int  # questions both sides answered (failed requests are left out)
    excluded: int  # questions left out because a request failed on either side
    a_correct: int
    b_correct: int
    identical_answers: int
    mcnemar: stats.McNemarResult
    minimum_detectable_gap_points: float | None
    disagreements: list[Disagreement]
    sentence: str


class TargetSummary(BaseModel):
    label: str
    path: str
    url: str
    gpu: str | None
    instance: str | None
    price_usd_per_hour: float | None
    decode_tokens_per_s: float | None
    decode_ci: stats.Interval | None
    intercept_s: float | None
    intercept_flag: str | None  # "negative" or "above_ttft": the intercept is not a fixed cost
    findings: list[PlausibilityFinding] = []  # decode figures the timing of a call says are implausible
    load_tokens_per_s: dict[int, float]
    quality_correct: int | None
    quality_total: int | None
    quality_answered: int | None = None  # the denominator of quality: failed requests are left out
    quality_ci: stats.Interval | None
    missing: list[str]
    failed_requests: int


class PairComparison(BaseModel):
    a: str
    b: str
    ratios: list[RatioRow]
    quality: QualityComparison | None
    break_even: dict[str, BreakEven]  # keyed 'decode' or 'load:<concurrency>'
    sentences: list[str]


class DriftRow(BaseModel):
    label: str
    metric: str
    first: float | None
    second: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    significant: bool
    sentence: str


class Comparison(ActionResult):
    """What ``bench combine`` returns: ratios B/A per pair, drift, cost and warnings (never a failure)."""

    files: list[str]
    baseline: str
    targets: list[TargetSummary]
    pairs: list[PairComparison]
    drift: list[DriftRow]
    costs: list[CostTable]
    warnings: list[str]


def _identity(result: ResultFile) -> tuple[str, str | None, str]:
    return (result.target.url, result.target.model, result.target.label)


def _decode(result: ResultFile) -> tuple[stats.DecodeRate | None, stats.Interval | None]:
    decode = result.decode
    if decode is None or not decode.short_e2el_s or not decode.long_e2el_s:
        return None, None
    try:
        rate = stats.decode_rate(
            decode.short_e2el_s, decode.long_e2el_s, short_tokens=decode.short_tokens, long_tokens=decode.long_tokens
        )
    except ValueError:
        return None, None
    interval = stats.decode_rate_ci(
        decode.short_e2el_s, decode.long_e2el_s, short_tokens=decode.short_tokens, long_tokens=decode.long_tokens
    )
    return rate, interval


def decode_findings(result: ResultFile) -> list[PlausibilityFinding]:
    """The decode plausibility findings, judged again from the file's own calls (so a file written before
    the check existed is judged too, by the same rule)."""
    if result.decode is None:
        return []
    return plausibility.decode_findings(
        result.requests, short_tokens=result.decode.short_tokens, long_tokens=result.decode.long_tokens
    )


def _intercept_flag(rate: stats.DecodeRate | None, findings: Sequence[PlausibilityFinding]) -> str | None:
    if rate is None:
        return None
    if stats.intercept_flag(rate.intercept_s):
        return "negative"
    if any(finding.flag == PlausibilityFlag.FIXED_COST_ABOVE_TTFT for finding in findings):
        return "above_ttft"
    return None


def _levels(result: ResultFile) -> dict[int, LoadLevel]:
    return {level.concurrency: level for level in result.load if level.output_tokens_per_s}


def summarize_target(result: ResultFile, path: str) -> TargetSummary:
    """The headline figures of one result file (decode rate and CI, throughput per level, accuracy)."""
    rate, interval = _decode(result)
    findings = decode_findings(result)
    quality = result.quality
    quality_ci = None
    answered = answered_questions(quality) if quality is not None else None
    if quality is not None and answered:
        quality_ci = stats.wilson_interval(quality.correct, answered)
    load: dict[int, float] = {}
    for concurrency, level in _levels(result).items():
        throughput = level_throughput(level.output_tokens_per_s)
        if throughput is not None:
            load[concurrency] = throughput
    return TargetSummary(
        label=result.target.label,
        path=path,
        url=result.target.url,
        gpu=result.hardware.gpu,
        instance=result.hardware.instance,
        price_usd_per_hour=result.hardware.price_usd_per_hour,
        decode_tokens_per_s=rate.rate_tokens_per_s if rate else None,
        decode_ci=interval,
        intercept_s=rate.intercept_s if rate else None,
        intercept_flag=_intercept_flag(rate, findings),
        findings=findings,
        load_tokens_per_s=load,
        quality_correct=quality.correct if quality else None,
        quality_total=quality.total if quality else None,
        quality_answered=answered,
        quality_ci=quality_ci,
        missing=list(result.completeness.missing),
        failed_requests=result.failures.failed,
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def _fact_rows(a: ResultFile, b: ResultFile) -> list[RatioRow]:
    rows = []
    fa, fb = a.engine_facts, b.engine_facts
    for metric, unit, attr in (("weights", "GiB", "weights_gib"), ("KV cache", "tokens", "kv_cache_tokens")):
        va = getattr(fa, attr) if fa else None
        vb = getattr(fb, attr) if fb else None
        if va is not None or vb is not None:
            rows.append(RatioRow(metric=metric, unit=unit, a=va, b=vb, ratio=_ratio(va, vb)))
    return rows


def _rate_rows(a: ResultFile, b: ResultFile) -> list[RatioRow]:
    rows = []
    rate_a, _ = _decode(a)
    rate_b, _ = _decode(b)
    if rate_a or rate_b:
        row = RatioRow(
            metric="decode rate",
            unit="tok/s",
            a=rate_a.rate_tokens_per_s if rate_a else None,
            b=rate_b.rate_tokens_per_s if rate_b else None,
            ratio=_ratio(rate_a.rate_tokens_per_s if rate_a else None, rate_b.rate_tokens_per_s if rate_b else None),
        )
        if (
            rate_a
            and rate_b
            and a.decode
            and b.decode
            and a.decode.short_tokens == b.decode.short_tokens
            and a.decode.long_tokens == b.decode.long_tokens
        ):
            interval = stats.decode_rate_ratio_ci(
                (a.decode.short_e2el_s, a.decode.long_e2el_s),
                (b.decode.short_e2el_s, b.decode.long_e2el_s),
                short_tokens=a.decode.short_tokens,
                long_tokens=a.decode.long_tokens,
            )
            row.ci_low, row.ci_high = interval.low, interval.high
        rows.append(row)
        if (
            rate_a
            and rate_b
            and not _intercept_flag(rate_a, decode_findings(a))
            and not _intercept_flag(rate_b, decode_findings(b))
        ):  # a negative intercept, or one above the calls' TTFT, is no fixed cost
            rows.append(
                RatioRow(
                    metric="per-call fixed cost",
                    unit="s",
                    a=rate_a.intercept_s,
                    b=rate_b.intercept_s,
                    ratio=_ratio(rate_a.intercept_s, rate_b.intercept_s),
                )
            )
    levels_a, levels_b = _levels(a), _levels(b)
    for concurrency in sorted(set(levels_a) | set(levels_b)):
        la, lb = levels_a.get(concurrency), levels_b.get(concurrency)
        ta = level_throughput(la.output_tokens_per_s) if la else None
        tb = level_throughput(lb.output_tokens_per_s) if lb else None
        row = RatioRow(metric=f"throughput c={concurrency}", unit="tok/s", a=ta, b=tb, ratio=_ratio(ta, tb))
        if la and lb and ta and tb and min(len(la.output_tokens_per_s), len(lb.output_tokens_per_s)) >= 2:
            interval = stats.bootstrap_ratio_ci(la.output_tokens_per_s, lb.output_tokens_per_s)
            row.ci_low, row.ci_high = interval.low, interval.high
        rows.append(row)
        for name, attr in (("TTFT p50", "ttft_s"), ("TPOT p50", "tpot_s")):
            pa = getattr(la, attr) if la else None
            pb = getattr(lb, attr) if lb else None
            va, vb = (pa.p50 if pa else None), (pb.p50 if pb else None)
            if va is not None or vb is not None:
                rows.append(RatioRow(metric=f"{name} c={concurrency}", unit="s", a=va, b=vb, ratio=_ratio(va, vb)))
    return rows


def compare_quality(a: QualitySection, b: QualitySection, a_label: str, b_label: str) -> QualityComparison:
    """Pair the two sets' answers by question id; McNemar exact on the pairs both sides answered."""
    b_by_id = {answer.question_id: answer for answer in b.answers}
    pairs = []
    excluded = 0
    for answer in a.answers:
        other = b_by_id.get(answer.question_id)
        if other is None:
            continue
        if answer.answer_text is None or other.answer_text is None:
            excluded += 1
            continue
        pairs.append((answer, other))
    test = stats.mcnemar_exact([x.correct for x, _ in pairs], [y.correct for _, y in pairs])
    identical = sum(
        1 for x, y in pairs if (x.extracted or "").strip().casefold() == (y.extracted or "").strip().casefold()
    )
    disagreements = [
        Disagreement(
            question_id=x.question_id,
            prompt=x.prompt,
            expected=x.expected,
            a_extracted=x.extracted,
            b_extracted=y.extracted,
            a_correct=x.correct,
            b_correct=y.correct,
        )
        for x, y in pairs
        if (x.extracted or "").strip().casefold() != (y.extracted or "").strip().casefold() or x.correct != y.correct
    ]
    n = len(pairs)
    share = (test.a_only + test.b_only) / n if n else 0.0
    gap = stats.minimum_detectable_difference(n, discordant_share=share, alpha=ALPHA, power=POWER) if n else None
    a_right, b_right = test.both + test.a_only, test.both + test.b_only
    head = f"{b_label} answers {b_right}/{n} vs {a_label} {a_right}/{n}"
    if test.p_value >= ALPHA:
        verdict = f"no measurable difference (McNemar exact p = {test.p_value:.2f})"
    else:
        better = b_label if b_right > a_right else a_label
        verdict = f"{better} is better (McNemar exact p = {test.p_value:.3g})"
    power_clause = (
        # Rounded up: a "≥" claim must not promise a smaller gap than computed.
        f"this set can detect a gap of ≥ {math.ceil(gap * 1000 - 1e-9) / 10:.1f} points ({POWER:.0%} power, α = {ALPHA})"
        if gap is not None
        else "this set is too small to detect any gap"
    )
    sentence = f"{head}: {verdict}; {power_clause}."
    if excluded:
        sentence += f" {excluded} question(s) left out: a request failed."
    return QualityComparison(
        set_name=a.set_name,
        paired=n,
        excluded=excluded,
        a_correct=a_right,
        b_correct=b_right,
        identical_answers=identical,
        mcnemar=test,
        minimum_detectable_gap_points=gap * 100 if gap is not None else None,
        disagreements=disagreements,
        sentence=sentence,
    )


def _break_evens(a: ResultFile, b: ResultFile, rows: list[RatioRow]) -> dict[str, BreakEven]:
    pa, pb = a.hardware.price_usd_per_hour, b.hardware.price_usd_per_hour
    if not pa or not pb:
        return {}
    verdicts = {}
    for row in rows:
        if row.unit != "tok/s" or not row.a or not row.b:
            continue
        key = "decode" if row.metric == "decode rate" else "load:" + row.metric.split("=")[1]
        verdicts[key] = break_even(a.target.label, pa, row.a, b.target.label, pb, row.b)
    return verdicts


def _pair(a: ResultFile, b: ResultFile, warnings: list[str]) -> PairComparison:
    rows = _fact_rows(a, b) + _rate_rows(a, b)
    quality = None
    if a.quality and b.quality:
        if a.quality.set_name != b.quality.set_name:
            warnings.append(
                f"{a.target.label} and {b.target.label} answered different question sets "
                f"({a.quality.set_name} vs {b.quality.set_name}): no paired quality test."
            )
        else:
            quality = compare_quality(a.quality, b.quality, a.target.label, b.target.label)
            ra, rb = (
                quality.a_correct / quality.paired if quality.paired else None,
                (quality.b_correct / quality.paired if quality.paired else None),
            )
            rows.append(RatioRow(metric="quality (share correct)", unit="", a=ra, b=rb, ratio=_ratio(ra, rb)))
    sentences = []
    decode = next((row for row in rows if row.metric == "decode rate"), None)
    if decode and decode.ratio is not None:
        ci = (
            f" (95% CI {decode.ci_low:.3f}–{decode.ci_high:.3f})"
            if decode.ci_low is not None and decode.ci_high is not None
            else ""
        )
        sentences.append(f"{b.target.label} decodes at {decode.ratio:.2f}x the rate of {a.target.label}{ci}.")
    if quality:
        sentences.append(quality.sentence)
    verdicts = _break_evens(a, b, rows)
    if verdicts:
        top = max(verdicts, key=lambda key: int(key.split(":")[1]) if ":" in key else 0)
        sentences.append(f"At {top}: {verdicts[top].sentence}")
    return PairComparison(
        a=a.target.label, b=b.target.label, ratios=rows, quality=quality, break_even=verdicts, sentences=sentences
    )


def _drift_rows(first: ResultFile, second: ResultFile) -> list[DriftRow]:
    label = first.target.label
    rows = []
    rate_1, _ = _decode(first)
    rate_2, _ = _decode(second)
    if rate_1 and rate_2 and first.decode and second.decode:
        interval = stats.decode_rate_ratio_ci(
            (first.decode.short_e2el_s, first.decode.long_e2el_s),
            (second.decode.short_e2el_s, second.decode.long_e2el_s),
            short_tokens=first.decode.short_tokens,
            long_tokens=first.decode.long_tokens,
        )
        rows.append(_drift_row(label, "decode rate", rate_1.rate_tokens_per_s, rate_2.rate_tokens_per_s, interval))
    levels_1, levels_2 = _levels(first), _levels(second)
    for concurrency in sorted(set(levels_1) & set(levels_2)):
        s1, s2 = levels_1[concurrency].output_tokens_per_s, levels_2[concurrency].output_tokens_per_s
        t1, t2 = level_throughput(s1), level_throughput(s2)
        if not t1 or not t2:
            continue
        spread = stats.drift(s1, s2).interval if min(len(s1), len(s2)) >= 2 else None
        rows.append(_drift_row(label, f"throughput c={concurrency}", t1, t2, spread))
    if first.quality and second.quality and first.quality.set_name == second.quality.set_name:
        q = compare_quality(first.quality, second.quality, "run 1", "run 2")
        rows.append(
            DriftRow(
                label=label,
                metric="quality",
                first=float(q.a_correct),
                second=float(q.b_correct),
                ratio=_ratio(q.a_correct, q.b_correct),
                ci_low=None,
                ci_high=None,
                significant=q.mcnemar.p_value < ALPHA,
                sentence=f"{label}: {q.identical_answers}/{q.paired} answers identical between its two runs; "
                f"{q.a_correct} vs {q.b_correct} correct (McNemar exact p = {q.mcnemar.p_value:.2f}).",
            )
        )
    return rows


def _drift_row(label: str, metric: str, first: float, second: float, interval: stats.Interval | None) -> DriftRow:
    """``interval``: of second / first (None with one repeat a side)."""
    ratio = second / first
    low, high = (interval.low, interval.high) if interval is not None else (None, None)
    significant = low is not None and high is not None and not low <= 1.0 <= high
    change = (ratio - 1) * 100
    if low is None or high is None:
        tail = "one repeat each: no interval"
    else:
        verdict = ": within noise"
        if significant:
            verdict = (
                ": a real drift"
                if abs(change) >= DRIFT_NOTABLE_PERCENT
                else (f": detectable but under {DRIFT_NOTABLE_PERCENT:.0f}%")
            )
        tail = f"95% CI {low:.3f}–{high:.3f}{verdict}"
    return DriftRow(
        label=label,
        metric=metric,
        first=first,
        second=second,
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        significant=significant,
        sentence=f"{label} {metric}: second run {change:+.1f}% vs first ({tail}).",
    )


def result_warnings(results: Sequence[ResultFile]) -> list[str]:
    """What a reader must know before trusting the figures: unlike settings, implausible decode figures,
    gaps, failures, no price."""
    warnings = []
    base = results[0]
    for result in results[1:]:
        for field in (
            "load_input_tokens",
            "load_output_tokens",
            "decode_short_tokens",
            "decode_long_tokens",
            "temperature",
            "quality_max_tokens",
        ):
            va, vb = getattr(base.client, field), getattr(result.client, field)
            if va != vb and None in (va, vb):  # an imported run that does not record it: say so, not "None"
                unknown, known = (result, base) if vb is None else (base, result)
                why = (unknown.client.sampling_note or "not recorded").removeprefix("not recorded: ")
                warnings.append(
                    f"{unknown.target.label}: {field} not recorded ({why}); {known.target.label} used "
                    f"{getattr(known.client, field)}: the ratios may not be like for like."
                )
            elif va != vb:
                warnings.append(
                    f"{result.target.label} used {field}={vb}, {base.target.label} {va}: "
                    "the ratios are not like for like."
                )
    for result in results:
        warnings += [
            f"{result.target.label}: {plausibility.finding_line(finding)}" for finding in decode_findings(result)
        ]
        if result.completeness.missing:
            warnings.append(f"{result.target.label} is incomplete: missing {', '.join(result.completeness.missing)}.")
        if result.failures.failed:
            warnings.append(
                f"{result.target.label}: {result.failures.failed} of {result.failures.requests} requests failed."
            )
        if result.client_overhead and result.client_overhead.warning:
            warnings.append(f"{result.target.label}: {result.client_overhead.warning}")
        if result.hardware.price_usd_per_hour is None:
            warnings.append(f"{result.target.label} has no price: no cost figures.")
    return warnings


def combine_loaded(results: Sequence[ResultFile], paths: Sequence[str], *, utilisation: float = 1.0) -> Comparison:
    """Compare already-loaded results (paths are only labels for the output)."""
    if len(results) < 2:
        raise UsageError(
            "bench combine needs at least two result files.", hint="gemmaserve bench combine A.json B.json [C.json …]"
        )
    results = list(results)
    warnings = result_warnings(results)
    first_of: dict[tuple[str, str | None, str], ResultFile] = {}
    drift: list[DriftRow] = []
    for result in results:
        key = _identity(result)
        if key in first_of:
            drift.extend(_drift_rows(first_of[key], result))
        else:
            first_of[key] = result
    distinct = list(first_of.values())
    if len(distinct) < 2:
        warnings.append("All files measure the same target: only drift is reported.")
    baseline = distinct[0]
    pairs = [_pair(baseline, other, warnings) for other in distinct[1:]]
    costs = [table for table in (cost_table(r, utilisation=utilisation) for r in distinct) if table is not None]
    return Comparison(
        files=list(paths),
        baseline=baseline.target.label,
        targets=[summarize_target(r, p) for r, p in zip(results, paths, strict=True)],
        pairs=pairs,
        drift=drift,
        costs=costs,
        warnings=warnings,
    )


def combine_results(paths: Sequence[str | os.PathLike[str]], *, utilisation: float = 1.0) -> Comparison:
    """Load result files strictly and compare them; the first is the baseline A.

    Raises:
        ResultFileInvalid: a file is missing, not JSON, or not of this schema version.
        UsageError: fewer than two files.
    """
    if not 0 < utilisation <= 1:
        raise UsageError(f"utilisation must be in (0, 1], got {utilisation}.", hint="e.g. --utilisation 0.25")
    names = [str(path) for path in paths]
    return combine_loaded([load_result(path) for path in paths], names, utilisation=utilisation)
