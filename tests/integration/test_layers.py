"""The layer contracts of docs/architecture.md ([tool.importlinter] in pyproject.toml), run by import-linter.

import-linter builds the import graph from the source with grimp, imports inside functions and under
TYPE_CHECKING included, so a dependency hidden in a late import still counts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason='the layer contracts need import-linter: pip install -e ".[test]"')

ROOT = Path(__file__).resolve().parents[2]
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
)


def run_contracts(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False
    )


def contract_names() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {contract["id"]: contract["name"] for contract in config["tool"]["importlinter"]["contracts"]}


def test_the_tree_keeps_every_layer_contract() -> None:
    done = run_contracts(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    names = contract_names()
    assert {"front-ends-on-top", "core-below-library", "core-in-packages", "no-cycles"} <= set(names)
    report = " ".join(done.stdout.split())  # import-linter wraps long names over lines
    for name in names.values():
        assert f"{name} KEPT" in report


def plant(path: Path, line: str) -> None:
    """Add a function whose body imports ``line``: the late import a cycle or a layer break hides in."""
    path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {line}\n")


def test_each_contract_catches_an_import_that_breaks_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    package = tmp_path / "src" / "gemmaserve"
    plant(package / "sagemaker" / "spec" / "container.py", "from gemmaserve.cli import main")  # library -> front end
    plant(package / "speed.py", "import boto3")  # core -> AWS adapter
    plant(package / "views" / "host.py", "from gemmaserve.mcp_server import build_server")  # a view -> front end
    plant(package / "turing" / "rule.py", "import subprocess")  # a pure module inside a package -> subprocess
    plant(package / "catalog.py", "from gemmaserve.plan import plan_deployment")  # catalog <- plan: a cycle

    done = run_contracts(tmp_path)

    assert done.returncode != 0
    report = " ".join(done.stdout.split())
    for name in contract_names().values():
        assert f"{name} BROKEN" in report, report
    assert "gemmaserve.sagemaker.spec.container -> gemmaserve.cli" in report
    assert "gemmaserve.speed -> boto3" in report
    assert "gemmaserve.views.host -> gemmaserve.mcp_server" in report
    assert "gemmaserve.turing.rule -> subprocess" in report
    assert "No cycles are allowed in gemmaserve." in report


def test_no_contract_ignores_an_import() -> None:
    """A cycle or a layer break is fixed by moving the shared piece below both, never listed as an exception."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignored = {
        contract["id"]: contract["ignore_imports"]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract.get("ignore_imports")
    }
    assert ignored == {}
