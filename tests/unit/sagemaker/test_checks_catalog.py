"""Every SageMaker check is named once (gemmaserve.sagemaker.spec.checks) and docs/sagemaker.md lists them all."""

from __future__ import annotations

import re
from pathlib import Path

from gemmaserve.findings import Check
from gemmaserve.sagemaker.spec import checks

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sagemaker.md"


def _table(heading: str) -> list[tuple[str, str]]:
    text = DOCS.read_text()
    start = text.index(f"| check | {heading} |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        check, title = re.fullmatch(r"\| `([^`]+)` \| (.+) \|", line).groups()  # type: ignore[union-attr]
        rows.append((check, title))
    return rows


def test_the_docs_list_every_check_with_its_title_in_order() -> None:
    assert _table("what preflight checks") == [(check.check, check.title) for check in checks.PREFLIGHT]
    assert _table("what the wait watches") == [(check.check, check.title) for check in checks.WAIT]


def test_each_check_is_named_once() -> None:
    named = [value for value in vars(checks).values() if isinstance(value, Check)]
    assert sorted(check.check for check in named) == sorted(c.check for c in (*checks.PREFLIGHT, *checks.WAIT))
    assert len({check.check for check in named}) == len(named)
