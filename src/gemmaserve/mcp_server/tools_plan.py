"""MCP tools that need no host and no cloud: ``plan`` (the capacity and cost table) and ``env`` (versions).

Same functions as ``gemmaserve plan`` and ``gemmaserve env``; offline on the packaged catalog.
"""

from __future__ import annotations

from mcp_types import CallToolResult

from gemmaserve.envinfo import EnvReport, EnvRequest, collect_env
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, typed_result
from gemmaserve.plan import PlanRequest, PlanTable, plan


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(PlanRequest, title="Plan capacity and cost", result=PlanTable)
    def plan_tool(request: PlanRequest) -> CallToolResult:
        """Which Gemma 4 model, encoding and GPU fit, with KV pool, concurrency, host RAM, swap, disk and cost.

        Offline, on the built-in catalog (same as `gemmaserve plan --json`). Each row's verdict is
        fits / fits-with-swap / does-not-fit / not-servable, with the binding term and the exact
        `vllm serve` flags. Start here before any deploy.
        """
        return typed_result(plan(request))

    @tools.action(EnvRequest, title="Versions for bug reports", result=EnvReport)
    def env(request: EnvRequest) -> CallToolResult:
        """Versions of gemmaserve, Python and the packages it uses (same as `gemmaserve env --json`)."""
        return typed_result(collect_env(request))
