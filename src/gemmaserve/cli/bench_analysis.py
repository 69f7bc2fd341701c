"""``gemmaserve bench combine|report|import``: read saved result files; never measure.

Each command calls one library function (``combine_results``, ``build_report``,
``import_vllm_result``) and renders its pydantic result as Markdown or ``--json``.
"""

from __future__ import annotations

from pathlib import Path

import click

from gemmaserve.cli.output import emit, json_option

_UTILISATION = click.option(
    "--utilisation",
    type=click.FloatRange(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    help="Share of billed hours the endpoint is busy; cost per token scales by 1/utilisation.",
)


@click.command(name="combine")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False),
    help="Also write the comparison: FILE.md as Markdown, any other name as JSON.",
)
@_UTILISATION
@json_option
def combine(files: tuple[str, ...], out_file: str | None, utilisation: float, as_json: bool) -> None:
    """Compare result files side by side: ratios B/A with 95% intervals, paired quality, drift, cost.

    The first file is the baseline A. A target given twice (A B A) is reported as drift.
    """
    from gemmaserve.bench.combine import combine_results
    from gemmaserve.bench.report import comparison_markdown
    from gemmaserve.fileio import write_atomic

    comparison = combine_results(list(files), utilisation=utilisation)
    markdown = f"# Comparison (baseline: {comparison.baseline})\n\n" + comparison_markdown(comparison)
    if out_file:
        body = markdown if out_file.endswith(".md") else comparison.model_dump_json(indent=2) + "\n"
        write_atomic(out_file, body)
        click.echo(f"Wrote {out_file}", err=True)
    emit(comparison, as_json=as_json, render=lambda _: click.echo(markdown, nl=False))


@click.command(name="report")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Where to write (default DIR/report).")
@click.option("--markdown-only", is_flag=True, help="Skip the HTML page and charts (needs no matplotlib).")
@_UTILISATION
@json_option
def report(directory: str, out_dir: str | None, markdown_only: bool, utilisation: float, as_json: bool) -> None:
    """Write report.md and a standalone report.html with PNG charts from every result file in DIR.

    vllm bench serve --save-result files in DIR are imported and shown in the same tables.
    """
    from gemmaserve.bench.report import build_report

    output = build_report(directory, out_dir=out_dir, utilisation=utilisation, html_page=not markdown_only)

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
@click.argument("vllm_file", type=click.Path(dir_okay=False))
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False), help="The result file to write.")
@click.option("--label", help="Short name for tables (default: the file's label or model id).")
@click.option("--url", help="The target that was measured, for the record.")
@click.option("--instance", help="Catalog instance type (e.g. ml.g4dn.xlarge): sets the GPU and the list price.")
@click.option("--region", default="us-east-1", show_default=True, help="Region of the price.")
@json_option
def import_vllm(
    vllm_file: str, out_file: str, label: str | None, url: str | None, instance: str | None, region: str, as_json: bool
) -> None:
    """Convert a `vllm bench serve --save-result` JSON file into a gemmaserve result file."""
    from gemmaserve.bench.schema import HardwareInfo, save_result
    from gemmaserve.bench.vllm_import import import_vllm_result

    hardware = HardwareInfo()
    if instance:
        from gemmaserve.catalog import resolve_instance
        from gemmaserve.cost import hourly_price

        entry = resolve_instance(instance)
        quote = hourly_price(entry.key, region)
        hardware = HardwareInfo(
            gpu=entry.gpu,
            gpu_count=entry.gpu_count,
            instance=entry.key,
            price_usd_per_hour=quote.usd_per_hour if quote else None,
            price_region=quote.region if quote else None,
            price_date=quote.date if quote else None,
            price_source=quote.source if quote else None,
        )
    result = import_vllm_result(vllm_file, label=label, url=url, hardware=hardware)
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    save_result(result, out_file)

    def render(_: object) -> None:
        levels = ", ".join(
            f"c={level.concurrency}: {level.median_output_tokens_per_s:,.1f} tok/s" for level in result.load
        )
        click.echo(f"Wrote {out_file} ({result.target.label}; {levels})")

    emit(result, as_json=as_json, render=render)
