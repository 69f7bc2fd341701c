"""``gemmaserve doctor`` through the real CLI entry: exit codes and --json on this GPU-less machine."""

from __future__ import annotations

import json
import sys

from click.testing import CliRunner

from gemmaserve.cli import app
from gemmaserve.cli.errors import run_with_error_mapping


def invoke(args: list[str]) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        code = run_with_error_mapping(app, args, debug=False)
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_doctor_json_is_one_document_and_exit_1_without_a_gpu() -> None:
    code, out, _ = invoke(["doctor", "--python", sys.executable, "--json"])
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    by_id = {check["id"]: check for check in report["checks"]}
    assert by_id["gpu.driver"]["status"] == "fail"  # no nvidia-smi on this machine
    assert by_id["python.probe"]["status"] == "ok"
    assert all(check["status"] in {"ok", "warn", "fail", "unknown"} for check in report["checks"])


def test_doctor_table_names_each_check() -> None:
    code, out, _ = invoke(["doctor", "--python", sys.executable])
    assert code == 1
    for check_id in (
        "host.memory",
        "host.disk",
        "gpu.driver",
        "torch.import",
        "vllm.import",
    ):
        assert check_id in out
    assert "not ok" in out


def test_unknown_model_is_usage_exit_2_without_traceback() -> None:
    code, out, err = invoke(["doctor", "--model", "gemma-9"])
    assert code == 2
    assert "Unknown model 'gemma-9'" in err and "gemma-4-e2b" in err
    assert "Traceback" not in err + out


def test_missing_interpreter_fails_the_probe_check() -> None:
    code, out, _ = invoke(["doctor", "--python", "/nonexistent/bin/python", "--json"])
    by_id = {check["id"]: check for check in json.loads(out)["checks"]}
    assert code == 1
    assert by_id["python.probe"]["status"] == "fail"
    assert by_id["torch.import"]["status"] == "unknown"
