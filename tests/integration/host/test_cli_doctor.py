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
    by_id = {check["check"]: check for check in report["checks"]}
    assert by_id["gpu.driver"]["status"] == "fail"  # no nvidia-smi on this machine
    assert by_id["python.probe"]["status"] == "ok"
    assert all(check["status"] in {"ok", "warn", "fail", "unknown"} for check in report["checks"])
    # Each check is a finding (gemmaserve.findings): the same fields as preflight and checkpoint validate.
    assert all(
        list(check) == ["check", "status", "detail", "fix", "title", "required", "where", "state", "commands"]
        for check in report["checks"]
    )


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
    by_id = {check["check"]: check for check in json.loads(out)["checks"]}
    assert code == 1
    assert by_id["python.probe"]["status"] == "fail"
    assert by_id["torch.import"]["status"] == "unknown"


def test_the_table_fits_100_columns_and_each_fix_command_is_a_whole_line() -> None:
    import io

    from rich.console import Console

    from gemmaserve.host.doctor import DoctorRequest, doctor
    from gemmaserve.views import page_for
    from gemmaserve.views.terminal import draw

    _, out, _ = invoke(["doctor", "--python", sys.executable])
    _, document, _ = invoke(["doctor", "--python", sys.executable, "--json"])
    commands = {command for check in json.loads(document)["checks"] for command in check["commands"]}
    assert commands, "this GPU-less machine has fixes to run"
    terminal = io.StringIO()
    draw(page_for(doctor(DoctorRequest.parse({"python": sys.executable}))), Console(file=terminal, width=100))
    for lines in (out.splitlines(), terminal.getvalue().splitlines()):
        for command in commands:
            assert command in lines  # on a line of its own, not wrapped
        # The fix column points at the commands under the table instead of folding them.
        assert not any(command in line for line in lines for command in commands if line != command)
    # On a terminal of 100 columns the table keeps to them; off a terminal each check is one line.
    assert [line for line in terminal.getvalue().splitlines() if len(line) > 100 and line not in commands] == []
    for check in json.loads(document)["checks"]:
        assert sum(line.split()[1:2] == [check["check"]] for line in out.splitlines()) == 1


def test_a_vllm_outside_the_plan_is_usage_exit_2() -> None:
    code, out, err = invoke(["doctor", "--vllm", "0.20"])
    assert code == 2 and "outside the releases the plan follows" in err and "--vllm 0.30.0" in err
    assert "Traceback" not in err + out


def test_help_has_examples() -> None:
    code, out, _ = invoke(["doctor", "--help"])
    assert code == 0 and "Examples:" in out and "gemmaserve doctor --python" in out


def test_a_report_with_no_check_is_not_ok_and_says_so() -> None:
    from gemmaserve.host.verdicts import DoctorReport
    from gemmaserve.views import page_for, summary_for
    from gemmaserve.views.page import plain_lines

    report = DoctorReport(python=sys.executable, model="m", encoding="e", gpu=None, checks=[])
    assert report.model_dump(mode="json")["ok"] is False
    lines = plain_lines(page_for(report))
    assert "(no rows)" in lines and "not ok: no check ran" in lines
    assert summary_for(report).startswith("Host NOT ready for m e")
