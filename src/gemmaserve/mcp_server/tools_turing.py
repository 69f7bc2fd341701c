"""MCP tools over :mod:`gemmaserve.turing`: status, apply, verify, revert and smem of the Turing clamp.

Same actions and request models as ``gemmaserve turing …`` (``status.check_status``,
``filepatch.apply_clamp|verify_clamp|revert_clamp``, ``smem.compile_smem``). The target is a file path
or the interpreter whose vLLM to patch; apply and revert change a file another program runs, so they
need ``confirm`` (or ``dry_run``).
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result
from gemmaserve.turing.filepatch import PatchResult, VerifyResult
from gemmaserve.turing.requests import (
    ApplyRequest,
    RevertRequest,
    SmemRequest,
    TuringStatusRequest,
    VerifyRequest,
)
from gemmaserve.turing.smem import SmemResult
from gemmaserve.turing.status import TuringStatus


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(
        TuringStatusRequest,
        title="Does vLLM need and have the Turing clamp?",
        result=TuringStatus,
    )
    def turing_status(request: TuringStatusRequest) -> CallToolResult:
        """Is the clamp needed on this GPU, which delivery is active (plugin or file patch), would vLLM start?

        `engine_would_start` is the verdict serve_start's interlock uses. Same as `gemmaserve turing status --json`.
        """
        from gemmaserve.turing.status import check_status

        return typed_result(check_status(request))

    @tools.action(SmemRequest, title="Compile the attention kernel for a GPU", result=SmemResult)
    async def turing_smem(request: SmemRequest, ctx: Context) -> CallToolResult:
        """Compile the real kernel for `arch` with Triton and ptxas (no GPU): shared memory, registers, spills,
        stock vs clamped (the rule's tile and num_warps) for each Gemma 4 layer geometry; with `search`, for each
        launch that overflows, every smaller tile and warps and the one that fits and spills least. Reports
        progress per compile with an ETA (a cold run takes a minute or more); cancelling stops between two
        compiles. Needs the `kernel` extra; `vllm_file` needs no vLLM installed. Same as
        `gemmaserve turing smem --json`."""
        from gemmaserve.turing.smem import compile_smem

        return typed_result(await run_blocking(ctx, partial(compile_smem, request)))

    @tools.action(ApplyRequest, title="Apply the Turing clamp", result=PatchResult)
    def turing_apply(request: ApplyRequest) -> CallToolResult:
        """Insert the shared-memory clamp into vLLM's Triton attention file (once, backup beside it).

        Needed on a T4 (sm_75) for Gemma 4's head-512 attention; Ampere and newer are left untouched by
        the clamp itself. Anything unrecognised is refused unchanged. Same as `gemmaserve turing apply --json`.
        """
        from gemmaserve.turing.filepatch import apply_clamp

        return typed_result(apply_clamp(request))

    @tools.action(VerifyRequest, title="Is the Turing clamp in place?", result=VerifyResult)
    def turing_verify(request: VerifyRequest) -> CallToolResult:
        """Whether the clamp is present and intact in the vLLM file (`ok` only then), and whether the file is recognised."""
        from gemmaserve.turing.filepatch import verify_clamp

        return typed_result(verify_clamp(request))

    @tools.action(RevertRequest, title="Revert the Turing clamp", result=PatchResult)
    def turing_revert(request: RevertRequest) -> CallToolResult:
        """Restore the vLLM file byte for byte (a stale or doubled patch is refused). Same as `turing revert --json`."""
        from gemmaserve.turing.filepatch import revert_clamp

        return typed_result(revert_clamp(request))
