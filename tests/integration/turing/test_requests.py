"""The turing request models: normalisation, cross-field rules, confirmation, and how the CLI enforces them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.cli.turing import cli
from gemmaserve.errors import UsageError
from gemmaserve.turing.requests import (
    ApplyRequest,
    RevertRequest,
    SmemRequest,
    TuringStatusRequest,
    VerifyRequest,
)


def no_vllm_interpreter(tmp_path: Path) -> Path:
    """This Python without site-packages: a real interpreter that certainly has no vLLM."""
    script = tmp_path / "python-without-vllm"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(("text", "expected"), [("sm_75", "7.5"), ("7.5", "7.5"), ("89", "8.9")])
def test_status_request_normalises_the_capability(text: str, expected: str) -> None:
    assert TuringStatusRequest.parse({"capability": text}).capability == expected


def test_status_request_refuses_a_capability_with_the_form_to_use() -> None:
    with pytest.raises(UsageError) as caught:
        TuringStatusRequest.parse({"capability": "turing"})
    assert "--capability (capability)" in caught.value.message and "7.5 or sm_75" in caught.value.message


@pytest.mark.parametrize("model", [ApplyRequest, RevertRequest, VerifyRequest])
def test_file_and_python_together_are_refused(model: type[VerifyRequest]) -> None:
    with pytest.raises(UsageError, match=re.escape("Give --file (file) or --python (python), not both")):
        model.parse({"file": "/x/triton_unified_attention.py", "python": "/usr/bin/python3"})


def test_a_folder_is_not_a_kernel_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder"):
        VerifyRequest.parse({"file": str(tmp_path)})


def test_apply_and_revert_need_confirmation_except_as_dry_runs() -> None:
    assert ApplyRequest(file="/k.py").needs_confirmation() and RevertRequest(file="/k.py").needs_confirmation()
    assert not ApplyRequest(file="/k.py", dry_run=True).needs_confirmation()
    assert not RevertRequest(file="/k.py", dry_run=True).needs_confirmation()
    assert not VerifyRequest().needs_confirmation() and not TuringStatusRequest().needs_confirmation()
    assert ApplyRequest(file="/k.py").describe_change() == "insert the Turing clamp into /k.py"
    assert RevertRequest(python="/opt/py").describe_change() == (
        "remove the Turing clamp from vLLM's triton_unified_attention.py of /opt/py"
    )


def test_smem_request_defaults_and_normalisation(tmp_path: Path) -> None:
    request = SmemRequest()
    assert (request.arch, request.head_size, request.num_warps, request.search) == ("sm_75", (256, 512), 4, False)
    assert SmemRequest.parse({"arch": "sm89", "head_size": [512, 512]}).model_dump(include={"arch", "head_size"}) == {
        "arch": "sm_89",
        "head_size": (512,),
    }


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"arch": "sm_61"}, "no shared-memory limit known for sm_61; use one of sm_75"),
        ({"arch": "turing"}, "is not an architecture; use the form sm_75"),
        ({"head_size": [100]}, "powers of two from 16 to 1024"),
        ({"head_size": []}, "at least one head size"),
        ({"num_warps": 3}, "power of two"),
        ({"num_warps": 64}, "less than or equal to 32"),
        ({"search": True, "num_warps": 8}, "--search compiles 4, 8 and 16 warps itself"),
        ({"vllm_file": "/no/such/triton_unified_attention.py"}, "does not exist"),
    ],
)
def test_smem_request_refusals(values: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        SmemRequest.parse(values)
    assert words in caught.value.message


def test_smem_vllm_file_and_python_together_are_refused(tmp_path: Path) -> None:
    kernel = tmp_path / "triton_unified_attention.py"
    kernel.write_text("x = 1\n")
    with pytest.raises(UsageError, match=re.escape("Give --vllm-file (vllm_file) or --python (python), not both")):
        SmemRequest.parse({"vllm_file": str(kernel), "python": sys.executable})


def test_cli_refuses_apply_and_revert_off_a_terminal_without_yes(tmp_path: Path) -> None:
    kernel = tmp_path / "triton_unified_attention.py"
    kernel.write_text("x = 1\n")
    for command in ("apply", "revert"):
        done = subprocess.run(
            [sys.executable, "-m", "gemmaserve", "turing", command, "--file", str(kernel)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert f"Refused to {'insert the Turing clamp into' if command == 'apply' else 'remove'}" in done.stderr
        assert "stdin is not a terminal" in done.stderr and "--yes" in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert kernel.read_text() == "x = 1\n"


def test_cli_dry_runs_need_no_yes(kernel_copy: Path) -> None:
    original = kernel_copy.read_bytes()
    done = CliRunner().invoke(cli, ["apply", "--file", str(kernel_copy), "--dry-run", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["action"] == "would-apply" and kernel_copy.read_bytes() == original
    done = CliRunner().invoke(cli, ["revert", "--file", str(kernel_copy), "--dry-run", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["action"] == "not-patched"


def test_cli_file_and_python_together_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gemmaserve", "turing", "verify", "--file", str(tmp_path / "k.py"), "--python", "p"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "Give --file (file) or --python (python), not both" in done.stderr
    assert "Traceback" not in done.stderr


def test_smem_without_a_local_vllm_names_vllm_file(tmp_path: Path) -> None:
    python = no_vllm_interpreter(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "gemmaserve", "turing", "smem", "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "No vLLM kernel file to compile" in done.stderr and "has no vLLM installed" in done.stderr
    hint = next(line for line in done.stderr.splitlines() if line.startswith("Hint: "))
    assert "--vllm-file PATH" in hint and "no vLLM install is needed" in hint and "--python PATH" in hint
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_smem_compiles_without_torch(vllm_kernel_files: dict[str, Path]) -> None:
    """`pip install "gemmaserve[kernel]"` brings triton only: the compile report must not need torch."""
    pytest.importorskip("triton")
    code = (
        "import sys; sys.modules['torch'] = None; from gemmaserve.cli import main; "
        f"code = main(['turing', 'smem', '--vllm-file', {str(vllm_kernel_files['0.34.0'])!r}, "
        "'--head-size', '512', '--json']); "
        "assert sys.modules['torch'] is None, 'torch was imported after all'; sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stock_fits"] is False and report["clamped_fits"] is True
    assert {row["smem_bytes"] for row in report["rows"] if row["variant"] == "clamped"} <= {65_536, 49_152, 32_768}


def test_the_package_exports_its_actions_without_importing_them() -> None:
    code = (
        "import sys, gemmaserve.turing as t; "
        "loaded = sorted(m for m in sys.modules if m.startswith('gemmaserve.')); "
        "names = [getattr(t, n).__name__ for n in t.__all__]; "
        "print(loaded, 'torch' in sys.modules, 'triton' in sys.modules, len(names))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    # The lazy-export helper is the one other module the package may load: it imports nothing.
    assert done.stdout.split() == ["['gemmaserve.exports',", "'gemmaserve.turing']", "False", "False", "15"]
