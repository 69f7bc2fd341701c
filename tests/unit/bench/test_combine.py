from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmaserve.bench import combine
from gemmaserve.errors import ResultFileInvalid, UsageError
from gemmaserve.measurements import schema, stats

from .test_schema_builders import build_result


def _save(tmp_path: Path, name: str, result: schema.ResultFile) -> str:
    path = tmp_path / name
    schema.save_result(result, path)
    return str(path)


def _exact_decode(result: schema.ResultFile, rate: float, intercept: float) -> None:
    result.decode = schema.DecodeMeasurement(
        short_e2el_s=[intercept + 16 / rate] * 5, long_e2el_s=[intercept + 512 / rate] * 5
    )


def _row(pair: combine.PairComparison, metric: str) -> combine.RatioRow:
    return next(row for row in pair.ratios if row.metric == metric)


def test_ratios_by_hand(tmp_path: Path) -> None:
    a = build_result(label="bf16", weights_gib=9.5, kv_cache_tokens=400_000, load_tok_s={4: [100.0, 110.0, 120.0]})
    b = build_result(
        label="qat",
        url="http://127.0.0.1:8001",
        weights_gib=3.8,
        kv_cache_tokens=1_000_000,
        load_tok_s={4: [150.0, 165.0, 180.0]},
    )
    _exact_decode(a, 40.0, 0.1)
    _exact_decode(b, 60.0, 0.05)
    comparison = combine.combine_results([_save(tmp_path, "a.json", a), _save(tmp_path, "b.json", b)])
    assert comparison.baseline == "bf16"
    (pair,) = comparison.pairs
    assert _row(pair, "weights").ratio == pytest.approx(3.8 / 9.5)
    assert _row(pair, "KV cache").ratio == pytest.approx(2.5)
    decode = _row(pair, "decode rate")
    assert (decode.a, decode.b, decode.ratio) == (pytest.approx(40.0), pytest.approx(60.0), pytest.approx(1.5))
    # Identical calls: no spread, so the interval collapses onto the ratio.
    assert decode.ci_low == pytest.approx(1.5) and decode.ci_high == pytest.approx(1.5)
    assert _row(pair, "per-call fixed cost").ratio == pytest.approx(0.5)
    load = _row(pair, "throughput c=4")
    assert load.ratio == pytest.approx(165.0 / 110.0)
    assert load.ci_low is not None and load.ci_high is not None
    assert 150.0 / 120.0 <= load.ci_low <= load.ratio <= load.ci_high <= 180.0 / 100.0
    assert "qat decodes at 1.50x the rate of bf16" in pair.sentences[0]
    assert comparison.warnings == []


def test_quality_pairing_mcnemar_and_sentence() -> None:
    # 40 questions: both right on 30, A only on 1, B only on 7, both wrong on 2.
    a = [True] * 30 + [True] + [False] * 7 + [False] * 2
    b = [True] * 30 + [False] + [True] * 7 + [False] * 2
    result_a = build_result(label="bf16", correct=a)
    result_b = build_result(label="qat", url="http://127.0.0.1:8001", correct=b)
    quality = combine.compare_quality(result_a.quality, result_b.quality, "bf16", "qat")  # type: ignore[arg-type]
    assert (quality.mcnemar.a_only, quality.mcnemar.b_only) == (1, 7)
    assert quality.mcnemar.p_value == pytest.approx(18 / 256)
    assert (quality.a_correct, quality.b_correct, quality.paired) == (31, 37, 40)
    assert quality.identical_answers == 32 and len(quality.disagreements) == 8
    expected_gap = stats.minimum_detectable_difference(40, discordant_share=8 / 40)
    assert quality.minimum_detectable_gap_points == pytest.approx(expected_gap * 100)  # type: ignore[operator]
    assert quality.sentence.startswith(
        "qat answers 37/40 vs bf16 31/40: no measurable difference (McNemar exact p = 0.07)"
    )


def test_a_clear_quality_gap_is_called() -> None:
    result_a = build_result(correct=[True] * 40)
    result_b = build_result(label="broken", url="http://x:1", correct=[True] * 30 + [False] * 10)
    quality = combine.compare_quality(result_a.quality, result_b.quality, "good", "broken")  # type: ignore[arg-type]
    assert quality.mcnemar.p_value == pytest.approx(2 / 1024)
    assert "good is better" in quality.sentence


def test_failed_requests_are_left_out_of_the_pairing() -> None:
    result_a = build_result(correct=[True, True, False])
    result_b = build_result(label="b", url="http://x:1", correct=[True, False, False])
    assert result_b.quality is not None
    result_b.quality.answers[1].answer_text = None
    result_b.quality.answers[1].error = "timeout"
    quality = combine.compare_quality(result_a.quality, result_b.quality, "a", "b")  # type: ignore[arg-type]
    assert (quality.paired, quality.excluded) == (2, 1)
    assert "1 question(s) left out" in quality.sentence


def test_a_b_a_reports_drift(tmp_path: Path) -> None:
    first = build_result(label="t4", load_tok_s={1: [50.0, 50.5, 49.5]}, correct=[True, False, True])
    middle = build_result(label="l4", url="http://127.0.0.1:8001", load_tok_s={1: [90.0, 91.0, 89.0]})
    second = build_result(label="t4", load_tok_s={1: [45.0, 45.5, 44.5]}, correct=[True, False, True], seed=9)
    _exact_decode(first, 50.0, 0.1)
    _exact_decode(second, 50.0, 0.1)
    paths = [_save(tmp_path, f"{i}.json", r) for i, r in enumerate((first, middle, second))]
    comparison = combine.combine_results(paths)
    assert len(comparison.pairs) == 1 and len(comparison.targets) == 3
    drift = {row.metric: row for row in comparison.drift}
    assert drift["decode rate"].ratio == pytest.approx(1.0) and not drift["decode rate"].significant
    load = drift["throughput c=1"]
    assert load.ratio == pytest.approx(45.0 / 50.0) and load.significant
    assert "second run -10.0%" in load.sentence
    assert "3/3 answers identical" in drift["quality"].sentence


def test_cost_comparison_and_break_even(tmp_path: Path) -> None:
    t4 = build_result(label="t4", price_usd_per_hour=0.40, load_tok_s={16: [500.0, 500.0]})
    l4 = build_result(label="l4", url="http://x:1", price_usd_per_hour=1.00, load_tok_s={16: [1000.0, 1000.0]})
    comparison = combine.combine_results(
        [_save(tmp_path, "t4.json", t4), _save(tmp_path, "l4.json", l4)], utilisation=0.5
    )
    verdict = comparison.pairs[0].break_even["load:16"]
    assert verdict.cheaper == "t4" and verdict.cost_ratio == pytest.approx(0.8)
    costs = {table.label: table for table in comparison.costs}
    point = next(p for p in costs["t4"].points if p.concurrency == 16)
    assert point.usd_per_million_output_tokens == pytest.approx(0.40 / (500 * 3600 * 0.5) * 1e6)


def test_warnings_for_unlike_settings_missing_parts_and_prices() -> None:
    a = build_result()
    b = build_result(label="b", url="http://x:1", price_usd_per_hour=None)
    b.client.load_output_tokens = 512
    b.completeness.missing = ["quality"]
    b.failures = schema.FailureSummary(requests=10, failed=2, by_reason={"timeout": 2})
    warnings = combine.combine_loaded([a, b], ["a", "b"]).warnings
    assert any("load_output_tokens=512" in w for w in warnings)
    assert any("missing quality" in w for w in warnings)
    assert any("2 of 10 requests failed" in w for w in warnings)
    assert any("no price" in w for w in warnings)


def test_different_question_sets_are_not_paired() -> None:
    a = build_result(correct=[True])
    b = build_result(label="b", url="http://x:1", correct=[True], quality_set="extended")
    comparison = combine.combine_loaded([a, b], ["a", "b"])
    assert comparison.pairs[0].quality is None
    assert any("different question sets" in w for w in comparison.warnings)


def test_one_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least two"):
        combine.combine_results([_save(tmp_path, "a.json", build_result())])


def test_a_bad_file_is_named(tmp_path: Path) -> None:
    good = _save(tmp_path, "a.json", build_result())
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ResultFileInvalid, match=r"b\.json has schema_version 99"):
        combine.combine_results([good, str(bad)])


def test_comparison_round_trips_as_json(tmp_path: Path) -> None:
    a = build_result(correct=[True, False])
    b = build_result(label="b", url="http://x:1", correct=[False, False])
    comparison = combine.combine_loaded([a, b], ["a", "b"])
    again = combine.Comparison.model_validate_json(comparison.model_dump_json())
    assert again == comparison


def test_a_resolved_but_small_drift_is_called_small() -> None:
    first = build_result(label="t4", load_tok_s={1: [100.0, 100.1, 99.9, 100.0]})
    second = build_result(label="t4", load_tok_s={1: [101.0, 101.1, 100.9, 101.0]}, seed=5)
    middle = build_result(label="l4", url="http://x:1")
    (row,) = [
        r
        for r in combine.combine_loaded([first, middle, second], ["1", "2", "3"]).drift
        if r.metric == "throughput c=1"
    ]
    assert row.significant and "detectable but under 2%" in row.sentence
