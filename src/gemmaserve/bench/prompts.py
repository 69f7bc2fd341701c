"""Distinct synthetic prompts of a chosen length, so a prefix cache cannot flatter the numbers.

Every prompt opens with its own nonce: vLLM's prefix cache matches whole blocks
from the first token, so a different opening misses the cache for the whole
prompt. Lengths are in words of a common-English vocabulary (close to one token
each; the server's ``usage.prompt_tokens`` records the true count). Pure, seeded.
"""

from __future__ import annotations

import hashlib
import random

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
