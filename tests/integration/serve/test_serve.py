"""The launcher and supervisor against a real dummy vLLM process on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from gemmaserve.engine_log import EngineStage
from gemmaserve.errors import (
    InterlockRefused,
    ServerAlreadyRunning,
    ServerDied,
    ServerNotRunning,
)
from gemmaserve.findings import Finding, Status
from gemmaserve.serve import records
from gemmaserve.serve.launcher import ClampVerdict, vllm_serve_argv
from gemmaserve.serve.supervisor import (
    ServerState,
    read_logs,
    server_status,
    stop_server,
)
from tests.support.serve.fixtures import Spawned, free_port, report, seams_for, start_dummy

PLAN_ARGS = [
    "google/gemma-4-E2B-it-qat-w4a16-ct",
    "--dtype",
    "float16",
    "--max-model-len",
    "8192",
]


def start(
    port: int,
    spawned: Spawned,
    *,
    mode: str = "ok",
    gpu_index: int = 0,
    gpu_sm: int | None = 89,
    **kwargs: object,
):  # type: ignore[no-untyped-def]
    seams = seams_for(report(), spawned, mode=mode)
    return start_dummy(PLAN_ARGS, seams, port, model="gemma-4-e2b", gpu_sm=gpu_sm, gpu_index=gpu_index, **kwargs)


def no_oom(pid: int) -> None:
    pass


def test_argv_carries_plan_flags_name_host_and_port() -> None:
    argv = vllm_serve_argv(
        ["vllm"],
        PLAN_ARGS,
        port=8001,
        served_model_name="e2b",
        extra_args=["--enforce-eager"],
    )
    assert argv == [
        "vllm",
        "serve",
        *PLAN_ARGS,
        "--served-model-name",
        "e2b",
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
        "--enforce-eager",
    ]


def test_start_waits_for_health_then_status_serving_and_stop(port: int, spawned: Spawned) -> None:
    result = start(port, spawned)
    assert result.ready and result.stage is EngineStage.SERVING
    record = records.load_record(port)
    assert record is not None and record.pid == spawned.processes[0].pid
    assert record.start_ticks == records.process_start_ticks(record.pid)
    status = server_status(port)
    assert status.state is ServerState.SERVING and status.healthy
    assert status.engine.kv_cache_tokens == 867_999 and status.engine.max_concurrency == 105.96
    assert status.engine.vllm_version == "0.29.0"
    stopped = stop_server(port, timeout_s=10)
    assert stopped.was_running and stopped.signal_sent == "SIGTERM"
    assert spawned.processes[0].wait(timeout=5) is not None
    assert records.load_record(port) is None


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (
            Finding(
                check="host.memory",
                title="RAM",
                status=Status.FAIL,
                detail="7.0 GiB; needs 13.3 GiB",
                fix="Add a 8 GiB swapfile: sudo fallocate -l 8G /swapfile",
            ),
            "8 GiB swapfile",
        ),
        (
            Finding(
                check="vllm.import",
                title="vLLM",
                status=Status.FAIL,
                detail="ImportError: libcudart.so.13",
                fix="pip install --force-reinstall torch==2.13.0",
            ),
            "libcudart.so.13",
        ),
        (
            Finding(
                check="torch.fp16_matmul",
                title="fp16",
                status=Status.UNKNOWN,
                detail="not checked",
            ),
            "torch.fp16_matmul is unknown",
        ),
    ],
)
def test_start_refuses_when_doctor_did_not_pass(port: int, spawned: Spawned, check: Finding, expected: str) -> None:
    with pytest.raises(InterlockRefused) as refused:
        start_dummy(PLAN_ARGS, seams_for(report(check), spawned), port)
    assert any(expected in reason for reason in refused.value.fields["reasons"])
    assert spawned.processes == [] and records.load_record(port) is None


def test_start_refuses_on_turing_without_a_verified_clamp(port: int, spawned: Spawned) -> None:
    with pytest.raises(InterlockRefused) as refused:
        start_dummy(PLAN_ARGS, seams_for(report(), spawned), port, gpu_sm=75)
    (reason,) = refused.value.fields["reasons"]
    assert "sm_75 is pre-Ampere" in reason and "gemmaserve turing apply" in reason
    assert spawned.processes == []


def test_start_on_turing_with_a_verified_clamp_goes(port: int, spawned: Spawned) -> None:
    seams = seams_for(report(), spawned, clamp=ClampVerdict(verified=True, evidence="clamp present"))
    result = start_dummy(PLAN_ARGS, seams, port, gpu_sm=75)
    assert result.ready
    stop_server(port, timeout_s=10)


def test_start_refuses_when_the_gpu_is_unknown(port: int, spawned: Spawned) -> None:
    with pytest.raises(InterlockRefused, match="compute capability is unknown"):
        start_dummy(PLAN_ARGS, seams_for(report(), spawned), port, gpu_sm=None)


def test_the_default_clamp_verifier_asks_the_turing_status_and_refuses_here() -> None:
    import sys

    from gemmaserve.serve.launcher import verify_turing_clamp

    # This machine has no GPU and no vLLM: the clamp cannot be verified.
    verdict = verify_turing_clamp(sys.executable)
    assert verdict.verified is False
    assert verdict.evidence.startswith("delivery none")


def test_lock_keeps_a_second_server_off_the_port_and_the_gpu(port: int, spawned: Spawned) -> None:
    start(port, spawned)
    with pytest.raises(ServerAlreadyRunning, match="port"):
        start(port, spawned)
    with pytest.raises(ServerAlreadyRunning, match="gpu 0"):
        start(free_port(), spawned, gpu_index=0)
    assert len(spawned.processes) == 1
    stop_server(port, timeout_s=10)
    spawned.processes[0].wait(timeout=5)
    # the locks died with the server: the same port and GPU can be used again
    assert start(port, spawned).ready
    stop_server(port, timeout_s=10)


def test_crash_before_health_raises_server_died_with_the_fatal_line(port: int, spawned: Spawned) -> None:
    with pytest.raises(ServerDied) as died:
        start(port, spawned, mode="crash")
    assert died.value.fields["returncode"] == 1
    assert "OutOfResources" in died.value.message
    spawned.processes[0].wait(timeout=5)
    status = server_status(
        port,
        runner=lambda argv, timeout: (_ for _ in ()).throw(FileNotFoundError(argv[0])),
    )
    assert status.state is ServerState.DEAD
    assert status.engine.stage is EngineStage.FAILED
    assert status.oom_hint is not None and status.oom_hint.startswith("Could not check for an OOM kill")
    assert any("OutOfResources" in line for line in status.last_lines)


def test_status_while_loading_then_compiling(port: int, spawned: Spawned) -> None:
    seams = seams_for(report(), spawned, mode="never-ready", ready_after_s=0.4)
    result = start_dummy(PLAN_ARGS, seams, port, wait=False)
    assert not result.ready
    seen = set()
    # Until the state shows (never-ready stays compiling); the suite's timeout bounds a hang, not a clock here.
    while ServerState.COMPILING not in seen:
        seen.add(server_status(port).state)
        time.sleep(0.02)
    assert ServerState.COMPILING in seen
    assert seen <= {ServerState.STARTING, ServerState.LOADING, ServerState.COMPILING}
    stop_server(port, timeout_s=10)


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(port: int, spawned: Spawned) -> None:
    seams = seams_for(report(), spawned, mode="ignore-term")
    start_dummy(PLAN_ARGS, seams, port)
    result = stop_server(port, timeout_s=0.5)
    assert result.signal_sent == "SIGKILL" and result.was_running
    assert result.waited_s >= 0.5
    assert spawned.processes[0].wait(timeout=5) == -9


def test_stop_never_signals_a_reused_pid(port: int, spawned: Spawned) -> None:
    start(port, spawned)
    record = records.load_record(port)
    assert record is not None
    # the same pid, but a different start time: what the record would see after pid reuse
    records.save_record(record.model_copy(update={"start_ticks": record.start_ticks - 1}))
    sent: list[tuple[int, int]] = []
    result = stop_server(port, kill_group=lambda pid, sig: sent.append((pid, sig)))
    assert sent == [] and not result.was_running
    assert "different process" in result.note
    assert spawned.processes[0].poll() is None  # still running: it was not ours to kill
    assert records.load_record(port) is None


def test_status_stop_and_logs_without_a_server(port: int) -> None:
    with pytest.raises(ServerNotRunning):
        server_status(port)
    with pytest.raises(ServerNotRunning):
        stop_server(port)
    with pytest.raises(ServerNotRunning):
        read_logs(port)


def test_logs_tail(port: int, spawned: Spawned) -> None:
    start(port, spawned)
    lines = read_logs(port, lines=2)
    assert len(lines) == 2 and "Application startup complete" in lines[-1]
    stop_server(port, timeout_s=10)


def test_oom_hint_finds_the_kill_of_this_pid_in_dmesg() -> None:
    from gemmaserve.host.runner import CommandResult
    from gemmaserve.serve.supervisor import oom_kill_hint

    dmesg = (
        "[Tue Dec  2 10:05:11 2026] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"
        "[Tue Dec  2 10:05:11 2026] Out of memory: Killed process 4242 (python3) total-vm:18876532kB, "
        "anon-rss:7012344kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:14652kB oom_score_adj:0\n"
    )

    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        return CommandResult(argv=argv, returncode=0, stdout=dmesg, stderr="")

    assert "Killed process 4242" in oom_kill_hint(4242, runner)
    assert oom_kill_hint(4243, runner).startswith("No OOM kill of pid 4243, but the kernel killed others")


def test_oom_hint_when_dmesg_is_restricted() -> None:
    from gemmaserve.host.runner import CommandResult
    from gemmaserve.serve.supervisor import oom_kill_hint

    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        return CommandResult(
            argv=argv,
            returncode=1,
            stdout="",
            stderr="dmesg: read kernel buffer failed: Operation not permitted",
        )

    assert oom_kill_hint(1, runner).startswith("Could not check for an OOM kill")


def test_a_missing_vllm_binary_is_a_serve_error_and_frees_the_locks(port: int, spawned: Spawned, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gemmaserve.errors import ServeError

    with pytest.raises(ServeError, match="Could not run"):
        start_dummy(PLAN_ARGS, seams_for(report(), spawned), port, vllm_command=[str(tmp_path / "vllm")])
    assert records.load_record(port) is None
    assert start(port, spawned).ready  # the port and GPU locks were released
    stop_server(port, timeout_s=10)
