"""MCP tools over :mod:`gemmaserve.turing`: status, apply, verify, revert and smem of the Turing clamp.

Same functions as ``gemmaserve turing …`` (``status.turing_status``, ``filepatch``,
``smem.compile_report``). The target is a file path or the interpreter whose vLLM to patch;
apply and revert change a file another program runs, so they need ``confirm`` (or ``dry_run``).
"""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    READ_ONLY,
    Confirm,
    ToolSet,
    require_confirmation,
    translate_errors,
    typed_result,
)
from gemmaserve.turing.filepatch import PatchResult, VerifyResult
from gemmaserve.turing.smem import SmemReport
from gemmaserve.turing.status import TuringStatus

# Edits vLLM's kernel file in place (with a backup); applying twice changes nothing.
PATCH = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

KernelFile = Annotated[str | None, Field(description="The triton_unified_attention.py to act on.")]
Python = Annotated[
    str | None, Field(description="Interpreter whose installed vLLM to act on (default: python3 on PATH).")
]
DryRun = Annotated[bool, Field(description="Only show the diff; write nothing (needs no confirm).")]


def summarise_patch(result: PatchResult) -> str:
    text = f"{result.action}: {result.detail} ({result.target.path})"
    if result.backup:
        text += f"; backup {result.backup}"
    if result.dry_run and result.diff:
        text += "\n" + result.diff
    return text


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="turing_status", title="Does vLLM need and have the Turing clamp?", annotations=READ_ONLY)
    @translate_errors
    def turing_status(
        python: Annotated[str | None, Field(description="Interpreter that runs vLLM (default: this one).")] = None,
        capability: Annotated[
            str | None, Field(description="State the GPU's compute capability (7.5 or sm_75) instead of nvidia-smi.")
        ] = None,
    ) -> Annotated[CallToolResult, TuringStatus]:
        """Is the clamp needed on this GPU, which delivery is active (plugin or file patch), would vLLM start?

        `engine_would_start` is the verdict serve_start's interlock uses. Same as `gemmaserve turing status --json`.
        """
        from gemmaserve.turing.status import turing_status as run_status

        result = run_status(python, capability=capability)
        needed = {True: "needed", False: "not needed", None: "need unknown"}[result.clamp_needed]
        summary = (
            f"{result.gpu_name or 'GPU ?'} (compute {result.capability or 'unknown'}): clamp {needed}; "
            f"active delivery {result.active_delivery.value}; vLLM "
            f"{'would' if result.engine_would_start else 'would NOT'} start"
        )
        if result.reasons:
            summary += "\n" + "\n".join(f"- {reason}" for reason in result.reasons)
        return typed_result(result, summary)

    @tools.tool(name="turing_smem", title="Compile the attention kernel for a GPU", annotations=READ_ONLY)
    @translate_errors
    def turing_smem(
        vllm_file: Annotated[str | None, Field(description="The triton_unified_attention.py to compile.")] = None,
        python: Annotated[str | None, Field(description="Interpreter whose vLLM to find (no vllm_file).")] = None,
        arch: Annotated[str, Field(description="Target architecture, e.g. sm_75, sm_89.")] = "sm_75",
        head_sizes: Annotated[list[int] | None, Field(description="Head sizes (default 256 and 512).")] = None,
        num_warps: Annotated[int, Field(ge=1, le=32)] = 4,
    ) -> Annotated[CallToolResult, SmemReport]:
        """Compile the real kernel for `arch` with Triton and ptxas (no GPU): shared memory, registers, spills,
        stock vs clamped (the rule's tile and num_warps). Needs the `kernel` extra. Same as
        `gemmaserve turing smem --json`."""
        from gemmaserve.turing.filepatch import resolve_target
        from gemmaserve.turing.smem import compile_report

        path = vllm_file or resolve_target(file=None, python=python).path
        report = compile_report(
            vllm_file=path, arch=arch, head_sizes=tuple(head_sizes or (256, 512)), num_warps=num_warps
        )
        summary = (
            f"{report.arch}: stock fits {'yes' if report.stock_fits else 'NO'}, clamped fits "
            f"{'yes' if report.clamped_fits else 'NO'}; "
            + "; ".join(
                f"head {r.head_size} {r.phase} {r.variant} tile {r.tile_size} warps {r.num_warps}: "
                f"{r.smem_bytes:,}/{r.smem_limit_bytes:,} B, spills {r.spill_store_bytes}/{r.spill_load_bytes}"
                for r in report.rows
            )
        )
        return typed_result(report, summary)

    @tools.tool(name="turing_apply", title="Apply the Turing clamp", annotations=PATCH)
    @translate_errors
    def turing_apply(
        confirm: Confirm, file: KernelFile = None, python: Python = None, dry_run: DryRun = False
    ) -> Annotated[CallToolResult, PatchResult]:
        """Insert the shared-memory clamp into vLLM's Triton attention file (once, backup beside it).

        Needed on a T4 (sm_75) for Gemma 4's head-512 attention; Ampere and newer are left untouched by
        the clamp itself. Anything unrecognised is refused unchanged. Same as `gemmaserve turing apply --json`.
        """
        from gemmaserve.turing import filepatch

        target = filepatch.resolve_target(file=file, python=python)
        if not dry_run:
            require_confirmation(confirm, f"patch {target.path}")
        result = filepatch.apply(target, dry_run=dry_run)
        return typed_result(result, summarise_patch(result))

    @tools.tool(name="turing_verify", title="Is the Turing clamp in place?", annotations=READ_ONLY)
    @translate_errors
    def turing_verify(file: KernelFile = None, python: Python = None) -> Annotated[CallToolResult, VerifyResult]:
        """Whether the clamp is present and intact in the vLLM file (`ok` only then), and whether the file is recognised."""
        from gemmaserve.turing import filepatch

        result = filepatch.verify(filepatch.resolve_target(file=file, python=python))
        recognised = "" if result.recognised else " (source not recognised)"
        return typed_result(result, f"{result.verdict.value}{recognised}: {result.detail} ({result.target.path})")

    @tools.tool(name="turing_revert", title="Revert the Turing clamp", annotations=PATCH)
    @translate_errors
    def turing_revert(
        confirm: Confirm, file: KernelFile = None, python: Python = None, dry_run: DryRun = False
    ) -> Annotated[CallToolResult, PatchResult]:
        """Restore the vLLM file byte for byte (a stale or doubled patch is refused). Same as `turing revert --json`."""
        from gemmaserve.turing import filepatch

        target = filepatch.resolve_target(file=file, python=python)
        if not dry_run:
            require_confirmation(confirm, f"revert the clamp in {target.path}")
        result = filepatch.revert(target, dry_run=dry_run)
        return typed_result(result, summarise_patch(result))
