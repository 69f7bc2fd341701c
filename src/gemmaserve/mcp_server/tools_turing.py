"""MCP tools over :mod:`gemmaserve.turing`: apply, verify and revert the Turing clamp in an installed vLLM file.

Same functions as ``gemmaserve turing apply|verify|revert`` (``filepatch``). The target is a
file path or the interpreter whose vLLM to patch; apply and revert change a file another
program runs, so they need ``confirm`` (or ``dry_run`` to see the diff).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    READ_ONLY,
    Confirm,
    require_confirmation,
    translate_errors,
    typed_result,
)
from gemmaserve.turing.filepatch import PatchResult, VerifyResult

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


def register(server: MCPServer, deps: ServerDeps) -> None:
    @server.tool(name="turing_apply", title="Apply the Turing clamp", annotations=PATCH)
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

    @server.tool(name="turing_verify", title="Is the Turing clamp in place?", annotations=READ_ONLY)
    @translate_errors
    def turing_verify(file: KernelFile = None, python: Python = None) -> Annotated[CallToolResult, VerifyResult]:
        """Whether the clamp is present and intact in the vLLM file (`ok` only then), and whether the file is recognised."""
        from gemmaserve.turing import filepatch

        result = filepatch.verify(filepatch.resolve_target(file=file, python=python))
        recognised = "" if result.recognised else " (source not recognised)"
        return typed_result(result, f"{result.verdict.value}{recognised}: {result.detail} ({result.target.path})")

    @server.tool(name="turing_revert", title="Revert the Turing clamp", annotations=PATCH)
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
