"""Serve fixtures: a free port, a passing/failing doctor report, and the dummy vLLM command to start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.findings import Finding, Status
from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.serve.launcher import ClampVerdict, LaunchSeams, ServedPlan, StartResult, start_server
from gemmaserve.serve.requests import StartRequest

DUMMY = Path(__file__).with_name("dummy_vllm.py")
DUMMY_COMMAND = [sys.executable, str(DUMMY)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def report(*checks: Finding) -> DoctorReport:
    default = (
        Finding(
            check="gpu.driver",
            title="GPU",
            status=Status.OK,
            detail="GPU 0: NVIDIA L4, sm_89",
        ),
    )
    return DoctorReport(
        python=sys.executable,
        model="gemma-4-e2b",
        encoding="qat-w4a16",
        gpu="l4",
        checks=list(checks or default),
    )


def seams_for(
    doctor_report: DoctorReport,
    spawned: Spawned,
    *,
    mode: str = "ok",
    clamp: ClampVerdict | None = None,
    ready_after_s: float = 0.4,
) -> LaunchSeams:
    env = {**os.environ, "DUMMY_MODE": mode, "DUMMY_READY_AFTER_S": str(ready_after_s)}
    return LaunchSeams(
        doctor=lambda: doctor_report,
        clamp=lambda _python: clamp or ClampVerdict(verified=False, evidence="not verified"),
        env=env,
        popen=spawned,
        sleep=lambda _s: time.sleep(0.05),
    )


def start_dummy(
    vllm_args: Sequence[str],
    seams: LaunchSeams,
    port: int,
    *,
    model: str = "m",
    gpu_sm: int | None = 89,
    vllm_command: Sequence[str] = DUMMY_COMMAND,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    **request_fields: Any,
) -> StartResult:
    """start_server() on the dummy vLLM command (unless ``vllm_command`` names another); the other keywords are
    the start request's fields (``timeout`` 20 s unless given)."""
    request = StartRequest(port=port, **{"timeout": 20, **request_fields})
    served = ServedPlan(vllm_args=list(vllm_args), model=model, gpu_sm=gpu_sm)
    return start_server(served, request, replace(seams, vllm_command=vllm_command), progress=progress, cancel=cancel)


@pytest.fixture
def port() -> int:
    return free_port()


class Spawned:
    """A Popen factory that remembers what it started, so teardown can kill and reap it."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process: subprocess.Popen[bytes] = subprocess.Popen(*args, **kwargs)
        self.processes.append(process)
        return process


@pytest.fixture
def spawned() -> Iterator[Spawned]:
    factory = Spawned()
    yield factory
    for process in factory.processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(timeout=10)
