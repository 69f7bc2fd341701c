"""The request-taking entry points for serving on this host; the CLI and the MCP server call these and nothing else.

``start`` plans the deployment once — for the catalog GPU and the vLLM release doctor finds (or
``--gpu``/``--vllm``) — hands that one row to doctor's checks (the interlock) and to the launcher
(the ``vllm serve`` flags, with ``checkpoint`` as the model when given), which reports the engine's
stage as :class:`~gemmaserve.progress.ProgressEvent` values and, cancelled or interrupted while it
waits, stops the server it launched. ``status``/``stop``/``logs`` take their requests to the supervisor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gemmaserve.host.doctor import DoctorSources, diagnose, plan_on_host, probe_host, resolve_target
from gemmaserve.plan import PlanRow
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.serve.launcher import LaunchSeams, ServedPlan, StartResult, start_server
from gemmaserve.serve.requests import LogsRequest, StartRequest, StatusRequest, StopRequest
from gemmaserve.serve.supervisor import (
    ServeLogs,
    ServerList,
    ServerStatus,
    StopResult,
    list_statuses,
    read_logs,
    server_status,
    stop_server,
)

__all__ = [
    "launch_args",
    "list_statuses",
    "logs",
    "read_logs",
    "server_status",
    "start",
    "status",
    "stop",
    "stop_server",
]


def launch_args(row: PlanRow, *, checkpoint: str | None = None) -> list[str]:
    """``MODEL <plan flags>`` for vLLM: the row's, with ``checkpoint`` as the model when given (pure)."""
    return [checkpoint, *row.vllm_args[1:]] if checkpoint else list(row.vllm_args)


def start(
    request: StartRequest,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    seams: LaunchSeams | None = None,
    doctor_sources: DoctorSources | None = None,
    vllm_command: Sequence[str] | None = None,
) -> StartResult:
    """Plan once, check (doctor + Turing clamp) that plan, and start ``vllm serve`` with its flags.

    ``request.extra_args`` go to vLLM unchanged, after the plan's flags (``--load-format dummy``, …).
    While it waits for ``/health``, ``progress`` gets a :class:`~gemmaserve.progress.ProgressEvent` per
    poll (``phase`` the engine's stage, ``done`` the seconds waited, ``total`` ``request.timeout``).

    Raises:
        UnknownName / UsageError: bad names or numbers (exit 2), before anything runs.
        InterlockRefused: with ``reasons``, each failed precondition and its fix.
        ServerAlreadyRunning, ServerDied: see ``launcher.start_server``.
        Cancelled: ``cancel`` was set; the server it launched, if any, is stopped first. ``KeyboardInterrupt``
            (Ctrl-C) propagates after the same clean-up.
    """
    from gemmaserve.catalog import resolve_gpu

    target = resolve_target(request)
    probes = probe_host(request.python, gpu=target.gpu, sources=doctor_sources)
    plan = plan_on_host(request, target, probes)
    report = diagnose(probes, plan, target)
    gpu_sm = resolve_gpu(report.gpu).sm if report.gpu else None
    # No row: doctor's plan checks are unknown, so the interlock refuses; the launcher also refuses empty flags.
    vllm_args = launch_args(plan.row, checkpoint=request.checkpoint) if plan.row else []
    launch = replace(seams or LaunchSeams(doctor=lambda: report), doctor=lambda: report)
    if vllm_command is not None:
        launch = replace(launch, vllm_command=vllm_command)
    served = ServedPlan(vllm_args=vllm_args, model=target.model, gpu_sm=gpu_sm)
    result = start_server(served, request, launch, progress=progress, cancel=cancel)
    return result.model_copy(update={"plan": plan.row})


def status(request: StatusRequest) -> ServerStatus | ServerList:
    """The state of the server on ``request.port``, or (``all``) of every server gemmaserve started here.

    Raises:
        ServerNotRunning: gemmaserve started no server on that port.
    """
    if request.all:
        return ServerList(servers=list_statuses())
    return server_status(request.port, last_lines=request.lines)


def stop(request: StopRequest) -> StopResult:
    """SIGTERM the server's process group, then SIGKILL after ``request.timeout`` seconds."""
    return stop_server(request.port, timeout_s=request.timeout)


def logs(request: LogsRequest) -> ServeLogs:
    """The last ``request.lines`` lines of the server's engine log (following is the terminal's business)."""
    return ServeLogs(port=request.port, lines=read_logs(request.port, request.lines))
