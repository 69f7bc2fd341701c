"""No secret leaves the process: every command and every tool, fed secrets in every parameter, prints none.

Three secrets per run, fresh each time: a Hugging Face token (shape ``hf_…``) in the parameter under test,
an AWS access key id given under ``--env`` where a command takes one, and a value of no known shape that
sits in this process's own ``HF_TOKEN``. Each command runs as a user runs it (``run_with_error_mapping``:
errors mapped, output through the CLI's redaction) against moto's server; each tool through the SDK's
real client in memory. Parameters that need a valid value to get anywhere get one (:data:`CLI_REQUIRED`),
so the secret reaches validation, the library and the error paths, not only the argument parser.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from mcp import Client

from gemmaserve.cli import app
from gemmaserve.cli.errors import run_with_error_mapping
from gemmaserve.mcp_server import ServerDeps, build_server
from gemmaserve.redact import MASK, redact, redact_data, remember
from tests.support.sagemaker.fixtures import aws_env, moto_factory, moto_server_url  # noqa: F401 - fixtures
from tests.unit.test_request_agreement import COMMANDS, TOOLS

REGION = "us-east-1"
SKIPPED = {"mcp"}  # serves stdio until its session ends: tests/mcp/test_stdio*.py drive it as a process


def _random(alphabet: str, length: int) -> str:
    return "".join(random.choice(alphabet) for _ in range(length))


@pytest.fixture
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``, made the working directory: what a command writes beside itself lands there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    found = {
        "hf": "hf_" + _random(string.ascii_letters + string.digits, 34),
        "aws": "AKIA" + _random(string.ascii_uppercase + string.digits, 16),
        "environment": _random(string.ascii_letters + string.digits, 24),
    }
    monkeypatch.setenv("HF_TOKEN", found["environment"])
    return found


# The parameters a command needs before it does anything with the others: valid, so the secret gets further.
CLI_REQUIRED: dict[str, list[str]] = {
    "bench combine": ["{tmp}/missing.json"],
    "bench import": ["{tmp}/missing.json", "--out", "{tmp}/out"],
    "bench measure": ["http://127.0.0.1:9/v1", "--out", "{tmp}/out"],
    "bench report": ["{tmp}"],
    "checkpoint grid-check": ["{tmp}/build", "--reference", "{tmp}/reference"],
    "checkpoint inspect": ["{tmp}/checkpoint"],
    "checkpoint repack": ["{tmp}/src", "{tmp}/out"],
    "checkpoint validate": ["{tmp}/checkpoint"],
    "sagemaker autoscale": ["leak-e2b", "--max-instances", "2", "--target-invocations", "10"],
    "sagemaker cleanup": ["--expired"],
    "sagemaker delete": ["leak-e2b"],
    "sagemaker deploy": ["--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--region", REGION],
    "sagemaker invoke": ["leak-e2b", "hello"],
    "sagemaker logs": ["leak-e2b"],
    "sagemaker preflight": ["--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--region", REGION],
    "sagemaker status": ["leak-e2b"],
    "sagemaker wait": ["leak-e2b", "--timeout-s", "1"],
}


def command_parameters(keep: Callable[[click.Parameter], bool]) -> list[tuple[str, str]]:
    """(command path, parameter name) of every command's parameters that ``keep`` accepts (``mcp`` left out)."""
    return [
        (path, param.name or "")
        for path, command in sorted(COMMANDS.items())
        if path not in SKIPPED
        for param in command.params
        if keep(param)
    ]


def _cli_cases() -> list[tuple[str, str]]:
    """Every argument and every option that takes a value (flags and --help carry no secret)."""
    return command_parameters(lambda p: not (isinstance(p, click.Option) and (p.is_flag or p.name == "help")))


def _invocation(path: str, param_name: str, value: str, tmp: Path) -> list[str]:
    command = COMMANDS[path]
    base = [item.format(tmp=tmp) for item in CLI_REQUIRED.get(path, [])]
    param = next(p for p in command.params if p.name == param_name)
    if isinstance(param, click.Argument):
        position = [p for p in command.params if isinstance(p, click.Argument)].index(param)
        positionals = [item for item in base if not item.startswith("--")]
        # the positionals come first in CLI_REQUIRED; replace the one under test
        args = list(base)
        if position < len(positionals):
            args[args.index(positionals[position])] = value
        else:
            args.append(value)
        return [*path.split(), *args]
    return [*path.split(), *base, param.opts[0], value]


def _leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return [name for name, value in secrets.items() if value in text]


@pytest.mark.usefixtures("aws_env", "in_tmp_path")
@pytest.mark.parametrize(("path", "param_name"), _cli_cases())
def test_no_command_prints_a_secret_it_was_given(
    path: str, param_name: str, secrets: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in (f"HF_TOKEN {secrets['hf']}", secrets["environment"]):
        args = _invocation(path, param_name, value, tmp_path)
        if "--env" in [p.opts[0] for p in COMMANDS[path].params if isinstance(p, click.Option)]:
            args += ["--env", f"HF_TOKEN {secrets['aws']}"]
        run_with_error_mapping(app, [*args, "--json"], debug=False)
        out, err = capsys.readouterr()
        assert not _leaks(out + err, secrets), (args, out[-2000:], err[-2000:])
        assert "Traceback" not in err, (args, err)


def test_env_given_whole_is_named_not_echoed(secrets: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code = run_with_error_mapping(
        app,
        ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--env",
         f"HF_TOKEN {secrets['hf']}", "--dry-run"],
        debug=False,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "item 1 ('HF_TOKEN', …) is not KEY=VALUE" in err and secrets["hf"][3:] not in err


# --- MCP: every tool, through the SDK's client -------------------------------------------------------------

MCP_REQUIRED: dict[str, dict[str, Any]] = {
    "bench_combine": {"files": ["{tmp}/missing.json"]},
    "bench_import": {"vllm_file": "{tmp}/missing.json", "out": "{tmp}/out"},
    "bench_measure": {"targets": ["http://127.0.0.1:9/v1"], "out": "{tmp}/out"},
    "bench_report": {"directory": "{tmp}"},
    "checkpoint_grid_check": {"build": "{tmp}/build", "reference": "{tmp}/reference"},
    "checkpoint_inspect": {"source": "{tmp}/checkpoint"},
    "checkpoint_repack": {"src": "{tmp}/src", "out": "{tmp}/out"},
    "checkpoint_validate": {"source": "{tmp}/checkpoint"},
    "sagemaker_autoscale": {"endpoint_name": "leak-e2b", "max_instances": 2, "target_invocations": 10},
    "sagemaker_cleanup": {"expired": True},
    "sagemaker_delete": {"endpoint_name": "leak-e2b"},
    "sagemaker_deploy": {"model": "gemma-4-e2b", "instance": ["ml.g4dn.xlarge"], "region": REGION},
    "sagemaker_invoke": {"endpoint_name": "leak-e2b", "prompt": "hello"},
    "sagemaker_logs": {"endpoint_name": "leak-e2b"},
    "sagemaker_preflight": {"model": "gemma-4-e2b", "instance": ["ml.g4dn.xlarge"], "region": REGION},
    "sagemaker_status": {"endpoint_name": "leak-e2b"},
    "sagemaker_wait": {"endpoint_name": "leak-e2b", "timeout_s": 1},
}


def _filled(value: Any, tmp: Path) -> Any:
    if isinstance(value, str):
        return value.format(tmp=tmp)
    if isinstance(value, list):
        return [_filled(item, tmp) for item in value]
    return value


def _mcp_cases() -> list[tuple[str, str]]:
    cases = []
    for name, tool in sorted(TOOLS.items()):
        for parameter in tool.parameters["properties"]:
            if parameter != "confirm":
                cases.append((name, parameter))
        cases.append((name, "hf_token_typo"))  # an unknown argument: its error must not quote the value
    return cases


def _secret_argument(schema: dict[str, Any], value: str) -> Any:
    kinds = {option.get("type") for option in schema.get("anyOf", [schema])}
    return [value] if "array" in kinds else value


@pytest.mark.parametrize(("tool", "parameter"), _mcp_cases())
def test_no_tool_replies_with_a_secret_it_was_given(
    tool: str,
    parameter: str,
    secrets: dict[str, str],
    in_tmp_path: Path,
    aws_env: Any,  # noqa: F811
) -> None:
    server = build_server(ServerDeps(aws_clients=aws_env, sleep=lambda s: None))
    schema = TOOLS[tool].parameters["properties"].get(parameter, {"type": "string"})
    replies: list[str] = []

    async def go() -> None:
        async with Client(server) as client:
            for value in (f"HF_TOKEN {secrets['hf']}", secrets["environment"]):
                arguments = {
                    **_filled(MCP_REQUIRED.get(tool, {}), in_tmp_path),
                    parameter: _secret_argument(schema, value),
                }
                if "env" in TOOLS[tool].parameters["properties"] and parameter != "env":
                    arguments["env"] = [f"HF_TOKEN {secrets['aws']}"]

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    replies.append(message or "")

                result = await client.call_tool(tool, arguments, progress_callback=progress)
                replies.append(json.dumps(result.model_dump(mode="json")))

    anyio.run(go)
    text = "\n".join(replies)
    assert not _leaks(text, secrets), text[-3000:]


# --- the rule itself ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789", "HF_TOKEN=***"),
        ("env HF_TOKEN hf_abc123", "env HF_TOKEN ***"),
        ('"SM_VLLM_API_KEY": "abc"', '"SM_VLLM_API_KEY": "***"'),
        ("X-Amz-Security-Token: FwoGZXIvY", "X-Amz-Security-Token: ***"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY=***"),
        ("password='hunter2'", "password='***'"),
        ("key AKIAABCDEFGHIJKLMNOP seen", "key *** seen"),
        # data that only looks like a secret's name
        ('"num_key_value_heads": 8', '"num_key_value_heads": 8'),
        ('"key": "e2b"', '"key": "e2b"'),
        ("max_num_batched_tokens=8192", "max_num_batched_tokens=8192"),
        ("tokenizer: google/gemma-4-E2B-it", "tokenizer: google/gemma-4-E2B-it"),
        ("the API key is missing", "the API key is missing"),
        ('"token": true', '"token": true'),
        ("For example: --env HF_TOKEN=hf_…", "For example: --env HF_TOKEN=hf_…"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_remembered_values_go_wherever_they_stand() -> None:
    value = "q" + _random(string.ascii_letters, 20)
    remember([value])
    assert redact(f"container said {value}!") == f"container said {MASK}!"
    assert redact_data({"lines": [f"{value}"], "HF_TOKEN": "short"}) == {"lines": [MASK], "HF_TOKEN": MASK}


def test_real_outputs_pass_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    """The rule does not eat data: the plan's and env's full JSON read the same redacted."""
    for args in (["plan", "--json"], ["env", "--json"], ["plan", "--wide"]):
        from click.testing import CliRunner

        output = CliRunner().invoke(app, args, catch_exceptions=False).stdout
        assert redact(output) == output, args


def test_a_container_log_line_quoted_in_a_deploys_error_shows_no_token(
    moto_server_url: str,  # noqa: F811
    moto_factory: Any,  # noqa: F811
    secrets: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The container crashes printing its settings; the deploy's error quotes the line, and nothing leaks."""
    import time

    from tests.support.sagemaker.helpers import make_role
    from tests.support.sagemaker.moto_proxy import sagemaker_proxy

    name = "leaky-e2b"
    given = "k" + _random(string.ascii_letters + string.digits, 20)  # no known shape: hidden because it was given
    logs = moto_factory("logs", REGION)
    group = f"/aws/sagemaker/Endpoints/{name}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-1")
    lines = [
        f"INFO settings: HF_TOKEN={secrets['hf']} MY_API_KEY={given}",
        f"RuntimeError: Engine core initialization failed: 401 for token {secrets['hf']} (key {given})",
    ]
    now_ms = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName="AllTraffic/i-1",
        logEvents=[{"timestamp": now_ms + i, "message": line} for i, line in enumerate(lines)],
    )
    role = make_role(moto_factory("iam", REGION))
    with sagemaker_proxy(moto_server_url) as proxy:
        proxy.creating(name)  # the wait's first read finds it Creating, with the crash in its log
        reads_before = [0]

        def come_up(operation: str, _: dict[str, Any]) -> None:
            if operation == "DescribeEndpoint" and proxy.count("DescribeEndpoint") - reads_before[0] >= 3:
                proxy.finish_creating(name)  # the teardown's reads: it may delete it now

        proxy.hooks.append(come_up)
        monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", proxy.url)
        args = ["sagemaker", "deploy", "--model", "gemma-4-e2b", "--instance", "ml.g4dn.xlarge", "--role-arn", role,
                "--name", name, "--region", REGION, "--skip-preflight", "--list-prices", "--env",
                f"HF_TOKEN={secrets['hf']}", "--env", f"MY_API_KEY={given}", "--yes"]  # fmt: skip
        for extra in ([], ["--json"]):
            reads_before[0] = proxy.count("DescribeEndpoint")
            code = run_with_error_mapping(app, [*args, *extra], debug=False)
            out, err = capsys.readouterr()
            assert code == 1 and "the container log shows a crash" in out + err, (out, err)
            assert "Engine core initialization failed" in out + err  # the line is quoted ...
            assert not _leaks(out + err, {**secrets, "given": given}), (out, err)  # ... without the secrets
            assert moto_factory("sagemaker", REGION).list_endpoints()["Endpoints"] == []
            proxy.creating(name)


def test_bytes_written_past_the_text_stream_are_redacted_too(secrets: dict[str, str]) -> None:
    """click writes bytes to ``sys.stdout.buffer`` (shell completion): that side redacts as well."""
    import io

    import click

    from gemmaserve.cli.redaction import RedactingWriter

    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="utf-8")
    writer = RedactingWriter(text)
    writer.write("first line\n")
    click.echo(f"token {secrets['hf']}\n".encode(), file=writer, nl=False)  # type: ignore[arg-type]
    writer.flush()
    assert raw.getvalue().decode() == "first line\ntoken ***\n"
