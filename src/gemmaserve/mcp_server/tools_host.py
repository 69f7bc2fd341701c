"""MCP tool over the host probes: ``doctor`` (same function as ``gemmaserve doctor``, ``run_doctor``).

Read-only: it reads /proc, runs nvidia-smi and probes the target interpreter in a
subprocess. A failing check is a result (``ok`` false, each check with its fix), not an error.
"""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult
from pydantic import Field

from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import READ_ONLY, ToolSet, translate_errors, typed_result


def summarise_doctor(report: DoctorReport) -> str:
    if report.ok:
        head = f"Host ready for {report.model} {report.encoding}"
    else:
        head = f"Host NOT ready for {report.model} {report.encoding}"
    lines = [f"{head} (GPU {report.gpu or 'not in the catalog'}, python {report.python})."]
    for check in report.blocking:
        lines.append(
            f"- {check.status.value} {check.title}: {check.evidence}" + (f" Fix: {check.fix}" if check.fix else "")
        )
    return "\n".join(lines)


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="doctor", title="Check this GPU host", annotations=READ_ONLY)
    @translate_errors
    def doctor(
        python: Annotated[
            str | None, Field(description="The interpreter vLLM runs under (default: the vllm on PATH's, else this).")
        ] = None,
        model: Annotated[str, Field(description="Catalog model to check the host for.")] = "gemma-4-e2b",
        encoding: str = "qat-w4a16",
        gpu: Annotated[
            str | None, Field(description="Catalog GPU to plan for when nvidia-smi reports one not in the catalog.")
        ] = None,
        max_model_len: Annotated[int, Field(ge=16)] = 8192,
        gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.9,
    ) -> Annotated[CallToolResult, DoctorReport]:
        """GPU, driver, RAM + swap, disk per path, torch build and arch list, fp16 matmul, vLLM import and pin.

        Cheapest failure first; a check whose prerequisite failed is `unknown`, never ok. Each check has
        its evidence and fix. Same as `gemmaserve doctor --json`; serve_start runs the same checks itself.
        """
        from gemmaserve.host.doctor import run_doctor

        report = run_doctor(
            python,
            model=model,
            encoding=encoding,
            gpu=gpu,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            sources=deps.doctor_sources,
        )
        return typed_result(report, summarise_doctor(report))
