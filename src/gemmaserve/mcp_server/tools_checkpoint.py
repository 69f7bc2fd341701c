"""MCP tools over :mod:`gemmaserve.checkpoint`: inspect, grid-check, repack, validate (as ``gemmaserve checkpoint …``).

Sources are a directory, a safetensors file, or a Hub repo id (headers read by HTTP range
requests). Grid-check and repack report progress per tensor and stop on cancellation;
repack writes into a temporary directory and moves it into place only when complete.
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.checkpoint import (
    GridCheckReport,
    GridCheckRequest,
    InspectReport,
    InspectRequest,
    RepackReport,
    RepackRequest,
    ValidateReport,
    ValidateRequest,
    checkpoint_grid_check,
    checkpoint_inspect,
    checkpoint_repack,
    checkpoint_validate,
)
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(InspectRequest, title="What a checkpoint holds", result=InspectReport)
    def inspect_tool(request: InspectRequest) -> CallToolResult:
        """Parts (embeddings, body, towers) with bytes, share, storage dtype and parameters, from headers alone.

        Also the quantization config and its ignore list. Same as `gemmaserve checkpoint inspect --json`.
        """
        return typed_result(checkpoint_inspect(request))

    @tools.action(
        GridCheckRequest, title="Are 4-bit weights on the QAT grid?",
        result=GridCheckReport,
    )  # fmt: skip
    async def grid_check_tool(request: GridCheckRequest, ctx: Context) -> CallToolResult:
        """Whether the build's 4-bit weights are Google's QAT values, value by value against the reference.

        "Off by a level" is measured in steps of the reference's own grid (its group size is detected, or given);
        a reference on no 4-bit grid is an error, never a verdict. Reports progress per tensor. Same as
        `gemmaserve checkpoint grid-check --json` (whose exit status is 1 when any value is off by a level
        of the reference's grid: here that is `values_off_by_a_level_or_more`). Also reported:
        `values_nearest_level_differs`, the values whose nearest level of the reference grid is not the
        reference's own (moved by half a step or more; usually more values than those off by a level).
        """

        return typed_result(await run_blocking(ctx, partial(checkpoint_grid_check, request)))

    @tools.action(RepackRequest, title="Repack to W4A16 losslessly", result=RepackReport)
    async def repack_tool(request: RepackRequest, ctx: Context) -> CallToolResult:
        """Repack into compressed-tensors W4A16, bit-exact on the QAT grid, or write nothing.

        `out` must not exist (it is never overwritten). Reports progress per tensor; a cancelled repack
        leaves no output. Same as `gemmaserve checkpoint repack --json`.
        """

        return typed_result(await run_blocking(ctx, partial(checkpoint_repack, request)))

    @tools.action(
        ValidateRequest, title="Check a checkpoint before deploying",
        result=ValidateReport,
    )  # fmt: skip
    def validate_tool(request: ValidateRequest) -> CallToolResult:
        """The config against its shards (architecture, quantization targets and ignore list, shapes), each with a fix."""
        return typed_result(checkpoint_validate(request))
