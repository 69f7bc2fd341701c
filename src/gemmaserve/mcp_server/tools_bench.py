"""MCP tools over the benchmark: ``bench_measure``, ``bench_combine``, ``bench_report``, ``bench_import``.

Each is ``gemmaserve bench …`` with the same request model, so the arguments are the CLI's long options.
Measuring reports progress per finished request (and about once a second while requests stream) and
can be cancelled: the library then marks every result file interrupted and saves it, so the finished
steps survive. A failed request is a result, not an error; only bad usage fails the call.
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.bench.combine import Comparison
from gemmaserve.bench.report import ReportOutput
from gemmaserve.bench.requests import (
    CombineRequest,
    ImportedResult,
    ImportRequest,
    MeasureReport,
    MeasureRequest,
    ReportRequest,
)
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(MeasureRequest, title="Measure endpoints", result=MeasureReport)
    async def bench_measure(request: MeasureRequest, ctx: Context) -> CallToolResult:
        """Decode rate, TTFT/ITL/TPOT, throughput under concurrency, answer quality and cost, for each target.

        Steps are interleaved across targets and every result file is saved after each step.
        Reports progress per request; cancelling keeps what finished (files marked interrupted).
        Same as `gemmaserve bench measure --json`; the files feed bench_combine / bench_report.
        """
        from gemmaserve.bench.measure import measure_endpoints

        work = partial(measure_endpoints, request, command=["gemmaserve", "mcp", "bench_measure"])
        return typed_result(await run_blocking(ctx, work))

    @tools.action(CombineRequest, title="Compare result files", result=Comparison)
    def bench_combine(request: CombineRequest) -> CallToolResult:
        """Ratios B/A with 95% intervals, paired quality test, A-B-A drift and cost, from saved result files.

        Never measures. Same as `gemmaserve bench combine --json`; `out` ending in .md gets the Markdown comparison.
        """
        from gemmaserve.bench.analysis import combine_files

        return typed_result(combine_files(request))

    @tools.action(ReportRequest, title="Write the benchmark report", result=ReportOutput)
    def bench_report(request: ReportRequest) -> CallToolResult:
        """Write report.md and a standalone report.html with PNG charts from every result file in the directory.

        `vllm bench serve --save-result` files there are imported into the same tables. Same as
        `gemmaserve bench report --json`.
        """
        from gemmaserve.bench.analysis import write_report

        return typed_result(write_report(request))

    @tools.action(ImportRequest, title="Import a vLLM benchmark result", result=ImportedResult)
    def bench_import(request: ImportRequest) -> CallToolResult:
        """Convert a `vllm bench serve --save-result` JSON file into a gemmaserve result file at `out`.

        Only reads and writes files. Same as `gemmaserve bench import --json` (the file's fields and `path`,
        where it was written); the written file feeds bench_combine / bench_report next to measured ones.
        """
        from gemmaserve.bench.analysis import import_vllm_file

        return typed_result(import_vllm_file(request))
