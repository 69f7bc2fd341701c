"""MCP tools over :mod:`gemmaserve.checkpoint`: inspect, grid-check, repack, validate (as ``gemmaserve checkpoint …``).

Sources are a directory, a safetensors file, or a Hub repo id (headers read by HTTP range
requests). Grid-check and repack report progress per tensor and stop on cancellation;
repack writes into a temporary directory and moves it into place only when complete.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.checkpoint import (
    GridCheckReport,
    InspectReport,
    RepackReport,
    ValidateReport,
)
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    READ_ONLY_REMOTE,
    Cancellation,
    OperationCancelled,
    ProgressSink,
    ToolSet,
    run_blocking,
    should_interrupt,
    translate_errors,
    typed_result,
)

REPACK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

Source = Annotated[
    str, Field(min_length=1, description="A checkpoint directory, a .safetensors file, or a Hub repo id.")
]
Revision = Annotated[str | None, Field(description="Hub revision (branch, tag or commit).")]


def _tensor_progress(report: ProgressSink, cancellation: Cancellation, verb: str):  # type: ignore[no-untyped-def]
    """The checkpoint library's ``progress(tensor, done, total)`` as MCP progress; a cancellation point too."""

    def progress(tensor: str, done: int, total: int) -> None:
        report(done, total, f"{verb} {tensor}")
        if should_interrupt(cancellation):
            raise OperationCancelled("The request was cancelled.")

    return progress


def _gb(n: int) -> str:
    return f"{n / 1e9:.3f} GB"


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="checkpoint_inspect", title="What a checkpoint holds", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def checkpoint_inspect(source: Source, revision: Revision = None) -> Annotated[CallToolResult, InspectReport]:
        """Parts (embeddings, body, towers) with bytes, share, storage dtype and parameters, from headers alone.

        Also the quantization config and its ignore list. Same as `gemmaserve checkpoint inspect --json`.
        """
        from gemmaserve.checkpoint import inspect_checkpoint

        report = inspect_checkpoint(source, revision=revision)
        lines = [f"{report.source}: {report.shards} shard(s), {report.tensors} tensors, {_gb(report.total_bytes)}"]
        lines += [f"- {p.part}: {_gb(p.bytes)} ({p.share:.1%})" for p in report.parts]
        lines += [f"note: {finding}" for finding in report.findings]
        return typed_result(report, "\n".join(lines))

    @tools.tool(name="checkpoint_grid_check", title="Are 4-bit weights on the QAT grid?", annotations=READ_ONLY_REMOTE)
    @translate_errors
    async def checkpoint_grid_check(
        build: Annotated[str, Field(min_length=1, description="The 4-bit build to check (path or repo id).")],
        reference: Annotated[
            str, Field(min_length=1, description="The bf16 -qat-q4_0-unquantized checkpoint (path or repo id).")
        ],
        ctx: Context,
        tensor: Annotated[str | None, Field(description="One module or tensor name.")] = None,
        layers: Annotated[str | None, Field(description="Decoder layers, e.g. 0,3-5 (default: all 4-bit).")] = None,
        reference_group_size: Annotated[
            int | Literal["channel"] | None,
            Field(description="The reference grid's group size, or 'channel' (default: detected from its values)."),
        ] = None,
    ) -> Annotated[CallToolResult, GridCheckReport]:
        """Whether the build's 4-bit weights are Google's QAT values, value by value against the reference.

        "Off by a level" is measured in steps of the reference's own grid (its group size is detected, or given);
        a reference on no 4-bit grid is an error, never a verdict. Reports progress per tensor. Same as
        `gemmaserve checkpoint grid-check --json` (whose exit status is 1 when any value is off by a level
        of the reference's grid: here that is `values_off_by_a_level_or_more`).
        """
        from gemmaserve.checkpoint import grid_check

        def work(cancellation: Cancellation, report: ProgressSink) -> GridCheckReport:
            return grid_check(
                build,
                reference,
                tensor=tensor,
                layers=layers,
                reference_group_size=reference_group_size,
                progress=_tensor_progress(report, cancellation, "checking"),
            )

        result = await run_blocking(ctx, work)
        summary = (
            f"{result.verdict}: {result.values_off_by_a_level_or_more:,} of {result.values:,} values "
            f"({result.share_off_by_a_level_or_more:.1%}) off by one reference-grid level or more; "
            f"{result.values_bit_identical:,} bit-identical"
        )
        return typed_result(result, summary)

    @tools.tool(name="checkpoint_repack", title="Repack to W4A16 losslessly", annotations=REPACK)
    @translate_errors
    async def checkpoint_repack(
        src: Annotated[str, Field(min_length=1, description="A -qat-q4_0-unquantized checkpoint directory.")],
        out: Annotated[str, Field(min_length=1, description="The output directory (must not exist).")],
        ctx: Context,
        text_only: Annotated[bool, Field(description="Drop the vision and audio towers.")] = False,
        int4_embeddings: Annotated[bool, Field(description="Also pack the per-layer-embedding table.")] = False,
    ) -> Annotated[CallToolResult, RepackReport]:
        """Repack into compressed-tensors W4A16, bit-exact on the QAT grid, or write nothing.

        Reports progress per tensor; a cancelled repack leaves no output. Same as `gemmaserve checkpoint repack --json`.
        """
        from gemmaserve.checkpoint import repack_checkpoint

        def work(cancellation: Cancellation, report: ProgressSink) -> RepackReport:
            return repack_checkpoint(
                src,
                out,
                text_only=text_only,
                int4_embeddings=int4_embeddings,
                progress=_tensor_progress(report, cancellation, "packing"),
            )

        result = await run_blocking(ctx, work)
        summary = (
            f"Wrote {result.output} ({_gb(result.output_bytes)}): {result.tensors_quantized} tensors packed, "
            f"{result.values_bit_exact:,} of {result.values_quantized:,} values bit-exact"
        )
        return typed_result(result, summary)

    @tools.tool(name="checkpoint_validate", title="Check a checkpoint before deploying", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def checkpoint_validate(source: Source, revision: Revision = None) -> Annotated[CallToolResult, ValidateReport]:
        """The config against its shards (architecture, quantization targets and ignore list, shapes), each with a fix."""
        from gemmaserve.checkpoint import validate_checkpoint

        report = validate_checkpoint(source, revision=revision)
        lines = [f"{report.source}: {report.tensors} tensors, {'ok' if report.ok else 'problems found'}"]
        lines += [f"{f.level}: [{f.check}] {f.message} (fix: {f.fix})" for f in report.findings]
        return typed_result(report, "\n".join(lines))
