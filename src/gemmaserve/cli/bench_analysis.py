"""``gemmaserve bench combine|report|import``: read saved result files; never measure.

Each command calls one action of :mod:`gemmaserve.bench.analysis` with its request model and prints the
typed result's view (:mod:`gemmaserve.views.bench`) or ``--json``.
"""

from __future__ import annotations

import click

from gemmaserve.bench.requests import CombineRequest, ImportRequest, ReportRequest
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish, warn


@click.command(name="combine")
@request_options(CombineRequest)
def combine(request: CombineRequest, as_json: bool) -> None:
    """Compare result files side by side: ratios B/A with 95% intervals, paired quality, drift, cost.

    The first file is the baseline A. A target given twice (A B A) is reported as drift.

    \b
    Examples:
      gemmaserve bench combine results/t4-bf16.json results/t4-qat.json
      gemmaserve bench combine a.json b.json a-2.json --out comparison.md
      gemmaserve bench combine a.json b.json --utilisation 0.25 --json
    """
    from gemmaserve.bench.analysis import combine_files

    comparison = combine_files(request)
    if request.out:
        click.echo(f"Wrote {request.out}", err=True)
    finish(comparison, as_json=as_json)


@click.command(name="report")
@request_options(ReportRequest)
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
    if not as_json:
        for warning in output.warnings:
            warn(warning)
    finish(output, as_json=as_json)


@click.command(name="import")
@request_options(ImportRequest)
def import_vllm(request: ImportRequest, as_json: bool) -> None:
    """Convert a `vllm bench serve --save-result` JSON file into a gemmaserve result file.

    \b
    Examples:
      gemmaserve bench import vllm-result.json --out results/vllm.json
      gemmaserve bench import vllm-result.json --out results/t4.json --label t4 --instance ml.g4dn.xlarge
    """
    from gemmaserve.bench.analysis import import_vllm_file

    finish(import_vllm_file(request), as_json=as_json)
