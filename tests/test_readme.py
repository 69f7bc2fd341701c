"""The README's Quick start is the set-up: CI must run exactly its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", quick, re.S)]


def test_quick_start_has_a_run_command_and_a_test_command() -> None:
    run, test = _quick_start_commands()[:2]
    assert run.endswith("gemmaserve plan") and "pip install ." in run
    assert '".[test]"' in test and test.endswith("pytest -q")


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    test_command = _quick_start_commands()[1]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert test_command in ci_lines
