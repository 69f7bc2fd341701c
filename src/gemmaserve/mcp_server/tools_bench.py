"""MCP tools over the benchmark: ``bench_measure``, ``bench_combine``, ``bench_report`` (as ``gemmaserve bench …``).

Measuring reports progress per finished request and can be cancelled: the library's own
interruption path then marks every result file interrupted and saves it, so the finished
steps survive. A failed request is a result, not an error; only bad usage fails the call.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.bench.combine import Comparison
from gemmaserve.bench.measure import MeasureReport
from gemmaserve.bench.report import ReportOutput
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    Cancellation,
    ProgressSink,
    ToolSet,
    run_blocking,
    should_interrupt,
    translate_errors,
    typed_result,
)

# Sends requests to the targets and writes <label>.json files into out_dir (replacing same-named ones).
MEASURE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)

# Reads result files and (re)writes derived files: repeating the call gives the same files.
DERIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
Utilisation = Annotated[
    float, Field(gt=0, le=1, description="Share of billed hours the endpoint is busy; cost/token scales by 1/u.")
]

PerTarget = Annotated[list[str] | None, Field(description="One per target, in target order (may be shorter).")]


def summarise_measure(report: MeasureReport) -> str:
    lines = [f"{report.status.value}: {report.message} (files in {report.out_dir})"]
    for target in report.targets:
        decode = f"{target.decode_tokens_per_s:.1f} tok/s decode" if target.decode_tokens_per_s else "no decode rate"
        quality = f", quality {target.quality_correct}/{target.quality_total}" if target.quality_total else ""
        lines.append(
            f"- {target.label}: {target.status.value}, {decode}{quality}, "
            f"{target.failed}/{target.requests} failed → {target.path}"
        )
    return "\n".join(lines)


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="bench_measure", title="Measure endpoints", annotations=MEASURE)
    @translate_errors
    async def bench_measure(
        targets: Annotated[
            list[str],
            Field(
                min_length=1,
                description="http://HOST:PORT or sagemaker://NAME?region=R, measured interleaved; "
                "repeat one for A-B-A.",
            ),
        ],
        out_dir: Annotated[str, Field(min_length=1, description="Directory for the <label>.json result files.")],
        ctx: Context,
        labels: PerTarget = None,
        decode_calls: Annotated[int, Field(ge=0, description="Calls at each decode length (0 skips).")] = 5,
        decode_short: Annotated[int, Field(ge=1)] = 16,
        decode_long: Annotated[int, Field(ge=2)] = 512,
        concurrency: Annotated[list[int], Field(min_length=1, description="Load levels.")] = [1, 4, 16],  # noqa: B006
        repeats: Annotated[int, Field(ge=0, description="Repeats per load level (0 skips load).")] = 3,
        input_tokens: Annotated[int, Field(ge=1)] = 128,
        output_tokens: Annotated[int, Field(ge=1)] = 256,
        requests_per_stream: Annotated[int, Field(ge=1)] = 1,
        quality_set: Annotated[str, Field(description="Question set, or 'none' to skip.")] = "published-40",
        quality_max_tokens: Annotated[int, Field(ge=1)] = 2048,
        quality_concurrency: Annotated[int, Field(ge=1)] = 8,
        temperature: Annotated[float, Field(ge=0)] = 0.0,
        ignore_eos: bool = True,
        timeout_s: Annotated[float, Field(gt=0, description="Seconds one request may take.")] = 600.0,
        seed: int = 0,
        warmup: Annotated[int, Field(ge=0)] = 1,
        client_processes: Annotated[int, Field(ge=1, description="Worker processes per load level.")] = 1,
        max_client_lag_ms: Annotated[
            float, Field(ge=0, description="Stop when the client's event loop lags more than this (median); 0: never.")
        ] = 5.0,
        logs: PerTarget = None,
        instances: PerTarget = None,
        gpus: PerTarget = None,
        prices_usd_per_hour: Annotated[list[float] | None, Field(description="Hourly price per target.")] = None,
    ) -> Annotated[CallToolResult, MeasureReport]:
        """Decode rate, TTFT/ITL, throughput under concurrency, answer quality and cost, for each target.

        Steps are interleaved across targets and every result file is saved after each step.
        Reports progress per request; cancelling keeps what finished (files marked interrupted).
        Same as `gemmaserve bench measure --json`; the files feed bench combine / report.
        """
        from gemmaserve.bench.measure import measure_targets
        from gemmaserve.bench.measure_options import build_measure_inputs

        settings, options = build_measure_inputs(
            targets,
            decode_short=decode_short,
            decode_long=decode_long,
            decode_calls=decode_calls,
            concurrency=list(concurrency),
            repeats=repeats,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            quality_set=quality_set,
            quality_max_tokens=quality_max_tokens,
            temperature=temperature,
            ignore_eos=ignore_eos,
            timeout_s=timeout_s,
            seed=seed,
            warmup=warmup,
            quality_concurrency=quality_concurrency,
            requests_per_stream=requests_per_stream,
            client_processes=client_processes,
            max_client_lag_ms=max_client_lag_ms or None,
            labels=labels,
            logs=logs,
            instances=instances,
            gpus=gpus,
            prices_usd_per_hour=prices_usd_per_hour,
        )

        def work(cancellation: Cancellation, report: ProgressSink) -> MeasureReport:
            def progress(event: object) -> None:
                report(event.done_requests, event.total_requests, event.description)  # type: ignore[attr-defined]
                if should_interrupt(cancellation):
                    # measure_targets' interruption path: it marks every file interrupted and saves it.
                    raise KeyboardInterrupt

            return measure_targets(
                list(targets),
                out_dir,
                settings=settings,
                target_options=options,
                progress=progress,
                command=["gemmaserve", "mcp", "bench_measure"],
            )

        result = await run_blocking(ctx, work)
        return typed_result(result, summarise_measure(result))

    @tools.tool(name="bench_combine", title="Compare result files", annotations=DERIVE)
    @translate_errors
    def bench_combine(
        files: Annotated[list[str], Field(min_length=1, description="Result files; the first is the baseline A.")],
        out_file: Annotated[
            str | None, Field(description="Also write the comparison: FILE.md as Markdown, else JSON.")
        ] = None,
        utilisation: Utilisation = 1.0,
    ) -> Annotated[CallToolResult, Comparison]:
        """Ratios B/A with 95% intervals, paired quality test, A-B-A drift and cost, from saved result files.

        Never measures. Same as `gemmaserve bench combine --json`; the text is the Markdown comparison.
        """
        from gemmaserve.bench.combine import combine_results
        from gemmaserve.bench.report import comparison_markdown
        from gemmaserve.fileio import write_atomic

        comparison = combine_results(list(files), utilisation=utilisation)
        markdown = f"# Comparison (baseline: {comparison.baseline})\n\n" + comparison_markdown(comparison)
        if out_file:
            write_atomic(
                out_file, markdown if out_file.endswith(".md") else comparison.model_dump_json(indent=2) + "\n"
            )
        return typed_result(comparison, markdown)

    @tools.tool(name="bench_report", title="Write the benchmark report", annotations=DERIVE)
    @translate_errors
    def bench_report(
        directory: Annotated[str, Field(min_length=1, description="Directory of result files.")],
        out_dir: Annotated[str | None, Field(description="Where to write (default DIR/report).")] = None,
        markdown_only: Annotated[bool, Field(description="Skip the HTML page and charts (no matplotlib).")] = False,
        utilisation: Utilisation = 1.0,
    ) -> Annotated[CallToolResult, ReportOutput]:
        """Write report.md and a standalone report.html with PNG charts from every result file in the directory.

        `vllm bench serve --save-result` files there are imported into the same tables. Same as
        `gemmaserve bench report --json`.
        """
        from gemmaserve.bench.report import build_report

        output = build_report(directory, out_dir=out_dir, utilisation=utilisation, html_page=not markdown_only)
        lines = [f"Markdown: {output.markdown_path}"]
        if output.html_path:
            lines.append(f"HTML: {output.html_path}")
        lines += [f"Chart: {chart}" for chart in output.charts]
        lines += [f"Skipped (not a result file): {path}" for path in output.skipped]
        lines += [f"Warning: {warning}" for warning in output.warnings]
        return typed_result(output, "\n".join(lines))
