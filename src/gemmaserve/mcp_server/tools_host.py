"""MCP tool over the host probes: ``doctor`` (same request and function as ``gemmaserve doctor``).

Read-only: it reads /proc, runs nvidia-smi and probes the target interpreter in a
subprocess. A failing check is a result (``ok`` false, each check with its fix), not an error.
"""

from __future__ import annotations

from mcp_types import CallToolResult

from gemmaserve.host.doctor import DoctorRequest
from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, typed_result


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(DoctorRequest, title="Check this GPU host", result=DoctorReport)
    def doctor_tool(request: DoctorRequest) -> CallToolResult:
        """GPU, driver, RAM + swap, disk per path, torch build and arch list, fp16 matmul, vLLM import and pin.

        Cheapest failure first; a check whose prerequisite failed is `unknown`, never ok. Each check has
        its detail, its fix and the fix's shell commands. The plan is made once (for the GPU found, or
        `gpu`; for the target interpreter's vLLM, or `vllm`) and is in the result. Same as
        `gemmaserve doctor --json`; serve_start runs the same checks itself.
        """
        from gemmaserve.host.doctor import doctor

        return typed_result(doctor(request, sources=deps.doctor_sources))
