"""MCP tools over :mod:`gemmaserve.serve.api`: start, status, stop and logs of vLLM on this host.

Each tool takes its action's request model (:mod:`gemmaserve.serve.requests`), as the CLI does;
``serve_stop`` needs ``confirm=true``.

``serve_start`` enforces the library's interlock (doctor must pass now, and on a pre-Ampere
GPU the Turing clamp must be verified), relays the engine's start-up stage as progress, and
hands the library the request's cancel token: cancelled while it waits, the library stops the
server it launched (as on Ctrl-C in the CLI).
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result
from gemmaserve.serve.launcher import StartResult
from gemmaserve.serve.requests import LogsRequest, StartRequest, StatusRequest, StopRequest
from gemmaserve.serve.supervisor import ServeLogs, ServerStatus, StopResult


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(StartRequest, title="Start vLLM on this host", result=StartResult)
    async def serve_start(request: StartRequest, ctx: Context) -> CallToolResult:
        """Plan once, check that plan and start `vllm serve` with its flags, detached, logging to a file.

        Refuses (InterlockRefused, with every reason and fix) unless doctor passes right now and, on a
        T4 or other pre-Ampere GPU, the Turing clamp is verified. The plan follows `vllm`, else the
        target interpreter's installed vLLM, else the newest; it is in the result (`plan`). Same as
        `gemmaserve serve start --json`. Cancelling while it waits stops the server it launched.
        """
        from dataclasses import replace

        from gemmaserve.serve import api

        seams = deps.launch_seams()
        if deps.sleep is not None:  # a test's scripted sleep; the library checks the token around it
            seams = replace(seams, sleep=deps.sleep)
        work = partial(
            api.start, request, seams=seams, doctor_sources=deps.doctor_sources, vllm_command=deps.vllm_command
        )
        return typed_result(await run_blocking(ctx, work))

    @tools.action(StatusRequest, title="Status of vLLM on this host", result=ServerStatus)
    def serve_status(request: StatusRequest) -> CallToolResult:
        """starting / compiling / loading / serving / dead, pid, uptime, engine facts from the log, OOM hint."""
        from gemmaserve.serve import api

        status = api.status(request)
        assert isinstance(status, ServerStatus)  # all=false: one server
        return typed_result(status)

    @tools.action(StopRequest, title="Stop vLLM on this host", result=StopResult)
    def serve_stop(request: StopRequest) -> CallToolResult:
        """Stop the server gemmaserve started on this port (its whole process group); a reused pid is never signalled."""
        from gemmaserve.serve import api

        return typed_result(api.stop(request))

    @tools.action(LogsRequest, title="vLLM engine log", result=ServeLogs)
    def serve_logs(request: LogsRequest) -> CallToolResult:
        """The last lines of the server's engine log (call again for new lines)."""
        from gemmaserve.serve import api

        return typed_result(api.logs(request))
