"""MCP tools that need no host and no cloud: ``plan`` (the capacity and cost table) and ``env`` (versions).

Same functions as ``gemmaserve plan`` and ``gemmaserve env``; offline on the packaged catalog.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from gemmaserve.envinfo import EnvReport, collect_env
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import READ_ONLY, translate_errors, typed_result
from gemmaserve.plan import PlanTable, plan_all

Names = Annotated[list[str] | None, Field(description="Filter; leave empty for every one in the catalog.")]


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


def register(server: MCPServer, deps: ServerDeps) -> None:
    @server.tool(name="plan", title="Plan capacity and cost", annotations=READ_ONLY)
    @translate_errors
    def plan(
        models: Names = None,
        encodings: Annotated[
            list[str] | None,
            Field(description="bf16, qat-w4a16, qat-q4_0-unquantized, gguf-q4_0; empty for all."),
        ] = None,
        gpus: Annotated[
            list[str] | None, Field(description="t4, l4, l40s, a10g, a100-40gb, a100-80gb, h100; empty for all.")
        ] = None,
        instance: Annotated[
            str | None, Field(description="An instance type (ml.g4dn.xlarge, g6.xlarge…): its GPU, RAM and price.")
        ] = None,
        platform: Annotated[
            Literal["ec2", "sagemaker"], Field(description="Which instances price a GPU when instance is not given.")
        ] = "ec2",
        max_model_len: Annotated[int, Field(ge=16)] = 8192,
        gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.9,
        max_num_seqs: Annotated[int | None, Field(ge=1)] = None,
        max_num_batched_tokens: Annotated[int | None, Field(ge=16)] = None,
        decode_tokens_per_s: Annotated[
            float | None, Field(gt=0, description="A measured decode rate, to price $/M output tokens.")
        ] = None,
        language_model_only: Annotated[
            bool, Field(description="vLLM's --language-model-only: text only, no vision/audio towers.")
        ] = False,
        vllm_version: Annotated[
            str | None,
            Field(
                description="vLLM release whose memory rules to follow, 0.26-0.34 (default: newest; "
                "the SageMaker image's for ml.* instances)."
            ),
        ] = None,
        sort: Annotated[Literal["fit", "cost"], Field(description="Fitting rows first, or by $/M tokens.")] = "fit",
        warm: Annotated[bool, Field(description="Plan a restart with a warm compile cache.")] = False,
    ) -> Annotated[CallToolResult, PlanTable]:
        """Which Gemma 4 model, encoding and GPU fit, with KV pool, concurrency, host RAM, swap, disk and cost.

        Offline, on the built-in catalog (same as `gemmaserve plan --json`). Each row's verdict is
        fits / fits-with-swap / does-not-fit / not-servable, with the binding term and the exact
        `vllm serve` flags. Start here before any deploy.
        """
        table = plan_all(
            models=models or None,
            encodings=encodings or None,
            gpus=gpus or None,
            instance=instance,
            platform=platform,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            decode_tokens_per_s=decode_tokens_per_s,
            language_model_only=language_model_only,
            vllm_version=vllm_version,
            sort=sort,
            first_start=not warm,
        )
        return typed_result(table, summarise_plan(table))

    @server.tool(name="env", title="Versions for bug reports", annotations=READ_ONLY)
    @translate_errors
    def env() -> Annotated[CallToolResult, EnvReport]:
        """Versions of gemmaserve, Python and the packages it uses (same as `gemmaserve env --json`)."""
        report = collect_env()
        missing = [name for name, version in report.packages.items() if version is None]
        summary = f"gemmaserve {report.gemmaserve} on Python {report.python} ({report.platform})"
        if missing:
            summary += f"; not installed: {', '.join(missing)}"
        return typed_result(report, summary)
