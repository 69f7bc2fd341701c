"""MCP tools over :mod:`gemmaserve.serve.api`: start, status, stop and logs of vLLM on this host.

``serve_start`` enforces the library's interlock (doctor must pass now, and on a pre-Ampere
GPU the Turing clamp must be verified), reports the engine's start-up stage as progress, and
if the request is cancelled while it waits, stops the server it launched.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from gemmaserve.errors import ServerNotRunning
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    READ_ONLY,
    Cancellation,
    Confirm,
    OperationCancelled,
    ProgressSink,
    ToolSet,
    require_confirmation,
    run_blocking,
    translate_errors,
    typed_result,
)
from gemmaserve.serve.launcher import DEFAULT_PORT, StartResult
from gemmaserve.serve.supervisor import ServerStatus, StopResult

START = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
# Ends a running vLLM process (and the requests it is serving).
STOP = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Port = Annotated[int, Field(ge=1, le=65535, description="The server's port.")]


class ServeLogs(BaseModel):
    """The last lines of the engine log (the CLI prints the lines themselves)."""

    port: int
    lines: list[str]


def summarise_status(status: ServerStatus) -> str:
    text = f"vLLM on port {status.port} (pid {status.pid}, {status.served_model_name}): {status.state.value}"
    if status.oom_hint:
        text += f". {status.oom_hint}"
    return text


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="serve_start", title="Start vLLM on this host", annotations=START)
    @translate_errors
    async def serve_start(
        ctx: Context,
        model: Annotated[str, Field(description="Catalog model, e.g. gemma-4-e2b.")] = "gemma-4-e2b",
        encoding: str = "qat-w4a16",
        python: Annotated[str | None, Field(description="The interpreter vLLM is installed under.")] = None,
        gpu: Annotated[str | None, Field(description="Catalog GPU, when nvidia-smi's is not in the catalog.")] = None,
        port: Port = DEFAULT_PORT,
        gpu_index: Annotated[int, Field(ge=0)] = 0,
        max_model_len: Annotated[int, Field(ge=16)] = 8192,
        gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.9,
        max_num_seqs: Annotated[int | None, Field(ge=1)] = None,
        served_model_name: str | None = None,
        checkpoint: Annotated[
            str | None,
            Field(description="A local directory or repo vLLM loads instead of the catalog's repo for the encoding."),
        ] = None,
        language_model_only: Annotated[
            bool, Field(description="vLLM's --language-model-only: no vision or audio tower (planned so).")
        ] = False,
        extra_args: Annotated[list[str] | None, Field(description="Extra `vllm serve` flag tokens.")] = None,
        wait: Annotated[bool, Field(description="Wait until /health answers (progress per start-up stage).")] = True,
        ready_timeout_s: Annotated[float | None, Field(gt=0)] = None,
    ) -> Annotated[CallToolResult, StartResult]:
        """Plan, check and start `vllm serve` with the plan's flags, detached, logging to a file.

        Refuses (InterlockRefused, with every reason and fix) unless doctor passes right now and, on a
        T4 or other pre-Ampere GPU, the Turing clamp is verified. Same as `gemmaserve serve start --json`.
        Cancelling while it waits stops the server it launched.
        """
        from dataclasses import replace

        from gemmaserve.serve import api
        from gemmaserve.serve.supervisor import stop_server

        def work(cancellation: Cancellation, report: ProgressSink) -> StartResult:
            seams = replace(deps.launch_seams(), sleep=deps.sleeper(cancellation))

            def progress(stage: object, waited_s: float) -> None:
                report(waited_s, None, f"{getattr(stage, 'value', stage)} after {waited_s:.0f} s")

            try:
                return api.start(
                    model=model,
                    encoding=encoding,
                    python=python,
                    gpu=gpu,
                    port=port,
                    gpu_index=gpu_index,
                    max_model_len=max_model_len,
                    gpu_memory_utilization=gpu_memory_utilization,
                    max_num_seqs=max_num_seqs,
                    served_model_name=served_model_name,
                    checkpoint=checkpoint,
                    language_model_only=language_model_only,
                    extra_args=extra_args or (),
                    wait=wait,
                    ready_timeout_s=ready_timeout_s,
                    on_progress=progress,
                    seams=seams,
                    doctor_sources=deps.doctor_sources,
                    vllm_command=deps.vllm_command,
                )
            except OperationCancelled:
                # Launched but not yet serving: nothing may be left running behind a cancelled request.
                with contextlib.suppress(ServerNotRunning):
                    stop_server(port)
                raise

        result = await run_blocking(ctx, work)
        state = "serving" if result.ready else f"not ready yet ({result.stage.value})"
        summary = (
            f"vLLM {result.record.served_model_name} on port {result.record.port} (pid {result.record.pid}): "
            f"{state} after {result.waited_s:.0f} s. Log: {result.record.log_path}"
        )
        return typed_result(result, summary)

    @tools.tool(name="serve_status", title="Status of vLLM on this host", annotations=READ_ONLY)
    @translate_errors
    def serve_status(
        port: Port = DEFAULT_PORT, lines: Annotated[int, Field(ge=0, le=1000, description="Log lines to include.")] = 10
    ) -> Annotated[CallToolResult, ServerStatus]:
        """starting / compiling / loading / serving / dead, pid, uptime, engine facts from the log, OOM hint."""
        from gemmaserve.serve import api

        status = api.server_status(port, last_lines=lines)
        return typed_result(status, summarise_status(status))

    @tools.tool(name="serve_stop", title="Stop vLLM on this host", annotations=STOP)
    @translate_errors
    def serve_stop(
        confirm: Confirm,
        port: Port = DEFAULT_PORT,
        timeout_s: Annotated[float, Field(gt=0, description="SIGTERM, then SIGKILL after this long.")] = 30.0,
    ) -> Annotated[CallToolResult, StopResult]:
        """Stop the server gemmaserve started on this port (its whole process group); a reused pid is never signalled."""
        from gemmaserve.serve import api

        require_confirmation(confirm, f"stop the vLLM server on port {port}")
        result = api.stop_server(port, timeout_s=timeout_s)
        return typed_result(result, f"Port {result.port}, pid {result.pid}: {result.note}")

    @tools.tool(name="serve_logs", title="vLLM engine log", annotations=READ_ONLY)
    @translate_errors
    def serve_logs(
        port: Port = DEFAULT_PORT, lines: Annotated[int, Field(ge=1, le=10000)] = 100
    ) -> Annotated[CallToolResult, ServeLogs]:
        """The last lines of the server's engine log."""
        from gemmaserve.serve import api

        tail = api.read_logs(port, lines)
        return typed_result(ServeLogs(port=port, lines=tail), "\n".join(tail) or "(empty log)")
