from __future__ import annotations

import re
from collections import Counter

import pytest

from gemmaserve.errors import UnknownName
from gemmaserve.measurements import questions as qs


def _evaluate(prompt: str) -> int:
    """Independent check of the expected answers: parse the arithmetic out of the prompt."""
    expression = re.match(r"What is ([\d+\-*/ ]+)\?", prompt)
    assert expression, prompt
    tokens = expression.group(1).split()
    value = int(tokens[0])
    for op, operand in zip(tokens[1::2], tokens[2::2], strict=True):
        number = int(operand)
        if op == "+":
            value += number
        elif op == "-":
            value -= number
        elif op == "*":
            value *= number
        else:
            assert value % number == 0, "divisions are exact"
            value //= number
    return value


def test_published_set_has_the_published_shape() -> None:
    published = qs.get_question_set("published-40")
    assert Counter(q.kind for q in published.questions) == {"product": 15, "sum": 15, "capital": 10}
    assert published.temperature == 0.0 and published.max_tokens >= 2048
    for q in published.questions:
        if q.kind == "product":
            a, b = map(int, re.findall(r"\d+", q.prompt)[:2])
            assert 10 <= a <= 99 and 10 <= b <= 99
        if q.kind == "sum":
            assert re.match(r"What is \d+ \+ \d+ - \d+\?", q.prompt)
    capitals = [q.expected for q in published.questions if q.kind == "capital"]
    assert capitals[:4] == ["Paris", "Tokyo", "Canberra", "Ottawa"]


@pytest.mark.parametrize("name", qs.QUESTION_SETS)
def test_every_arithmetic_answer_is_right_and_ids_are_unique(name: str) -> None:
    question_set = qs.get_question_set(name)
    ids = [q.id for q in question_set.questions]
    assert len(ids) == len(set(ids))
    assert len({q.prompt for q in question_set.questions}) == len(ids)
    for q in question_set.questions:
        if q.kind != "capital":
            assert int(q.expected) == _evaluate(q.prompt)
        assert qs.ANSWER_INSTRUCTION in q.prompt


def test_sets_are_deterministic_and_large_enough() -> None:
    qs.get_question_set.cache_clear()
    first = qs.get_question_set("arithmetic-500")
    qs.get_question_set.cache_clear()
    assert qs.get_question_set("arithmetic-500") == first
    assert len(first.questions) == 500
    assert len(qs.get_question_set("capitals").questions) >= 100
    assert len(qs.get_question_set("extended").questions) >= 600


def test_unknown_set_names_the_valid_ones() -> None:
    with pytest.raises(UnknownName, match="published-40") as info:
        qs.get_question_set("gsm8k")
    assert info.value.exit_code == 2


def _product_question() -> qs.Question:
    return qs.Question(id="p", prompt="What is 47 * 83?", expected="3901", kind="product")


@pytest.mark.parametrize(
    ("reply", "extracted", "correct", "reason"),
    [
        ("47 * 83 = 3901", "3901", True, "last-number"),
        ("Answer: 3901", "3901", True, "marker"),
        ("Answer: **3,901**", "3,901", True, "marker"),
        ("The answer is 3901.0.", "3901.0", True, "last-number"),
        # The final answer counts, not a correct number somewhere earlier.
        ("3901? No: 47 * 83 = 3891", "3891", False, "last-number"),
        ("Answer: 3901\nWait, recheck. Final answer: 3891", "3891", False, "marker"),
        ("Answer: 3901\n\nHope this helps, 2 more questions?", "3901", True, "marker"),
        ("<think>47*83 is 3901</think>I am not sure, maybe 3900", "3900", False, "last-number"),
        ("<think>So 3891... no, 3901</think>\nAnswer: 3901", "3901", True, "marker"),
        ("<|channel>thought\nTry 3891.<channel|>Answer: 3901", "3901", True, "marker"),
        ("<|channel>thought\n47 * 83 is 3901, so", None, False, "thinking-only"),
        ("<think>3901 is it", None, False, "thinking-only"),
        ("plain reasoning 3891</think>Answer: 3901", "3901", True, "marker"),
        ("I cannot compute that.", None, False, "no-answer"),
        ("", None, False, "no-answer"),
        ("Answer: x3901", None, False, "no-answer"),
    ],
)
def test_numeric_scoring_reads_the_final_answer(reply: str, extracted: str | None, correct: bool, reason: str) -> None:
    scored = qs.score_answer(_product_question(), reply)
    assert (scored.extracted, scored.correct, scored.reason) == (extracted, correct, reason)


def test_negative_answers() -> None:
    q = qs.Question(id="s", prompt="What is 10 + 11 - 99?", expected="-78", kind="sum")
    assert qs.score_answer(q, "Answer: -78").correct
    assert qs.score_answer(q, "Answer: −78").correct
    assert not qs.score_answer(q, "Answer: 78").correct


def test_none_reply_is_wrong() -> None:
    assert qs.score_answer(_product_question(), None).reason == "no-answer"


def _capital(country: str) -> qs.Question:
    return next(q for q in qs.get_question_set("capitals").questions if country in q.prompt)


@pytest.mark.parametrize(
    ("country", "reply", "extracted", "correct"),
    [
        ("Australia", "Answer: Canberra", "Canberra", True),
        ("Australia", "The capital is Canberra, not Sydney.", "Canberra", True),
        ("Australia", "People say Canberra, but it is Sydney", "Sydney", False),
        ("Australia", "Answer: Sydney", "Sydney", False),
        ("Brazil", "Answer: Brasilia", "Brasília", True),
        ("Brazil", "answer: BRASÍLIA", "Brasília", True),
        ("Brazil", "It used to be Rio de Janeiro; today it is Brasília.", "Brasília", True),
        ("Turkey", "Answer: Istanbul", "Istanbul", False),
        ("United States", "Answer: Washington, D.C.", "Washington, D.C.", True),
        ("Kazakhstan", "Answer: Nur-Sultan", "Nur-Sultan", True),
        ("Australia", "Answer: I do not know", "I do not know", False),
        ("Australia", "<think>Sydney? no, Canberra</think>\nIt is Sydney.", "Sydney", False),
    ],
)
def test_capital_scoring_reads_the_last_city(country: str, reply: str, extracted: str, correct: bool) -> None:
    scored = qs.score_answer(_capital(country), reply)
    assert (scored.extracted, scored.correct) == (extracted, correct)


def test_strip_thinking_drops_control_tokens() -> None:
    visible, unfinished = qs.strip_thinking("<|channel>thought\nhmm<channel|>Paris<turn|>")
    assert (visible, unfinished) == ("Paris", False)
