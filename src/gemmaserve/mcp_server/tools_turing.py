"""MCP tools over :mod:`gemmaserve.turing`: status, apply, verify, revert and smem of the Turing clamp.

Same actions and request models as ``gemmaserve turing …`` (``status.check_status``,
``filepatch.apply_clamp|verify_clamp|revert_clamp``, ``smem.compile_smem``). The target is a file path
or the interpreter whose vLLM to patch; apply and revert change a file another program runs, so they
need ``confirm`` (or ``dry_run``).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import READ_ONLY, ProgressSink, ToolSet, relay, run_blocking, typed_result
from gemmaserve.progress import CancelToken
from gemmaserve.turing.filepatch import PatchResult, VerifyResult
from gemmaserve.turing.requests import (
    ApplyRequest,
    RevertRequest,
    SmemRequest,
    TuringStatusRequest,
    VerifyRequest,
)
from gemmaserve.turing.smem import LaunchSearch, SmemReport, SmemResult
from gemmaserve.turing.status import TuringStatus

# Edits vLLM's kernel file in place (with a backup); applying twice changes nothing.
PATCH = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def summarise_patch(result: PatchResult) -> str:
    text = f"{result.action}: {result.detail} ({result.target.path})"
    if result.backup:
        text += f"; backup {result.backup}"
    if result.dry_run and result.diff:
        text += "\n" + result.diff
    return text


def summarise_smem(result: SmemReport | LaunchSearch) -> str:
    if isinstance(result, LaunchSearch):
        return (
            f"{result.arch}: the rule's launch {'agrees' if result.rule_agrees else 'DIFFERS'} with the compiler's "
            + (
                "; ".join(
                    f"head {p.head_size} {p.layout} ({p.num_queries_per_kv} per KV head"
                    + (f", window {p.sliding_window}" if p.sliding_window else "")
                    + ") picked "
                    + ("none fits" if p.picked is None else f"tile {p.picked.tile_size} warps {p.picked.num_warps}")
                    + f" ({p.picked_spill_bytes} B spilled)"
                    + f", rule tile {p.rule.tile_size} warps {p.rule.num_warps}"
                    for p in result.picks
                )
            )
        )
    return (
        f"{result.arch}: stock fits {'yes' if result.stock_fits else 'NO'}, clamped fits "
        f"{'yes' if result.clamped_fits else 'NO'}; "
        + "; ".join(
            f"head {r.head_size} ({r.num_queries_per_kv} per KV head) {r.phase} {r.layout} {r.variant} "
            f"tile {r.tile_size} warps {r.num_warps}: "
            f"{r.smem_bytes:,}/{r.smem_limit_bytes:,} B, spills {r.spill_store_bytes}/{r.spill_load_bytes}"
            for r in result.rows
        )
    )


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(
        TuringStatusRequest,
        title="Does vLLM need and have the Turing clamp?",
        annotations=READ_ONLY,
        result=TuringStatus,
    )
    def turing_status(request: TuringStatusRequest) -> CallToolResult:
        """Is the clamp needed on this GPU, which delivery is active (plugin or file patch), would vLLM start?

        `engine_would_start` is the verdict serve_start's interlock uses. Same as `gemmaserve turing status --json`.
        """
        from gemmaserve.turing.status import check_status

        result = check_status(request)
        needed = {True: "needed", False: "not needed", None: "need unknown"}[result.clamp_needed]
        summary = (
            f"{result.gpu_name or 'GPU ?'} (compute {result.capability or 'unknown'}): clamp {needed}; "
            f"active delivery {result.active_delivery.value}; vLLM "
            f"{'would' if result.engine_would_start else 'would NOT'} start"
        )
        if result.reasons:
            summary += "\n" + "\n".join(f"- {reason}" for reason in result.reasons)
        return typed_result(result, summary)

    @tools.action(SmemRequest, title="Compile the attention kernel for a GPU", annotations=READ_ONLY, result=SmemResult)
    async def turing_smem(request: SmemRequest, ctx: Context) -> CallToolResult:
        """Compile the real kernel for `arch` with Triton and ptxas (no GPU): shared memory, registers, spills,
        stock vs clamped (the rule's tile and num_warps) for each Gemma 4 layer geometry; with `search`, for each
        launch that overflows, every smaller tile and warps and the one that fits and spills least. Reports
        progress per compile with an ETA (a cold run takes a minute or more); cancelling stops between two
        compiles. Needs the `kernel` extra; `vllm_file` needs no vLLM installed. Same as
        `gemmaserve turing smem --json`."""
        from gemmaserve.turing.smem import compile_smem

        def work(cancellation: CancelToken, report: ProgressSink) -> SmemReport | LaunchSearch:
            return compile_smem(request, progress=relay(report), cancel=cancellation)

        result = await run_blocking(ctx, work)
        return typed_result(result, summarise_smem(result))

    @tools.action(ApplyRequest, title="Apply the Turing clamp", annotations=PATCH, result=PatchResult)
    def turing_apply(request: ApplyRequest) -> CallToolResult:
        """Insert the shared-memory clamp into vLLM's Triton attention file (once, backup beside it).

        Needed on a T4 (sm_75) for Gemma 4's head-512 attention; Ampere and newer are left untouched by
        the clamp itself. Anything unrecognised is refused unchanged. Same as `gemmaserve turing apply --json`.
        """
        from gemmaserve.turing.filepatch import apply_clamp

        result = apply_clamp(request)
        return typed_result(result, summarise_patch(result))

    @tools.action(VerifyRequest, title="Is the Turing clamp in place?", annotations=READ_ONLY, result=VerifyResult)
    def turing_verify(request: VerifyRequest) -> CallToolResult:
        """Whether the clamp is present and intact in the vLLM file (`ok` only then), and whether the file is recognised."""
        from gemmaserve.turing.filepatch import verify_clamp

        result = verify_clamp(request)
        recognised = "" if result.recognised else " (source not recognised)"
        return typed_result(result, f"{result.verdict.value}{recognised}: {result.detail} ({result.target.path})")

    @tools.action(RevertRequest, title="Revert the Turing clamp", annotations=PATCH, result=PatchResult)
    def turing_revert(request: RevertRequest) -> CallToolResult:
        """Restore the vLLM file byte for byte (a stale or doubled patch is refused). Same as `turing revert --json`."""
        from gemmaserve.turing.filepatch import revert_clamp

        result = revert_clamp(request)
        return typed_result(result, summarise_patch(result))
