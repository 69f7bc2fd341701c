"""Question sets with known answers, and scoring of a reply on its final answer.

``published-40`` rebuilds the published method's set (15 two-digit products,
15 a+b−c sums, 10 capitals) from a fixed seed; the larger sets exist so small
quality differences become measurable. Scoring strips thinking blocks, then reads
the answer after the last ``Answer:`` marker, else the last number (arithmetic)
or the last city named (capitals): never a match anywhere in a long reply. Pure.
"""

from __future__ import annotations

import functools
import random
import re
import unicodedata
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from importlib import resources

from pydantic import BaseModel, ConfigDict

from gemmaserve.errors import UnknownName

ANSWER_INSTRUCTION = "Finish with a last line of the form 'Answer: <your answer>'."


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    prompt: str
    expected: str
    kind: str  # product, sum, product3, division, sum5, capital
    accepted: tuple[str, ...] = ()  # other spellings counted as correct (capitals)


class QuestionSet(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    description: str
    max_tokens: int  # enough for a thinking model to finish its reasoning
    temperature: float = 0.0
    questions: tuple[Question, ...]


class ScoredAnswer(BaseModel):
    extracted: str | None  # the final answer read from the reply; None when there is none
    correct: bool
    reason: str  # how it was read: 'marker', 'last-number', 'last-city', 'no-answer', 'thinking-only'


# --- generation ---------------------------------------------------------------


def _product(rng: random.Random, low: int = 10, high: int = 99, low_b: int = 10, high_b: int = 99) -> tuple[str, int]:
    a, b = rng.randint(low, high), rng.randint(low_b, high_b)
    return f"What is {a} * {b}?", a * b


def _sum3(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(100, 999), rng.randint(100, 999), rng.randint(10, 99)
    return f"What is {a} + {b} - {c}?", a + b - c


def _product3(rng: random.Random) -> tuple[str, int]:
    return _product(rng, 100, 999, 10, 99)


def _division(rng: random.Random) -> tuple[str, int]:
    divisor, quotient = rng.randint(3, 19), rng.randint(12, 99)
    return f"What is {divisor * quotient} / {divisor}?", quotient


def _sum5(rng: random.Random) -> tuple[str, int]:
    terms = [rng.randint(10, 999) for _ in range(5)]
    return f"What is {' + '.join(str(t) for t in terms)}?", sum(terms)


def _arithmetic(
    kind: str, make: Callable[[random.Random], tuple[str, int]], rng: random.Random, count: int
) -> list[Question]:
    questions: list[Question] = []
    seen: set[str] = set()
    while len(questions) < count:
        text, answer = make(rng)
        if text in seen:
            continue
        seen.add(text)
        questions.append(
            Question(
                id=f"{kind}-{len(questions):03d}",
                prompt=f"{text} {ANSWER_INSTRUCTION}",
                expected=str(answer),
                kind=kind,
            )
        )
    return questions


@functools.cache
def _capitals() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    text = resources.files("gemmaserve.measurements").joinpath("data/capitals.tsv").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        country, capital, *rest = line.split("\t")
        others = tuple(name for name in (rest[0] if rest else "").split("|") if name)
        rows.append((country, capital, others))
    return tuple(rows)


@functools.cache
def _city_names() -> tuple[str, ...]:
    """Every city the capital scorer recognises: the capitals, their spellings, common wrong answers."""
    text = (
        resources.files("gemmaserve.measurements").joinpath("data/capital_distractors.txt").read_text(encoding="utf-8")
    )
    names = {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    for _, capital, others in _capitals():
        names.add(capital)
        names.update(others)
    return tuple(sorted(names))


def _capital_questions(count: int | None = None) -> list[Question]:
    rows = _capitals() if count is None else _capitals()[:count]
    return [
        Question(
            id=f"capital-{index:03d}",
            prompt=f"What is the capital city of {country}? {ANSWER_INSTRUCTION}",
            expected=capital,
            kind="capital",
            accepted=others,
        )
        for index, (country, capital, others) in enumerate(rows)
    ]


PUBLISHED_SEED = 40
LARGE_SEED = 2026


def _published_40() -> QuestionSet:
    rng = random.Random(PUBLISHED_SEED)
    questions = [
        *_arithmetic("product", _product, rng, 15),
        *_arithmetic("sum", _sum3, rng, 15),
        *_capital_questions(10),
    ]
    return QuestionSet(
        name="published-40",
        version=1,
        description="15 two-digit products, 15 a+b-c sums, 10 capitals (the published method's shape)",
        max_tokens=2048,
        questions=tuple(questions),
    )


def _arithmetic_500() -> QuestionSet:
    rng = random.Random(LARGE_SEED)
    makers: list[tuple[str, Callable[[random.Random], tuple[str, int]]]] = [
        ("product", _product),
        ("sum", _sum3),
        ("product3", _product3),
        ("division", _division),
        ("sum5", _sum5),
    ]
    questions = [q for kind, make in makers for q in _arithmetic(kind, make, rng, 100)]
    return QuestionSet(
        name="arithmetic-500",
        version=1,
        description="100 each: 2x2-digit products, a+b-c, 3x2-digit products, exact divisions, sums of five",
        max_tokens=2048,
        questions=tuple(questions),
    )


def _capitals_all() -> QuestionSet:
    questions = _capital_questions()
    return QuestionSet(
        name="capitals",
        version=1,
        description=f"{len(questions)} national capitals with unambiguous answers (package data)",
        max_tokens=1024,
        questions=tuple(questions),
    )


def _extended() -> QuestionSet:
    questions = (*_arithmetic_500().questions, *_capitals_all().questions)
    return QuestionSet(
        name="extended",
        version=1,
        description=f"arithmetic-500 plus capitals: {len(questions)} questions, for gaps of a few points",
        max_tokens=2048,
        questions=questions,
    )


_BUILDERS: dict[str, Callable[[], QuestionSet]] = {
    "published-40": _published_40,
    "arithmetic-500": _arithmetic_500,
    "capitals": _capitals_all,
    "extended": _extended,
}
QUESTION_SETS: tuple[str, ...] = tuple(_BUILDERS)


@functools.cache
def get_question_set(name: str) -> QuestionSet:
    """The named set, built deterministically. Raises UnknownName (exit 2) for other names."""
    builder = _BUILDERS.get(name)
    if builder is None:
        raise UnknownName("question set", name, list(QUESTION_SETS))
    return builder()


# --- scoring -----------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_GEMMA_THOUGHT_BLOCK = re.compile(r"<\|channel\>\s*-?thought.*?<channel\|>", re.DOTALL)
_OPEN_THINKING = re.compile(r"<think>|<\|channel\>\s*-?thought", re.IGNORECASE)
_CONTROL_TOKENS = re.compile(r"<\|?(?:channel|turn|think)\|?>|<end_of_turn>|<eos>")
_MARKER = re.compile(r"(?:final\s+answer|answer)\s*[:：]", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[-−]?(?=\d)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d,]*\w)")


def strip_thinking(text: str) -> tuple[str, bool]:
    """The visible reply without reasoning blocks; the flag says the reply ended inside one."""
    visible = _GEMMA_THOUGHT_BLOCK.sub("", _THINK_BLOCK.sub("", text))
    opened = _OPEN_THINKING.search(visible)
    if opened:
        return visible[: opened.start()], True
    # A bare '</think>' (the template opened the block) or '<channel|>' ends reasoning too.
    for closer in ("</think>", "<channel|>"):
        if closer in visible:
            visible = visible.rsplit(closer, 1)[1]
    return _CONTROL_TOKENS.sub("", visible), False


def _normalise(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return re.sub(r"[^\w]+", " ", plain).strip()


def _final_segment(visible: str) -> tuple[str, bool]:
    markers = list(_MARKER.finditer(visible))
    if not markers:
        return visible, False
    tail = visible[markers[-1].end() :].strip()
    first_line = tail.splitlines()[0] if tail else ""
    return first_line, True


def _score_number(question: Question, segment: str, from_marker: bool) -> ScoredAnswer:
    numbers = _NUMBER.findall(segment.replace("**", ""))
    if not numbers:
        return ScoredAnswer(extracted=None, correct=False, reason="no-answer")
    raw = numbers[-1]
    reason = "marker" if from_marker else "last-number"
    try:
        value = Decimal(raw.replace(",", "").replace("−", "-"))
        correct = value == Decimal(question.expected)
    except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
        correct = False
    return ScoredAnswer(extracted=raw, correct=correct, reason=reason)


_NEGATIONS = (" not", " isn t", " nor", " never")


def _last_unnegated(haystack: str, needle: str) -> int:
    """Position of the last ``needle`` not right after a negation ("Canberra, not Sydney")."""
    position = haystack.rfind(needle)
    while position >= 0 and haystack[:position].endswith(_NEGATIONS):
        position = haystack.rfind(needle, 0, position)
    return position


def _score_city(question: Question, segment: str, from_marker: bool) -> ScoredAnswer:
    haystack = f" {_normalise(segment)} "
    accepted = {_normalise(name) for name in (question.expected, *question.accepted)}
    # The question's own names first, so a tie (same spelling once normalised) reports the canonical one.
    names = [question.expected, *question.accepted, *_city_names()]
    best: tuple[int, int, str] | None = None  # (end position, length, name): the last, then longest
    for name in names:
        needle = f" {_normalise(name)} "
        position = _last_unnegated(haystack, needle)
        if position >= 0:
            candidate = (position + len(needle), len(needle), name)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
    if best is None:
        extracted = segment.strip() or None
        return ScoredAnswer(extracted=extracted, correct=False, reason="marker" if extracted else "no-answer")
    return ScoredAnswer(
        extracted=best[2], correct=_normalise(best[2]) in accepted, reason="marker" if from_marker else "last-city"
    )


def score_answer(question: Question, text: str | None) -> ScoredAnswer:
    """Read the final answer of ``text`` (the reply content) and judge it against the question."""
    if not text:
        return ScoredAnswer(extracted=None, correct=False, reason="no-answer")
    visible, unfinished = strip_thinking(text)
    if unfinished and not visible.strip():
        return ScoredAnswer(extracted=None, correct=False, reason="thinking-only")
    segment, from_marker = _final_segment(visible)
    if question.kind == "capital":
        return _score_city(question, segment, from_marker)
    return _score_number(question, segment, from_marker)
