"""The README's Quick start is the set-up: CI must run exactly its test command."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", quick, re.S)]


def test_quick_start_has_a_run_command_and_a_test_command() -> None:
    run, test = _quick_start_commands()[:2]
    assert run.endswith("gemmaserve plan") and "pip install ." in run
    assert '".[test]"' in test and test.split("&&")[-1].split()[:2] == ["pytest", "-q"]


def test_the_test_commands_options_come_with_the_test_extra() -> None:
    """``-n`` is pytest-xdist's: the extra the command installs must bring it."""
    pytest_part = _quick_start_commands()[1].split("&&")[-1].split()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    if "-n" in pytest_part:
        assert any(re.match(r"pytest-xdist\b", requirement) for requirement in extra["test"])


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    test_command = _quick_start_commands()[1]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert test_command in ci_lines


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flake_check_runs_the_pytest_part_of_the_readmes_test_command() -> None:
    flake_check = _tool("flake_check")
    command = flake_check.readme_pytest_command((ROOT / "README.md").read_text(encoding="utf-8"))
    assert _quick_start_commands()[1].endswith("&& " + " ".join(command)) and command[0] == "pytest"
    changed = "## Quick start\n```bash\nrun\n```\n```bash\npip install -e . && make test\n```\n"
    with pytest.raises(SystemExit, match="does not end in a pytest run"):
        flake_check.readme_pytest_command(changed)


def test_ci_fills_the_test_cache_before_the_test_command() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    fill = next(i for i, line in enumerate(ci_lines) if line.startswith("python3 tools/fetch_vllm_sources.py"))
    assert fill < ci_lines.index(_quick_start_commands()[1])
