"""``gemmaserve serve`` through the real CLI entry, against the dummy vLLM process."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from gemmaserve.cli import app
from gemmaserve.cli.errors import run_with_error_mapping
from tests.support.serve.fixtures import Spawned, report, seams_for, start_dummy


def invoke(args: list[str]) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            code = run_with_error_mapping(app, args, debug=False)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_start_on_this_gpu_less_machine_is_refused_with_reasons() -> None:
    code, out, err = invoke(["serve", "start", "--port", "8123", "--json"])
    assert code == 1
    document = json.loads(out)
    assert document["error"] == "InterlockRefused"
    assert any("gpu.driver" in reason for reason in document["reasons"])
    assert "Error: serve start refused" in err


def test_status_stop_logs_json_for_a_running_server(port: int, spawned: Spawned) -> None:
    start_dummy(["m", "--dtype", "float16"], seams_for(report(), spawned), port, model="gemma-4-e2b")
    code, out, _ = invoke(["serve", "status", "--port", str(port), "--json"])
    status = json.loads(out)
    assert code == 0 and status["state"] == "serving"
    assert status["engine"]["weights_gib"] == 8.01 and status["engine"]["kv_cache_tokens"] == 867999
    code, out, _ = invoke(["serve", "logs", "--port", str(port), "-n", "1"])
    assert code == 0 and "Application startup complete" in out
    code, out, _ = invoke(["serve", "logs", "--port", str(port), "-n", "1", "--json"])
    assert code == 0 and json.loads(out)["port"] == port
    assert len(json.loads(out)["lines"]) == 1 and "Application startup complete" in json.loads(out)["lines"][0]
    code, out, err = invoke(["serve", "logs", "--port", str(port), "--follow", "--json"])
    assert code == 2 and json.loads(out)["error"] == "UsageError"
    assert "--json prints one document and --follow never ends" in json.loads(out)["message"]
    code, out, _ = invoke(["serve", "stop", "--port", str(port), "--yes", "--json"])
    assert code == 0 and json.loads(out)["signal_sent"] == "SIGTERM"
    code, out, err = invoke(["serve", "status", "--port", str(port)])
    assert code == 1 and "No server started by gemmaserve on port" in err


def test_status_of_a_dead_server_exits_1(port: int, spawned: Spawned) -> None:
    import pytest

    from gemmaserve.errors import ServerDied

    with pytest.raises(ServerDied):
        start_dummy(["m"], seams_for(report(), spawned, mode="crash"), port)
    spawned.processes[0].wait(timeout=5)
    code, out, _ = invoke(["serve", "status", "--port", str(port), "--json"])
    assert code == 1 and json.loads(out)["state"] == "dead" and json.loads(out)["ok"] is False
    code, out, _ = invoke(["serve", "status", "--port", str(port)])
    assert code == 1 and out.startswith(f"port {port}: dead (pid {spawned.processes[0].pid}")
    # --all lists it and stays a JSON list, as it always was; a list of servers is never a failure.
    code, out, _ = invoke(["serve", "status", "--all", "--json"])
    listed = json.loads(out)
    assert code == 0 and isinstance(listed, list)
    assert [server["state"] for server in listed if server["port"] == port] == ["dead"]


def test_a_start_that_waited_and_is_not_serving_is_not_ok_and_one_that_did_not_wait_is() -> None:
    from gemmaserve.cli.errors import EXIT_FAILED, EXIT_OK, exit_code_for
    from gemmaserve.engine_log import EngineStage
    from gemmaserve.serve.launcher import StartResult
    from gemmaserve.serve.records import ServerRecord
    from gemmaserve.views import page_for
    from gemmaserve.views.page import plain_lines
    from tests.unit.test_result_models import _instance

    record = _instance(ServerRecord)
    assert isinstance(record, ServerRecord)
    timed_out = StartResult(record=record, ready=False, waited_s=600.0, stage=EngineStage.COMPILING)
    assert not timed_out.ok and exit_code_for(timed_out) == EXIT_FAILED
    assert timed_out.model_dump(mode="json")["ok"] is False
    lines = plain_lines(page_for(timed_out))
    assert lines[0].startswith("started (not serving yet): pid") and "not ready after 600 s" in lines[1]
    launched = StartResult(record=record, ready=False, waited_s=0.0, stage=EngineStage.NOT_STARTED, waited=False)
    assert launched.ok and exit_code_for(launched) == EXIT_OK
    serving = timed_out.model_copy(update={"ready": True, "stage": EngineStage.SERVING})
    assert serving.ok and plain_lines(page_for(serving))[0].startswith("serving: pid")


def test_no_servers_says_so_and_an_empty_log_prints_nothing() -> None:
    from gemmaserve.serve.supervisor import ServeLogs, ServerList
    from gemmaserve.views import page_for, summary_for
    from gemmaserve.views.page import plain_lines

    assert plain_lines(page_for(ServerList(servers=[]))) == ["no servers started by gemmaserve on this host"]
    empty = ServeLogs(port=8000, lines=[])
    assert plain_lines(page_for(empty)) == [] and summary_for(empty) == "(empty log)"
    assert plain_lines(page_for(ServeLogs(port=8000, lines=["[red]x[/]", ""]))) == ["[red]x[/]", ""]


def test_logs_follow_prints_lines_as_they_are_written(port: int) -> None:
    import os
    import subprocess
    import sys

    from gemmaserve.serve import records

    log = records.server_dir(port) / records.LOG_NAME
    log.write_text("first line\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gemmaserve",
            "serve",
            "logs",
            "--port",
            str(port),
            "--follow",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "first line\n"
        with log.open("a") as handle:
            handle.write("GPU KV cache size: 867,999 tokens\n")
        assert process.stdout.readline() == "GPU KV cache size: 867,999 tokens\n"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def test_stop_off_a_terminal_without_yes_is_refused_and_the_server_keeps_running(port: int, spawned: Spawned) -> None:
    start_dummy(["m", "--dtype", "float16"], seams_for(report(), spawned), port, model="gemma-4-e2b")
    code, out, err = invoke(["serve", "stop", "--port", str(port)])
    assert code == 2
    assert f"Refused to stop the vLLM server on port {port}" in err and "--yes" in err
    assert spawned.processes[0].poll() is None
    code, out, _ = invoke(["serve", "stop", "--port", str(port), "-y", "--json"])
    assert code == 0 and json.loads(out)["was_running"] is True


def test_an_extra_vllm_argument_that_has_its_own_option_is_usage_exit_2() -> None:
    code, out, err = invoke(["serve", "start", "--port", "8123", "--", "--enforce-eager", "--max-model-len=4096"])
    assert code == 2
    assert "--max-model-len has its own option here" in err and "Traceback" not in err + out


def test_no_wait_is_still_accepted_and_every_help_has_examples() -> None:
    from gemmaserve.serve.requests import LogsRequest, StartRequest

    command = app.get_command(click.Context(app), "serve")
    assert isinstance(command, click.Group)
    start = command.get_command(click.Context(command), "start")
    assert start is not None
    ctx = start.make_context("start", ["--no-wait", "--timeout", "60", "--", "--load-format", "dummy"])
    assert ctx.params["wait"] is False and ctx.params["timeout"] == 60
    assert ctx.params["extra_args"] == ("--load-format", "dummy")
    assert StartRequest.parse({"wait": False, "extra_args": ["--load-format", "dummy"]}).wait is False
    assert LogsRequest.parse({"lines": 100_000}).lines == 100_000  # the whole log, as `-n 100000` always gave
    for name in ("start", "status", "stop", "logs"):
        sub = command.get_command(click.Context(command), name)
        assert sub is not None and "Examples:" in (sub.help or ""), name


def test_the_start_line_names_the_plan_it_launched(port: int, spawned: Spawned) -> None:
    from gemmaserve.plan import plan_deployment
    from gemmaserve.views import page_for
    from gemmaserve.views.page import plain_lines

    row = plan_deployment("gemma-4-e2b", "qat-w4a16", "l4", vllm="0.29")
    result = start_dummy(row.vllm_args, seams_for(report(), spawned), port, model="gemma-4-e2b").model_copy(
        update={"plan": row}
    )
    shown = "\n".join(plain_lines(page_for(result)))
    assert f"serving: pid {result.record.pid} on port {port}" in shown
    assert f"plan (vLLM 0.29 rules): {row.kv_cache_tokens:,} KV tokens" in shown
    assert f"gemmaserve serve status --port {port}" in shown
    assert invoke(["serve", "stop", "--port", str(port), "--yes"])[0] == 0
