"""The plan-driven entry points for serving on this host; CLI and MCP call these and nothing else.

``start`` plans the deployment for the catalog GPU doctor found, runs doctor as the
interlock and launches ``vllm serve`` with the plan's flags (the catalog checkpoint, or
``checkpoint``: a local directory or another repo of the same model). ``status``/``stop``/
``logs`` are re-exported from the supervisor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gemmaserve.host.doctor import (
    DEFAULT_ENCODING,
    DEFAULT_MODEL,
    DoctorSources,
    run_doctor,
)
from gemmaserve.serve.launcher import (
    DEFAULT_PORT,
    READY_TIMEOUT_S,
    LaunchSeams,
    ProgressSink,
    StartResult,
    start_server,
)
from gemmaserve.serve.supervisor import (
    list_statuses,
    read_logs,
    server_status,
    stop_server,
)

__all__ = ["list_statuses", "read_logs", "server_status", "start", "stop_server"]


def launch_args(
    model: str,
    encoding: str,
    gpu: str,
    *,
    checkpoint: str | None = None,
    language_model_only: bool = False,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
) -> list[str]:
    """``MODEL <plan flags>`` for vLLM: the plan's, with ``checkpoint`` as the model when given.

    Raises:
        UnknownName / UsageError: from the plan.
    """
    from gemmaserve.plan import plan_deployment

    row = plan_deployment(
        model,
        encoding,
        gpu,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        language_model_only=language_model_only,
    )
    return [checkpoint, *row.vllm_args[1:]] if checkpoint else list(row.vllm_args)


def start(
    *,
    model: str = DEFAULT_MODEL,
    encoding: str = DEFAULT_ENCODING,
    python: str | None = None,
    gpu: str | None = None,
    port: int = DEFAULT_PORT,
    gpu_index: int = 0,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    served_model_name: str | None = None,
    checkpoint: str | None = None,
    language_model_only: bool = False,
    extra_args: Sequence[str] = (),
    wait: bool = True,
    ready_timeout_s: float | None = None,
    on_progress: ProgressSink | None = None,
    seams: LaunchSeams | None = None,
    doctor_sources: DoctorSources | None = None,
    vllm_command: Sequence[str] | None = None,
) -> StartResult:
    """Plan, check (doctor + Turing clamp), and start ``vllm serve`` for ``model``/``encoding``.

    Args:
        checkpoint: what vLLM loads instead of the catalog's repo for ``encoding`` (a local
            directory or a repo id); the plan's flags still come from ``model``/``encoding``.
        language_model_only: vLLM's ``--language-model-only`` (no vision or audio tower), planned.
        extra_args: passed to vLLM unchanged, after the plan's flags (``--load-format dummy``, …).

    Raises:
        UnknownName / UsageError: bad names or numbers (exit 2), before anything runs.
        InterlockRefused: with ``reasons``, each failed precondition and its fix.
        ServerAlreadyRunning, ServerDied: see ``launcher.start_server``.
    """
    from gemmaserve.catalog import resolve_gpu, resolve_model

    report = run_doctor(
        python,
        model=model,
        encoding=encoding,
        gpu=gpu,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        sources=doctor_sources,
    )
    gpu_sm = resolve_gpu(report.gpu).sm if report.gpu else None
    # Host-side flags do not depend on the GPU; an unknown GPU is refused by the interlock anyway.
    vllm_args = launch_args(
        model,
        encoding,
        report.gpu or "l4",
        checkpoint=checkpoint,
        language_model_only=language_model_only,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
    )
    launch = replace(seams, doctor=lambda: report) if seams else LaunchSeams(doctor=lambda: report)
    return start_server(
        vllm_args,
        model=resolve_model(model).key,
        seams=launch,
        gpu_sm=gpu_sm,
        vllm_command=vllm_command,
        port=port,
        gpu_index=gpu_index,
        served_model_name=served_model_name,
        extra_args=extra_args,
        wait=wait,
        ready_timeout_s=ready_timeout_s if ready_timeout_s is not None else READY_TIMEOUT_S,
        on_progress=on_progress,
    )
