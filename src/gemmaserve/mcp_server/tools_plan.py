"""MCP tools that need no host and no cloud: ``plan`` (the capacity and cost table) and ``env`` (versions).

Same functions as ``gemmaserve plan`` and ``gemmaserve env``; offline on the packaged catalog.
"""

from __future__ import annotations

from collections import Counter

from mcp_types import CallToolResult

from gemmaserve.envinfo import EnvReport, EnvRequest, collect_env
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import READ_ONLY, ToolSet, typed_result
from gemmaserve.plan import PlanRequest, PlanTable, plan


def summarise_plan(table: PlanTable) -> str:
    verdicts = Counter(row.verdict for row in table.rows)
    counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
    lines = [f"{len(table.rows)} rows ({counts or 'none'}); list prices of {table.price_date}."]
    fitting = sorted(
        (row for row in table.rows if row.fits and row.price_usd_per_hour is not None),
        key=lambda row: row.price_usd_per_hour or 0.0,
    )
    for row in fitting[:5]:
        lines.append(
            f"- {row.model} {row.encoding} on {row.gpu} ({row.instance}, ${row.price_usd_per_hour:.3f}/h): "
            f"{row.verdict}, {row.kv_cache_tokens:,} KV tokens, {row.max_concurrency:.1f}x at {row.max_model_len}"
        )
    lines.append(
        f"vLLM {table.vllm_version} memory rules, "
        + ("a first start (compiles)." if all(row.first_start for row in table.rows) else "a warm restart.")
    )
    if table.next_command:
        lines.append(f"Next: {table.next_command}")
    return "\n".join(lines)


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(PlanRequest, title="Plan capacity and cost", annotations=READ_ONLY, result=PlanTable)
    def plan_tool(request: PlanRequest) -> CallToolResult:
        """Which Gemma 4 model, encoding and GPU fit, with KV pool, concurrency, host RAM, swap, disk and cost.

        Offline, on the built-in catalog (same as `gemmaserve plan --json`). Each row's verdict is
        fits / fits-with-swap / does-not-fit / not-servable, with the binding term and the exact
        `vllm serve` flags. Start here before any deploy.
        """
        table = plan(request)
        return typed_result(table, summarise_plan(table))

    @tools.action(EnvRequest, title="Versions for bug reports", annotations=READ_ONLY, result=EnvReport)
    def env(request: EnvRequest) -> CallToolResult:
        """Versions of gemmaserve, Python and the packages it uses (same as `gemmaserve env --json`)."""
        return typed_result(collect_env(request))
