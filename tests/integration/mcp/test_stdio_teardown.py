"""The MCP client goes away mid-deploy: the server tears the deploy down before it exits, and says what is left.

``gemmaserve mcp`` runs as a real process (:mod:`tests.support.mcp.stdio_deploy_server`) against moto's server behind
:class:`~tests.support.sagemaker.moto_proxy.SageMakerProxy`, which keeps the new endpoint ``Creating`` so the deploy is
waiting when its session ends: stdin closed (the agent host closed the session), or SIGTERM, or SIGHUP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gemmaserve.state import state_dir
from tests.support.mcp.fixtures import REGION
from tests.support.sagemaker.helpers import DERIVED_T4, make_role, record_derived_image
from tests.support.sagemaker.moto_proxy import SageMakerProxy, sagemaker_proxy


@pytest.fixture
def proxy(moto_server_url: str, moto_factory: Any) -> Iterator[SageMakerProxy]:
    with sagemaker_proxy(moto_server_url) as proxy:
        yield proxy


class McpProcess:
    """One ``gemmaserve mcp`` process spoken to in raw JSON-RPC lines (stdout is read on a thread)."""

    def __init__(self, aws_url: str, *, ignore_sighup: bool = False) -> None:
        env = {
            **os.environ,
            "GEMMASERVE_STATE_DIR": str(state_dir()),
            "GEMMASERVE_AWS_ENDPOINT_URL": aws_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp.stdio_deploy_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            # what nohup does: the program starts with SIGHUP ignored
            preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if ignore_sighup else None,
        )
        self.messages: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.stderr_ended = False
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.send({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        })  # fmt: skip
        self.wait_for(lambda m: m.get("id") == 1)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.messages.append(json.loads(line))
                self.changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self.changed:
                self.stderr.append(line)
                self.changed.notify_all()
        with self.changed:
            self.stderr_ended = True
            self.changed.notify_all()

    def said(self, text: str, timeout: float = 60) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: any(text in line for line in self.stderr), timeout), self.stderr

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def wait_for(self, match: Any, timeout: float = 60) -> dict[str, Any]:
        with self.changed:
            found = self.changed.wait_for(lambda: next((m for m in self.messages if match(m)), None), timeout)
        assert found, f"no such message; stderr so far is in the process; got {self.messages}"
        return found  # type: ignore[no-any-return]

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        """The exit code and stderr; a process still running after ``timeout`` is killed and fails the test."""
        try:
            code: int | None = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            self.process.kill()
            self.process.wait()
        with self.changed:
            self.changed.wait_for(lambda: self.stderr_ended, 10)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
        stderr = "".join(self.stderr)
        assert code is not None, f"still running {timeout} s after the session ended:\n{stderr}"
        return code, stderr


def _start_deploy(server: McpProcess, role: str, name: str) -> None:
    server.send({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "sagemaker_deploy",
            "arguments": {
                "model": "gemma-4-e2b", "instance": ["ml.g4dn.xlarge"], "role_arn": role, "endpoint_name": name,
                "image": DERIVED_T4, "region": REGION, "list_prices": True, "confirm": True,
            },
            "_meta": {"progressToken": "deploy"},
        },
    })  # fmt: skip


def _progress(text: str) -> Any:
    return lambda m: m.get("method") == "notifications/progress" and text in (m["params"].get("message") or "")


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM", "SIGHUP"])
def test_the_session_ending_mid_wait_tears_the_deploy_down(
    ending: str, proxy: SageMakerProxy, moto_factory: Any
) -> None:
    record_derived_image(DERIVED_T4)
    role = make_role(moto_factory("iam", REGION))
    name = "mcp-gone-" + ending.split()[0].lower()
    proxy.creating(name)  # the wait polls while SageMaker says Creating
    server = McpProcess(proxy.url)
    _start_deploy(server, role, name)
    server.wait_for(_progress(f"Created endpoint for {name}"))
    if ending == "stdin closed":
        assert server.process.stdin is not None
        server.process.stdin.close()
    else:
        server.process.send_signal(getattr(signal, ending))
    # Once the deploy is cancelled its endpoint comes up (a Creating one cannot be deleted: that wait is
    # tested in tests/sagemaker).
    server.said("stopping 1 running tool call")
    proxy.finish_creating(name)
    code, stderr = server.finish()

    sm = moto_factory("sagemaker", REGION)
    assert sm.list_endpoints()["Endpoints"] == [], stderr
    assert sm.list_endpoint_configs()["EndpointConfigs"] == [], stderr
    assert sm.list_models()["Models"] == [], stderr
    assert f"endpoint:{name}" in stderr and "still there: nothing" in stderr, stderr
    assert code != 0 if ending != "stdin closed" else code == 0, (code, stderr)


def test_under_nohup_sighup_leaves_the_deploy_running(proxy: SageMakerProxy, moto_factory: Any) -> None:
    record_derived_image(DERIVED_T4)
    role = make_role(moto_factory("iam", REGION))
    name = "mcp-nohup"
    proxy.creating(name)
    server = McpProcess(proxy.url, ignore_sighup=True)
    _start_deploy(server, role, name)
    server.wait_for(_progress(f"Created endpoint for {name}"))
    server.process.send_signal(signal.SIGHUP)
    server.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    server.wait_for(lambda m: m.get("id") == 3)  # answered after the signal: the server is still serving
    assert server.process.poll() is None
    assert not any("SIGHUP" in line for line in server.stderr), server.stderr
    assert server.process.stdin is not None
    server.process.stdin.close()  # the session ends: the deploy, still waiting, is torn down only now
    server.said("stopping 1 running tool call")
    proxy.finish_creating(name)
    code, stderr = server.finish()
    assert code == 0 and "still there: nothing" in stderr, stderr


def test_a_third_stop_signal_abandons_the_cleanup_and_names_what_ran(proxy: SageMakerProxy, moto_factory: Any) -> None:
    record_derived_image(DERIVED_T4)
    role = make_role(moto_factory("iam", REGION))
    name = "mcp-abandoned"
    proxy.creating(name)  # stays Creating: the teardown waits to delete it
    server = McpProcess(proxy.url)
    _start_deploy(server, role, name)
    server.wait_for(_progress(f"Created endpoint for {name}"))
    server.process.send_signal(signal.SIGTERM)
    server.said("stopping 1 running tool call")
    server.process.send_signal(signal.SIGTERM)
    server.said("send it once more to abandon")
    server.process.send_signal(signal.SIGTERM)
    code, stderr = server.finish(timeout=30)
    assert code == 128 + signal.SIGTERM, stderr
    assert (
        f"Cleanup abandoned (SIGTERM). Still running, and maybe leaving resources behind: sagemaker_deploy {name}"
        in (stderr)
    )
