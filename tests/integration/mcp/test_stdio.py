"""The real thing once: spawn ``python -m gemmaserve mcp`` and talk to it over stdio with the SDK's client.

Checks tools are listed with annotations, structured output equals the CLI's --json, an error result,
progress notifications (bench_measure against the local streaming server), AWS through moto's
server, and that stdout carries nothing but JSON-RPC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import start_mock_thread
from tests.support.mcp.fixtures import REGION, ProgressLog, cli_json, error_details

DESTRUCTIVE_TOOLS = {"sagemaker_delete", "sagemaker_cleanup"}


def _server_env(tmp_path: Path, moto_server_url: str) -> dict[str, str]:
    return {
        "GEMMASERVE_STATE_DIR": str(tmp_path / "state"),
        "GEMMASERVE_AWS_ENDPOINT_URL": moto_server_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }


def test_stdio_server_lists_calls_errors_and_reports_progress(
    tmp_path: Path, moto_server_url: str, aws_cli_env: Any
) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gemmaserve", "mcp"], env=_server_env(tmp_path, moto_server_url)
    )
    progress = ProgressLog()
    with start_mock_thread(MockConfig(ttft_s=0.002, itl_s=0.0005, natural_tokens=8)) as mock:

        async def session() -> dict[str, Any]:
            async with Client(params, read_timeout_seconds=60) as client:
                assert client.server_info is not None and client.server_info.name == "gemmaserve"
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                plan = await client.call_tool("plan", {"model": ["e2b"], "gpu": ["t4"]})
                unknown = await client.call_tool("plan", {"gpu": ["v100"]})
                status = await client.call_tool("sagemaker_status", {"endpoint_name": "nothing-here"})
                measured = await client.call_tool(
                    "bench_measure",
                    {
                        "targets": [mock.url],
                        "out": str(tmp_path / "bench"),
                        "decode_calls": 1,
                        "decode_short": 2,
                        "decode_long": 6,
                        "concurrency": [1],
                        "repeats": 1,
                        "input_tokens": 4,
                        "output_tokens": 4,
                        "quality_set": "none",
                        "warmup": 0,
                        "max_client_lag_ms": 0,  # the guard's verdict on this machine's load is not under test
                    },
                    progress_callback=progress,
                )
                return {"tools": tools, "plan": plan, "unknown": unknown, "status": status, "measured": measured}

        results = anyio.run(session)

    tools = results["tools"]
    assert {"plan", "env", "sagemaker_deploy", "sagemaker_delete", "bench_measure"} <= set(tools)
    for name in DESTRUCTIVE_TOOLS:
        assert tools[name].annotations.destructive_hint is True
        assert tools[name].input_schema["properties"]["confirm"]["default"] is False
    assert tools["plan"].annotations.read_only_hint is True
    assert results["plan"].structured_content == cli_json("plan", "--model", "e2b", "--gpu", "t4")
    assert error_details(results["unknown"])["error"] == "UnknownName"
    assert results["status"].structured_content["status"] == "NotFound"
    assert results["measured"].structured_content["status"] == "success"
    assert progress.updates and progress.updates[-1][0] == progress.updates[-1][1]


def test_stdout_carries_only_json_rpc(tmp_path: Path, moto_server_url: str) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "env", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "plan", "arguments": {"model": ["x"]}}},
    ]
    env = {**os.environ, **_server_env(tmp_path, moto_server_url)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gemmaserve", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: list[dict[str, Any]] = []
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            if "id" in request:  # wait for its answer: closing stdin early would cancel it
                while True:
                    line = process.stdout.readline()
                    assert line, process.stderr.read() if process.stderr else "server exited"
                    replies.append(json.loads(line))  # every line on stdout is one JSON-RPC message
                    if replies[-1].get("id") == request["id"]:
                        break
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == ""
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        if process.stderr:
            process.stderr.close()
    by_id = {reply["id"]: reply for reply in replies if "id" in reply}
    assert by_id[1]["result"]["serverInfo"]["name"] == "gemmaserve"
    assert by_id[2]["result"]["structuredContent"]["gemmaserve"] == cli_json("env")["gemmaserve"]
    assert by_id[3]["result"]["isError"] is True


def test_cancellation_over_stdio_reaches_the_server(tmp_path: Path, moto_server_url: str) -> None:
    """The client's notifications/cancelled stops a running measurement; the server keeps serving."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gemmaserve", "mcp"], env=_server_env(tmp_path, moto_server_url)
    )
    events: list[float] = []
    result_file = tmp_path / "bench" / "slow.json"

    def interrupted() -> bool:
        return result_file.exists() and json.loads(result_file.read_text())["completeness"]["interrupted"] is True

    with start_mock_thread(MockConfig(ttft_s=0.01, itl_s=0.01, natural_tokens=8)) as mock:

        async def session() -> bool:
            async with Client(params, read_timeout_seconds=60) as client:
                async with anyio.create_task_group() as group:

                    async def cancel_after_two(progress: float, total: float | None, message: str | None) -> None:
                        events.append(progress)
                        if len(events) == 2:
                            group.cancel_scope.cancel()

                    group.start_soon(
                        lambda: client.call_tool(
                            "bench_measure",
                            {
                                "targets": [mock.url],
                                "out": str(tmp_path / "bench"),
                                "label": ["slow"],
                                "decode_calls": 3,
                                "decode_short": 4,
                                "decode_long": 40,
                                "concurrency": [1, 2],
                                "repeats": 2,
                                "output_tokens": 30,
                                "quality_set": "none",
                                "warmup": 0,
                                "max_client_lag_ms": 0,
                            },
                            progress_callback=cancel_after_two,
                        )
                    )
                with anyio.fail_after(20):
                    while not interrupted():
                        await anyio.sleep(0.05)
                return not (await client.call_tool("env", {})).is_error

        still_serving = anyio.run(session)

    # Sent at the second progress event; one already on its way may still arrive (more on a busy machine).
    assert len(events) >= 2
    assert interrupted()
    completeness = json.loads(result_file.read_text())["completeness"]
    assert completeness["finished"] != completeness["planned"]  # it stopped early
    assert still_serving
