"""The real probe, run in real interpreters on this machine (no GPU here)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gemmaserve.host.interpreter import (
    default_target_python,
    interpreter_from_script,
    parse_probe_output,
    probe_interpreter,
)
from gemmaserve.host.runner import run_command


def test_probe_of_the_running_interpreter_matches_what_this_process_sees() -> None:
    result = probe_interpreter(sys.executable)
    assert result.error is None and result.value is not None
    facts = result.value
    assert facts.python.version == ".".join(map(str, sys.version_info[:3]))
    if importlib.util.find_spec("torch") is None:
        assert not facts.torch.imported and facts.torch.import_error
    else:
        import torch

        assert facts.torch.version == torch.__version__
        assert facts.torch.cuda_build == torch.version.cuda
        assert facts.torch.cuda_available == torch.cuda.is_available()
        assert facts.torch.arch_list == torch.cuda.get_arch_list()
    try:
        vllm_version: str | None = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        vllm_version = None
    assert facts.vllm.distribution_version == vllm_version
    assert [lib.name for lib in facts.shared_libraries] == [
        "libcudart.so.13",
        "libcudart.so.12",
        "libcudnn.so.9",
    ]


def test_probe_of_an_interpreter_without_torch(tmp_path: Path) -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3")
    check = run_command(
        [
            python,
            "-c",
            "import importlib.util,sys; sys.exit(importlib.util.find_spec('torch') is not None)",
        ],
        30,
    )
    if check.returncode != 0:
        pytest.skip("the system python has torch")
    facts = probe_interpreter(python).value
    assert facts is not None
    assert facts.torch.imported is False
    assert facts.torch.import_error == "ModuleNotFoundError: No module named 'torch'"


def test_missing_interpreter(tmp_path: Path) -> None:
    result = probe_interpreter(str(tmp_path / "nope" / "python"))
    assert result.error == f"no interpreter at {tmp_path / 'nope' / 'python'}"


def test_interpreter_that_prints_no_result(
    fake_bin: Callable[[str, str], Path],
) -> None:
    python = fake_bin("python", "echo 'Segmentation fault (core dumped)' >&2\nexit 139\n")
    result = probe_interpreter(str(python))
    assert result.error is not None
    assert result.error.startswith("ValueError: the probe printed no result line (exit 139)")
    assert "Segmentation fault" in result.error


def test_interpreter_that_hangs_times_out(fake_bin: Callable[[str, str], Path]) -> None:
    python = fake_bin("python", "exec sleep 30\n")
    result = probe_interpreter(str(python), timeout_s=0.5)
    assert result.error is not None and result.error.startswith("TimeoutExpired")


def test_result_line_is_found_after_noise_printed_by_imports() -> None:
    facts = parse_probe_output(
        'INFO [__init__.py:216] detected platform cuda\nGEMMASERVE_PROBE {"torch": {"imported": true, "version": "2.13.0+cu130"}}\n'
    )
    assert facts.torch.version == "2.13.0+cu130"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "#!/opt/vllm/bin/python3.12\n# -*- coding: utf-8 -*-\nimport re\n",
            "/opt/vllm/bin/python3.12",
        ),
        (
            "#!/bin/sh\n'''exec' /very/long/path/venv/bin/python \"$0\" \"$@\"\n' '''\n",
            "/very/long/path/venv/bin/python",
        ),
        ("no shebang\n", None),
    ],
)
def test_interpreter_from_console_script(tmp_path: Path, script: str, expected: str | None) -> None:
    path = tmp_path / "vllm"
    path.write_text(script)
    assert interpreter_from_script(path) == expected


def test_default_target_is_the_vllm_on_paths_interpreter(fake_bin: Callable[[str, str], Path], tmp_path: Path) -> None:
    vllm = fake_bin("vllm", "")
    vllm.write_text("#!/opt/vllm/bin/python\nfrom vllm.entrypoints.cli.main import main\n")
    assert default_target_python(lambda name: shutil.which(name, path=str(vllm.parent))) == "/opt/vllm/bin/python"
    assert default_target_python(lambda name: shutil.which(name, path=str(tmp_path / "empty"))) == sys.executable
