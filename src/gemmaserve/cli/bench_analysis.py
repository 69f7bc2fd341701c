"""``gemmaserve bench combine|report|import``: read saved result files; never measure.

Each command calls one action of :mod:`gemmaserve.bench.analysis` with its request model and renders the
typed result as text or ``--json``.
"""

from __future__ import annotations

import click

from gemmaserve.bench.requests import CombineRequest, ImportRequest, ReportRequest
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import emit, json_option


@click.command(name="combine")
@request_options(CombineRequest)
@json_option
def combine(request: CombineRequest, as_json: bool) -> None:
    """Compare result files side by side: ratios B/A with 95% intervals, paired quality, drift, cost.

    The first file is the baseline A. A target given twice (A B A) is reported as drift.

    \b
    Examples:
      gemmaserve bench combine results/t4-bf16.json results/t4-qat.json
      gemmaserve bench combine a.json b.json a-2.json --out comparison.md
      gemmaserve bench combine a.json b.json --utilisation 0.25 --json
    """
    from gemmaserve.bench.analysis import combine_files, comparison_document

    comparison = combine_files(request)
    if request.out:
        click.echo(f"Wrote {request.out}", err=True)
    emit(comparison, as_json=as_json, render=lambda result: click.echo(comparison_document(result), nl=False))


@click.command(name="report")
@request_options(ReportRequest)
@json_option
def report(request: ReportRequest, as_json: bool) -> None:
    """Write report.md and a standalone report.html with PNG charts from every result file in DIR.

    vllm bench serve --save-result files in DIR are imported and shown in the same tables.

    \b
    Examples:
      gemmaserve bench report results/
      gemmaserve bench report results/ --out site/ --utilisation 0.5
      gemmaserve bench report results/ --markdown-only --json
    """
    from gemmaserve.bench.analysis import write_report

    output = write_report(request)

    def render(_: object) -> None:
        click.echo(f"Markdown: {output.markdown_path}")
        if output.html_path:
            click.echo(f"HTML:     {output.html_path}")
        for chart in output.charts:
            click.echo(f"Chart:    {chart}")
        for path in output.imported:
            click.echo(f"Imported from vllm bench serve: {path}")
        for path in output.skipped:
            click.echo(f"Skipped (not a result file): {path}")
        for warning in output.warnings:
            click.echo(f"Warning: {warning}", err=True)

    emit(output, as_json=as_json, render=render)


@click.command(name="import")
@request_options(ImportRequest)
@json_option
def import_vllm(request: ImportRequest, as_json: bool) -> None:
    """Convert a `vllm bench serve --save-result` JSON file into a gemmaserve result file.

    \b
    Examples:
      gemmaserve bench import vllm-result.json --out results/vllm.json
      gemmaserve bench import vllm-result.json --out results/t4.json --label t4 --instance ml.g4dn.xlarge
    """
    from gemmaserve.bench.analysis import import_summary, import_vllm_file

    result = import_vllm_file(request)

    def render(_: object) -> None:
        click.echo(f"Wrote {request.out} ({result.target.label}; {import_summary(result)})")

    emit(result, as_json=as_json, render=render)
