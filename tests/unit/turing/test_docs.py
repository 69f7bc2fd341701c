"""What the README and the Turing pages state about the clamp agrees with the code that enforces it."""

from __future__ import annotations

import re
from pathlib import Path

from gemmaserve.turing.versions import MIN_SUPPORTED_VLLM, NEXT_UNKNOWN_VLLM, supported_range_text

ROOT = Path(__file__).resolve().parents[3]


def _turing_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## The Turing (T4) clamp", 1)[1].split("\n## ", 1)[0]


def test_the_readme_states_the_range_the_clamp_enforces() -> None:
    stated = re.findall(r"^Supported vLLM: (.*)$", _turing_section(), re.MULTILINE)
    assert len(stated) == 1, stated
    low = ".".join(map(str, MIN_SUPPORTED_VLLM))
    major, minor, _ = NEXT_UNKNOWN_VLLM
    last = f"{major}.{minor - 1}.x" if minor > 0 else None
    assert last is not None  # a range ending at a major release would need other words
    assert stated[0].startswith(f"{low}–{last} (`{supported_range_text()}`)"), stated[0]
