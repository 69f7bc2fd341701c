"""What one run sends, as an ordered list of steps, identical in shape for every target, and its prompts.

Phases: ``warmup`` (not scored), ``decode`` (short and long ``ignore_eos`` calls,
alternating so drift hits both), ``load:<c>`` (``c`` distinct prompts at once, per
repeat) and ``quality`` (a question set in batches). The measuring loop walks the
steps and runs step i on every target before step i+1: A, B, A, B. Pure, seeded.

Synthetic prompts are distinct so a prefix cache cannot flatter the numbers: every prompt
opens with its own nonce (vLLM's prefix cache matches whole blocks from the first token, so a
different opening misses the cache for the whole prompt). Lengths are in words of a
common-English vocabulary (close to one token each; the server's ``usage.prompt_tokens``
records the true count).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from gemmaserve.bench.transports import ChatRequest
from gemmaserve.measurements.questions import Question, get_question_set
from gemmaserve.measurements.schema import ClientSettings, RequestKind

# Short, frequent words: nearly all are a single token in Gemma's and Llama's vocabularies.
VOCABULARY = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "river",
    "stone",
    "garden",
    "light",
    "sound",
    "music",
    "window",
    "table",
    "paper",
    "road",
    "field",
    "market",
    "letter",
    "color",
    "summer",
    "winter",
    "green",
    "blue",
    "red",
    "small",
]


def _rng(seed: int, *salt: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *salt)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def nonce(seed: int, *salt: object) -> str:
    return hashlib.sha256(repr(("nonce", seed, *salt)).encode()).hexdigest()[:12]


def synthetic_prompt(words: int, *, seed: int, salt: tuple[object, ...]) -> str:
    """A prompt of about ``words`` words, unique for (seed, salt), that invites a long continuation."""
    if words < 1:
        raise ValueError(f"prompt length must be >= 1 word, got {words}")
    rng = _rng(seed, *salt)
    head = f"Request {nonce(seed, *salt)}. Continue this text:"
    body_words = max(0, words - 5)
    body = " ".join(rng.choice(VOCABULARY) for _ in range(body_words))
    return f"{head} {body}".rstrip()


DECODE_PROMPT_WORDS = 24
WARMUP_CALLS = 1


@dataclass(frozen=True)
class PlannedRequest:
    request_id: str
    request: ChatRequest
    question: Question | None = None


@dataclass(frozen=True)
class Step:
    phase: str  # "warmup" | "decode" | "load:<c>" | "quality"
    kind: RequestKind
    concurrency: int
    repeat: int
    requests: tuple[PlannedRequest, ...] = field(default_factory=tuple)
    last_of_phase: bool = False

    @property
    def label(self) -> str:
        return f"{self.phase} #{self.repeat + 1}"


def planned_phases(settings: ClientSettings) -> list[str]:
    phases = ["decode"] if settings.decode_calls > 0 else []
    if settings.load_repeats > 0:
        phases += [f"load:{c}" for c in settings.concurrency_levels]
    if settings.quality_set:
        phases.append("quality")
    return phases


def _int_extra(settings: ClientSettings, key: str, default: int) -> int:
    value = settings.extra.get(key, default)
    return int(value) if value is not None else default


def plan_steps(settings: ClientSettings, *, target_index: int = 0, model: str | None = None) -> list[Step]:
    """Every step of one target's run. ``target_index`` salts the prompts so no two targets share one."""
    seed = settings.seed
    temperature = settings.temperature if settings.temperature is not None else 0.0
    ignore_eos = settings.ignore_eos if settings.ignore_eos is not None else True
    steps: list[Step] = []

    def decode_request(tokens: int, salt: tuple[object, ...]) -> ChatRequest:
        return ChatRequest(
            prompt=synthetic_prompt(DECODE_PROMPT_WORDS, seed=seed, salt=(target_index, *salt)),
            max_tokens=tokens,
            temperature=temperature,
            ignore_eos=ignore_eos,
            model=model,
        )

    for call in range(_int_extra(settings, "warmup_calls", WARMUP_CALLS)):
        planned = PlannedRequest(f"warmup-{call}", decode_request(settings.decode_short_tokens, ("warmup", call)))
        steps.append(Step("warmup", RequestKind.WARMUP, 1, call, (planned,)))

    decode_steps: list[Step] = []
    for call in range(settings.decode_calls):
        for tokens in (settings.decode_short_tokens, settings.decode_long_tokens):
            planned = PlannedRequest(f"decode-{tokens}-{call}", decode_request(tokens, ("decode", tokens, call)))
            decode_steps.append(Step("decode", RequestKind.DECODE, 1, call, (planned,)))
    steps += _mark_last(decode_steps)

    requests_per_stream = _int_extra(settings, "load_requests_per_stream", 1)
    for level in settings.concurrency_levels if settings.load_repeats > 0 else ():
        # Open `level` keep-alive connections first: otherwise the first repeat pays for TCP
        # set-up inside its TTFT and the burst of connects delays every stream's first token.
        warm = tuple(
            PlannedRequest(f"warmup-pool-{level}-{index}", decode_request(2, ("pool", level, index)))
            for index in range(level)
        )
        steps.append(Step("warmup", RequestKind.WARMUP, level, 0, warm))
        level_steps = []
        for repeat in range(settings.load_repeats):
            batch = tuple(
                PlannedRequest(
                    f"load-{level}-{repeat}-{index}",
                    ChatRequest(
                        prompt=synthetic_prompt(
                            settings.load_input_tokens, seed=seed, salt=(target_index, "load", level, repeat, index)
                        ),
                        max_tokens=settings.load_output_tokens,
                        temperature=temperature,
                        ignore_eos=ignore_eos,
                        model=model,
                    ),
                )
                for index in range(level * requests_per_stream)
            )
            level_steps.append(Step(f"load:{level}", RequestKind.LOAD, level, repeat, batch))
        steps += _mark_last(level_steps)

    if settings.quality_set:
        question_set = get_question_set(settings.quality_set)
        batch_size = _int_extra(settings, "quality_batch", 20)
        concurrency = _int_extra(settings, "quality_concurrency", 8)
        questions = question_set.questions
        quality_steps = []
        for batch_index, start in enumerate(range(0, len(questions), batch_size)):
            batch = tuple(
                PlannedRequest(
                    f"quality-{question.id}",
                    ChatRequest(
                        prompt=question.prompt,
                        max_tokens=settings.quality_max_tokens,
                        temperature=temperature,
                        model=model,
                    ),
                    question,
                )
                for question in questions[start : start + batch_size]
            )
            quality_steps.append(Step("quality", RequestKind.QUALITY, concurrency, batch_index, batch))
        steps += _mark_last(quality_steps)
    return steps


# Work a request costs beyond its output tokens (sending, prefill, the first token), in token-times:
# without it the 16-token decode calls would look nearly free next to the long ones.
REQUEST_OVERHEAD_TOKENS = 8


def request_work(request: ChatRequest) -> float:
    """Planned work of one request, in output tokens as one stream produces them."""
    return request.max_tokens + REQUEST_OVERHEAD_TOKENS


def remaining_s(elapsed_s: float, done_work: float, total_work: float) -> float | None:
    """Seconds left if the rest runs at the pace so far; None before 1% of the work (or 1 s) is done."""
    if total_work <= 0 or elapsed_s < 1.0 or done_work < 0.01 * total_work:
        return None
    return max(0.0, elapsed_s * (total_work - done_work) / done_work)


def _mark_last(steps: list[Step]) -> list[Step]:
    if steps:
        last = steps[-1]
        steps[-1] = Step(last.phase, last.kind, last.concurrency, last.repeat, last.requests, last_of_phase=True)
    return steps
