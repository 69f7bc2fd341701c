"""The CLI as a whole: every registered noun loads, answers --help, and the reference doc is current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.cli import COMMANDS, app

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_registered_command_loads_and_helps(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flags_print_the_package_version(flag: str) -> None:
    from gemmaserve import __version__

    result = CliRunner().invoke(app, [flag])
    assert result.exit_code == 0
    assert result.output.strip() == f"gemmaserve, version {__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["deploy-everything"])
    assert result.exit_code == 2


def test_top_level_help_imports_no_heavy_dependency() -> None:
    code = (
        "import sys; from gemmaserve.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'triton', 'boto3', 'aiohttp', 'numpy', 'mcp') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "HEAVY:", f"--help imported {done.stdout}"


def test_cli_reference_doc_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_json_output_is_standard_json() -> None:
    from gemmaserve.cli.output import standard_json

    data = {"a": float("nan"), "b": [float("inf"), 1.5, -float("inf")], "c": {"d": 2}}
    assert standard_json(data) == {"a": None, "b": [None, 1.5, None], "c": {"d": 2}}
