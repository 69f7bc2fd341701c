"""serve_start / status / logs / stop on a scripted host with a fake ``vllm serve`` on 127.0.0.1:
the interlock refuses a T4 without a verified clamp, an L4 starts, and a cancelled start stops its server."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gemmaserve.mcp_server import ServerDeps, build_server
from gemmaserve.serve.launcher import LaunchSeams
from gemmaserve.serve.records import load_record, process_matches
from tests.support.mcp.fake_hosts import fake_vllm_command, scripted_host
from tests.support.mcp.fixtures import (
    ProgressLog,
    call_tool,
    cli_json,
    error_details,
    error_text,
)


class KeptPopen:
    """The real ``subprocess.Popen``, with each object kept so the test reaps it.

    The launcher detaches vLLM and drops its Popen object on purpose (the record tracks the process);
    collected while the child runs, Python would report a ResourceWarning in some later test.
    """

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(*args, **kwargs)
        self.processes.append(process)
        return process

    def reap(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)


@pytest.fixture
def popen() -> Iterator[KeptPopen]:
    kept = KeptPopen()
    yield kept
    kept.reap()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server(tmp_path: Path, gpu: str, popen: KeptPopen) -> tuple[Any, str]:
    sources, python = scripted_host(tmp_path, gpu=gpu)
    launch = LaunchSeams(doctor=lambda: None, popen=popen)  # type: ignore[arg-type,return-value]
    deps = ServerDeps(doctor_sources=sources, vllm_command=fake_vllm_command(tmp_path), launch=launch)
    return build_server(deps), python


def test_t4_without_a_verified_clamp_is_refused_and_nothing_starts(tmp_path: Path, popen: KeptPopen) -> None:
    server, python = _server(tmp_path, "t4", popen)
    port = free_port()
    result = call_tool(server, "serve_start", {"python": python, "port": port, "timeout": 20})
    details = error_details(result)
    assert details["error"] == "InterlockRefused"
    assert any("Turing clamp" in reason for reason in details["reasons"]), details["reasons"]
    assert "Fix:" in error_text(result)
    assert load_record(port) is None
    assert error_details(call_tool(server, "serve_status", {"port": port}))["error"] == "ServerNotRunning"


def test_l4_starts_serves_and_stops_with_confirmation(tmp_path: Path, popen: KeptPopen) -> None:
    server, python = _server(tmp_path, "l4", popen)
    port = free_port()
    progress = ProgressLog()
    started = call_tool(server, "serve_start", {"python": python, "port": port, "timeout": 30}, progress=progress)
    assert not started.is_error, started.content
    assert started.structured_content["ready"] is True  # type: ignore[index]
    try:
        status = call_tool(server, "serve_status", {"port": port})
        assert status.structured_content["state"] == "serving"  # type: ignore[index]
        expected = cli_json("serve", "status", "--port", str(port))
        volatile = {"uptime_s"}
        assert {k: v for k, v in status.structured_content.items() if k not in volatile} == {  # type: ignore[union-attr]
            k: v for k, v in expected.items() if k not in volatile
        }
        logs = call_tool(server, "serve_logs", {"port": port})
        assert any("Model loading took" in line for line in logs.structured_content["lines"])  # type: ignore[index]
        refused = call_tool(server, "serve_stop", {"port": port, "confirm": False})
        assert error_details(refused)["error"] == "ConfirmationRequired"
    finally:
        stopped = call_tool(server, "serve_stop", {"port": port, "confirm": True})
    assert stopped.structured_content["was_running"] is True  # type: ignore[index]
    assert load_record(port) is None


def test_cancelled_start_stops_the_server_it_launched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, popen: KeptPopen
) -> None:
    monkeypatch.setenv("FAKE_VLLM_NEVER_READY", "1")
    server, python = _server(tmp_path, "l4", popen)
    port = free_port()
    records: list[Any] = []

    async def go() -> None:
        async with Client(server) as client, anyio.create_task_group() as group:

            async def cancel_when_waiting(progress: float, total: float | None, message: str | None) -> None:
                record = load_record(port)
                if record is not None and not records:
                    records.append(record)
                    group.cancel_scope.cancel()

            group.start_soon(
                lambda: client.call_tool(
                    "serve_start",
                    {"python": python, "port": port, "timeout": 60},
                    progress_callback=cancel_when_waiting,
                )
            )

    anyio.run(go)
    assert records, "the server never launched"
    # Until it is gone (the stop is under way); the suite's timeout bounds a stop that never ends.
    while process_matches(records[0]):
        time.sleep(0.05)
    assert not process_matches(records[0]), "the launched vLLM is still running after the cancellation"
    assert load_record(port) is None


@contextmanager
def started_on_l4(tmp_path: Path, popen: KeptPopen, **arguments: object) -> Iterator[dict[str, Any]]:
    """serve_start on the scripted L4 host with ``arguments``: its result; the server is stopped on the way out."""
    server, python = _server(tmp_path, "l4", popen)
    port = free_port()
    started = call_tool(server, "serve_start", {"python": python, "port": port, "timeout": 30, **arguments})
    try:
        assert not started.is_error, started.content
        assert started.structured_content is not None
        yield started.structured_content
    finally:
        call_tool(server, "serve_stop", {"port": port, "confirm": True})


def test_start_passes_the_checkpoint_and_language_model_only_to_vllm(tmp_path: Path, popen: KeptPopen) -> None:
    with started_on_l4(tmp_path, popen, checkpoint="/models/e2b", language_model_only=True) as result:
        argv = result["record"]["argv"]
        assert argv[argv.index("serve") + 1] == "/models/e2b" and "--language-model-only" in argv


def test_start_plans_once_for_the_installed_vllm_and_launches_that_rows_flags(tmp_path: Path, popen: KeptPopen) -> None:
    with started_on_l4(tmp_path, popen, max_num_batched_tokens=4096, extra_args=["--seed", "1"]) as result:
        plan = result["plan"]
        assert plan["vllm_version"] == "0.29" and plan["gpu"] == "l4"  # the scripted host's vLLM 0.29.0
        argv = result["record"]["argv"]
        flags = argv[argv.index("serve") + 1 :]
        assert flags[: len(plan["vllm_args"])] == plan["vllm_args"]
        assert flags[flags.index("--max-num-batched-tokens") + 1] == "4096"
        assert flags[-2:] == ["--seed", "1"]


def test_old_and_unknown_arguments_are_rejected_and_cli_only_switches_refused(tmp_path: Path, popen: KeptPopen) -> None:
    server, python = _server(tmp_path, "l4", popen)
    port = free_port()
    old = call_tool(server, "serve_start", {"python": python, "port": port, "ready_timeout_s": 30})
    assert old.is_error and "unknown argument 'ready_timeout_s'" in error_text(old)
    assert load_record(port) is None
    typo = call_tool(server, "serve_stop", {"port": port, "confirm": True, "timeout_s": 5})
    assert typo.is_error and "unknown argument 'timeout_s'" in error_text(typo)
    clash = call_tool(server, "serve_start", {"python": python, "port": port, "extra_args": ["--port", "9"]})
    assert "--port has its own option here" in error_text(clash) and load_record(port) is None
    follow = call_tool(server, "serve_logs", {"port": port, "follow": True})
    assert follow.is_error and "unknown argument 'follow'" in error_text(follow)
    listing = call_tool(server, "serve_status", {"all": True})
    assert listing.is_error and "unknown argument 'all'" in error_text(listing)
