"""The update gate's verdict (pure): pass only on a full measurement with no regression."""

from __future__ import annotations

import math

import pytest

from gemmaserve.sagemaker.deployment.update_gate import DecodeSample, GateInput, Verdict, decide

SHORT, LONG = 16, 512


def sample(rate: float, overhead: float = 0.2, n: int = 5) -> DecodeSample:
    """Walls of a variant decoding ``rate`` tokens/s after a fixed ``overhead``, with a little spread."""
    spread = [0.0, 0.001, -0.001, 0.002, -0.002][:n] + [0.0] * max(0, n - 5)
    return DecodeSample(
        short_s=[overhead + SHORT / rate + d for d in spread], long_s=[overhead + LONG / rate + d for d in spread]
    )


def gate(**changes: object) -> GateInput:
    values: dict[str, object] = {
        "old_first": sample(50.0),
        "new": sample(50.0),
        "old_again": sample(50.0),
        "short_tokens": SHORT,
        "long_tokens": LONG,
        "old_correct": [True] * 36 + [False] * 4,
        "new_correct": [True] * 36 + [False] * 4,
        "max_slowdown": 0.10,
    }
    values.update(changes)
    return GateInput.model_validate(values)


def test_same_speed_and_answers_pass_with_the_numbers() -> None:
    decision = decide(gate())
    assert decision.verdict is Verdict.PASS and decision.passed
    assert decision.old_rate_tokens_per_s == pytest.approx(50.0, rel=1e-3)
    assert decision.new_rate_tokens_per_s == pytest.approx(50.0, rel=1e-3)
    assert (decision.old_right, decision.new_right, decision.paired) == (36, 36, 40)
    assert decision.detectable_gap_points is not None and decision.detectable_gap_points > 0


def test_faster_new_variant_passes() -> None:
    assert decide(gate(new=sample(70.0))).verdict is Verdict.PASS


@pytest.mark.parametrize(("rate", "verdict"), [(46.0, Verdict.PASS), (44.0, Verdict.SLOWER), (25.0, Verdict.SLOWER)])
def test_slowdown_against_the_limit(rate: float, verdict: Verdict) -> None:
    decision = decide(gate(new=sample(rate)))
    assert decision.verdict is verdict
    assert decision.slowdown == pytest.approx(1 - rate / 50.0, rel=1e-2)
    if verdict is Verdict.SLOWER:
        assert "slower" in decision.reasons[0] and "10%" in decision.reasons[0]


def test_a_looser_limit_lets_a_slower_variant_through() -> None:
    assert decide(gate(new=sample(44.0), max_slowdown=0.2)).verdict is Verdict.PASS


def test_worse_answers_beyond_the_gap_fail() -> None:
    decision = decide(gate(new_correct=[True] * 20 + [False] * 20))
    assert decision.verdict is Verdict.WORSE_ANSWERS
    assert decision.new_right == 20 and decision.old_right == 36
    assert decision.p_value is not None and decision.p_value < 0.05
    assert "McNemar" in decision.reasons[0]


def test_one_more_wrong_answer_is_within_noise() -> None:
    assert decide(gate(new_correct=[True] * 35 + [False] * 5)).verdict is Verdict.PASS


def test_better_answers_pass() -> None:
    old = [True] * 20 + [False] * 20
    assert decide(gate(old_correct=old, new_correct=[True] * 40)).verdict is Verdict.PASS


def test_slower_and_worse_name_both() -> None:
    decision = decide(gate(new=sample(20.0), new_correct=[True] * 10 + [False] * 30))
    assert decision.verdict is Verdict.SLOWER
    assert len(decision.reasons) == 2 and "McNemar" in decision.reasons[1]


@pytest.mark.parametrize("n", [0, 1, 2])
def test_too_few_timings_are_unknown(n: int) -> None:
    thin = DecodeSample(short_s=[0.5] * n, long_s=[10.0] * n)
    for field in ("old_first", "new", "old_again"):
        decision = decide(gate(**{field: thin}))
        assert decision.verdict is Verdict.UNKNOWN and not decision.passed
        assert "fewer than" in decision.reasons[0]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_too_few_questions_to_detect_any_gap_are_unknown(n: int) -> None:
    # McNemar's exact test needs 6 one-sided discordant pairs for p < 0.05: 5 questions can detect nothing.
    decision = decide(gate(old_correct=[True] * n, new_correct=[True] * n))
    assert decision.verdict is Verdict.UNKNOWN and "answer quality not measured" in decision.reasons[0]


def test_a_failed_question_is_unknown() -> None:
    decision = decide(gate(new_correct=[None] + [True] * 35 + [False] * 4))
    assert decision.verdict is Verdict.UNKNOWN and "no answer" in decision.reasons[0]


def test_unpaired_answers_are_unknown() -> None:
    assert decide(gate(new_correct=[True] * 39)).verdict is Verdict.UNKNOWN


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_bad_timings_are_unknown(bad: float) -> None:
    broken = DecodeSample(short_s=[0.5, 0.5, bad], long_s=[10.0, 10.0, 10.0])
    assert decide(gate(new=broken)).verdict is Verdict.UNKNOWN


def test_long_not_slower_than_short_is_unknown() -> None:
    flat = DecodeSample(short_s=[1.0] * 3, long_s=[1.0] * 3)
    decision = decide(gate(new=flat))
    assert decision.verdict is Verdict.UNKNOWN and "no decode rate" in decision.reasons[0]


def test_a_drifting_old_variant_is_unknown() -> None:
    decision = decide(gate(old_again=sample(35.0)))
    assert decision.verdict is Verdict.UNKNOWN and "drift" in decision.reasons[0]


def test_a_regression_is_reported_even_beside_an_unknown() -> None:
    decision = decide(gate(new=sample(20.0), old_correct=[True] * 5, new_correct=[True] * 5))
    assert decision.verdict is Verdict.SLOWER and any("not measured" in r for r in decision.reasons)
