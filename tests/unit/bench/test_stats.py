from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest

from gemmaserve.measurements import stats


def test_median_and_percentiles_interpolate_linearly() -> None:
    assert stats.median([3.0, 1.0, 2.0, 10.0]) == 2.5
    # 0, 10, 20, ..., 100: p90 is exactly 90; p99 interpolates between 90 and 100.
    values = [float(v) for v in range(0, 101, 10)]
    assert stats.percentile(values, 90) == pytest.approx(90.0)
    assert stats.percentile(values, 99) == pytest.approx(99.0)
    assert stats.percentile([1.0, 2.0], 25) == pytest.approx(1.25)


def test_summarize() -> None:
    summary = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert (summary.n, summary.mean, summary.p50) == (4, 2.5, 2.5)
    assert summary.p99 == pytest.approx(3.97)
    assert stats.summarize([]).n == 0 and stats.summarize([]).p50 is None


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_inputs_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        stats.median(bad)


def test_percentile_range_checked() -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        stats.percentile([1.0], 101)


def test_decode_rate_recovers_the_line() -> None:
    # wall = 0.08 s + tokens / 50 tok/s, exactly.
    short = [0.08 + 16 / 50] * 5
    long = [0.08 + 512 / 50] * 5
    rate = stats.decode_rate(short, long)
    assert rate.rate_tokens_per_s == pytest.approx(50.0)
    assert rate.intercept_s == pytest.approx(0.08)


def test_decode_rate_uses_medians_not_means() -> None:
    # One slow outlier per side must not move the rate.
    short = [0.4, 0.4, 0.4, 0.4, 5.0]
    long = [10.32, 10.32, 10.32, 10.32, 30.0]
    assert stats.decode_rate(short, long).rate_tokens_per_s == pytest.approx(496 / 9.92)


def test_decode_rate_refuses_a_flat_line() -> None:
    with pytest.raises(ValueError, match="no decode rate"):
        stats.decode_rate([1.0], [1.0])
    with pytest.raises(ValueError, match="must exceed"):
        stats.decode_rate([1.0], [2.0], short_tokens=16, long_tokens=16)


def test_bootstrap_is_seeded_and_covers_the_median() -> None:
    rng = random.Random(3)
    values = [50 + rng.gauss(0, 1) for _ in range(9)]
    first = stats.bootstrap_ci(values)
    assert first == stats.bootstrap_ci(values)

    def mean(rows):
        return rows.mean(axis=1)

    assert stats.bootstrap_ci(values, statistic=mean) != stats.bootstrap_ci(values, statistic=mean, seed=1)
    assert first.low < stats.median(values) < first.high
    assert min(values) <= first.low and first.high <= max(values)
    wider = stats.bootstrap_ci(values, confidence=0.99)
    assert wider.low <= first.low and wider.high >= first.high


def test_bootstrap_of_one_value_has_no_width() -> None:
    interval = stats.bootstrap_ci([7.0])
    assert (interval.low, interval.high) == (7.0, 7.0)


def test_bootstrap_ratio_ci() -> None:
    a = [100.0, 101.0, 99.0, 100.5, 99.5]
    b = [200.0, 202.0, 198.0, 201.0, 199.0]
    interval = stats.bootstrap_ratio_ci(a, b)
    assert interval.low < 2.0 < interval.high
    assert interval.low > 1.95 and interval.high < 2.05


def test_decode_rate_ci_brackets_the_true_rate() -> None:
    rng = random.Random(5)
    short = [0.08 + 16 / 40 + rng.uniform(-0.01, 0.01) for _ in range(5)]
    long = [0.08 + 512 / 40 + rng.uniform(-0.01, 0.01) for _ in range(5)]
    interval = stats.decode_rate_ci(short, long)
    assert interval.low < 40.0 < interval.high
    assert interval.high - interval.low < 0.2


def test_decode_rate_ci_of_a_flat_line_reaches_infinity() -> None:
    interval = stats.decode_rate_ci([1.0, 1.1], [1.05, 1.2])
    assert interval.high == math.inf


def test_decode_rate_ratio_ci() -> None:
    a = ([0.4, 0.41, 0.39], [10.3, 10.31, 10.29])  # ~50 tok/s
    b = ([0.2, 0.21, 0.19], [5.15, 5.16, 5.14])  # ~100 tok/s
    interval = stats.decode_rate_ratio_ci(a, b)
    assert interval.low < 2.0 < interval.high


# R: binom.test(2, 12)$p.value = 0.03857422; binom.test(7, 20)$p.value = 0.2632 (printed to 4 places);
# Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91: 1 vs 7 discordant, exact p = 0.070.
@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [(2, 12, 0.03857422), (7, 20, 0.26317596), (1, 8, 0.0703125), (0, 0, 1.0), (5, 10, 1.0), (0, 5, 0.0625)],
)
def test_binomial_two_sided_against_published_values(k: int, n: int, expected: float) -> None:
    assert stats.binomial_two_sided_p(k, n) == pytest.approx(expected, abs=5e-8)
    assert stats.binomial_two_sided_p(n - k, n) == stats.binomial_two_sided_p(k, n)


def test_binomial_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        stats.binomial_two_sided_p(3, 2)


def test_mcnemar_counts_the_four_cells() -> None:
    a = [True, True, True, False, False, True, True, True, True, True]
    b = [True, False, False, False, True, True, False, False, False, True]
    result = stats.mcnemar_exact(a, b)
    assert (result.both, result.a_only, result.b_only, result.neither) == (3, 5, 1, 1)
    assert result.p_value == pytest.approx(2 * (1 + 6) / 64)


def test_mcnemar_of_identical_answers_is_one() -> None:
    assert stats.mcnemar_exact([True, False], [True, False]).p_value == 1.0


def test_mcnemar_refuses_unpaired() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        stats.mcnemar_exact([True], [True, False])


def _brute_force_power(n: int, difference: float, share: float, alpha: float) -> float:
    """Enumerate every (b, c) outcome of n paired questions and sum the rejecting ones."""
    p_b, p_c = (share - difference) / 2, (share + difference) / 2
    p_rest = 1 - share
    total = 0.0
    for b, c in itertools.product(range(n + 1), repeat=2):
        if b + c > n:
            continue
        if stats.binomial_two_sided_p(b, b + c) < alpha:
            rest = n - b - c
            ways = math.factorial(n) // (math.factorial(b) * math.factorial(c) * math.factorial(rest))
            total += ways * p_b**b * p_c**c * p_rest**rest
    return total


@pytest.mark.parametrize(("n", "difference", "share"), [(12, 0.2, 0.3), (20, 0.1, 0.25), (25, 0.3, 0.3)])
def test_power_matches_full_enumeration(n: int, difference: float, share: float) -> None:
    assert stats.mcnemar_power(n, difference, share) == pytest.approx(
        _brute_force_power(n, difference, share, 0.05), rel=1e-9
    )


def test_power_without_a_gap_stays_below_alpha() -> None:
    assert stats.mcnemar_power(100, 0.0, 0.2) <= 0.05


def test_minimum_detectable_difference_for_the_published_set() -> None:
    gap = stats.minimum_detectable_difference(40)
    assert gap is not None
    # All disagreements one way: detected iff at least 6 discordant pairs (2/2**5 = 0.0625 > 0.05).
    p_at_least_6 = float(sum(math.comb(40, k) * gap**k * (1 - gap) ** (40 - k) for k in range(6, 41)))
    assert p_at_least_6 >= 0.8
    below = gap - 0.0025
    assert float(sum(math.comb(40, k) * below**k * (1 - below) ** (40 - k) for k in range(6, 41))) < 0.8


def test_minimum_detectable_difference_shrinks_with_more_questions_and_grows_with_disagreement() -> None:
    gaps = [stats.minimum_detectable_difference(n) for n in (40, 200, 1000)]
    assert gaps[0] > gaps[1] > gaps[2]  # type: ignore[operator]
    noisy = stats.minimum_detectable_difference(200, discordant_share=0.2)
    assert noisy is not None and noisy > gaps[1]  # type: ignore[operator]


def test_minimum_detectable_difference_of_too_few_questions_is_none() -> None:
    assert stats.minimum_detectable_difference(5) is None  # 5 of 5 one way: p = 0.0625
    assert stats.minimum_detectable_difference(0) is None


def test_wilson_interval_against_a_published_value() -> None:
    # Newcombe (1998), Stat Med 17:857, example 81/263: Wilson 0.2553 to 0.3662.
    interval = stats.wilson_interval(81, 263)
    assert interval.low == pytest.approx(0.2553, abs=1e-4)
    assert interval.high == pytest.approx(0.3662, abs=1e-4)
    assert stats.wilson_interval(0, 10).low == pytest.approx(0.0, abs=1e-12)


def test_drift_flags_a_real_change_only() -> None:
    steady = stats.drift([50.0, 50.2, 49.8, 50.1], [50.1, 49.9, 50.0, 50.2])
    assert not steady.significant and steady.interval.contains(1.0)
    slowed = stats.drift([50.0, 50.2, 49.8, 50.1], [45.0, 45.2, 44.8, 45.1])
    assert slowed.significant and slowed.ratio == pytest.approx(45.05 / 50.05)


def test_unbounded_interval_is_null_in_json_and_its_schema_says_so() -> None:
    import json

    import jsonschema

    from gemmaserve.bench.combine import Comparison

    interval = stats.Interval(low=240.0, high=float("inf"))
    document = json.loads(interval.model_dump_json())
    assert document["high"] is None and interval.high == float("inf")
    jsonschema.validate(document, stats.Interval.model_json_schema())
    # the MCP output schema of bench_combine is Comparison's: it must admit what the tool returns
    assert "anyOf" in json.dumps(Comparison.model_json_schema()["$defs"]["Interval"]["properties"]["high"])


def test_load_throughput_is_what_docs_bench_schema_says() -> None:
    """Successful requests' tokens over the repeat's first send → end of its last successful request."""
    from gemmaserve.bench.results import load_level
    from gemmaserve.measurements.schema import ClientSettings, RequestKind, RequestRecord

    def record(start: float, e2el: float | None, tokens: int, ok: bool) -> RequestRecord:
        return RequestRecord(
            request_id=f"r{start}", kind=RequestKind.LOAD, concurrency=3, repeat=0, requested_output_tokens=100,
            output_tokens=tokens, success=ok, e2el_s=e2el, start_offset_s=start,
        )  # fmt: skip

    records = [record(10.0, 4.0, 100, True), record(10.5, 5.5, 100, True), record(9.0, 20.0, 7, False)]
    level = load_level(records, concurrency=3, settings=ClientSettings(), repeats_finished=1)
    # the failed request was sent first (9.0) and adds no tokens; the last success ends at 10.5 + 5.5 = 16.0
    assert level.output_tokens_per_s == [pytest.approx(200 / (16.0 - 9.0))]
    assert (
        "the repeat's first send → the end of its last successful request"
        in (Path(__file__).parents[3] / "docs" / "bench-schema.md").read_text()
    )


def test_gaps_of_tokens_that_landed_in_one_read_are_not_a_measurement() -> None:
    """A stream whose tokens arrive eight per network read has seven zero gaps in eight: no ITL is printed."""
    bursty = ([0.0] * 7 + [0.04]) * 20
    summary = stats.summarize_stream_gaps(bursty)
    assert summary.p50 is None and summary.not_measurable == "not measurable: about 8 tokens per read"
    steady = [0.005, 0.0051, 0.0049] * 10
    assert stats.summarize_stream_gaps(steady).p50 == pytest.approx(0.005)
    assert stats.summarize_stream_gaps([]).n == 0


def test_quality_is_correct_of_answered_with_the_failed_left_out_everywhere() -> None:
    """One rule: the table says 30/30 (10 failed, left out), as the comparison leaves the 10 out."""
    from gemmaserve.bench.report import quality_cell
    from gemmaserve.bench.results import answered
    from gemmaserve.measurements.schema import QualityAnswer, QualitySection

    answers = [
        QualityAnswer(question_id=f"q{i}", kind="math", prompt="p", expected="1", answer_text="1", extracted="1",
                      correct=True)
        for i in range(30)
    ] + [
        QualityAnswer(question_id=f"f{i}", kind="math", prompt="p", expected="1", answer_text=None, extracted=None,
                      correct=False, error="timeout")
        for i in range(10)
    ]  # fmt: skip
    section = QualitySection(set_name="gemma-40", max_tokens=64, answers=answers, correct=30, total=40)
    assert answered(section) == 30
    assert quality_cell(section.correct, answered(section), section.total) == "30/30 (10 failed, left out)"
    assert quality_cell(30, 40, 40) == "30/40"
