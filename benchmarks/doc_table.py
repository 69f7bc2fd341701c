"""Print a Markdown table a benchmark script renders, or with ``--check`` fail when the doc does not hold it."""

from __future__ import annotations

import sys
from pathlib import Path


def print_or_check(text: str, doc: Path, script: str) -> int:
    """Exit status for ``script``'s main: 0 after printing ``text``; with ``--check``, 1 when ``doc`` lacks it."""
    if "--check" in sys.argv[1:]:
        if text not in doc.read_text(encoding="utf-8"):
            print(f"{doc.name} does not hold the current table: run python {script}")
            return 1
        return 0
    sys.stdout.write(text)
    return 0
