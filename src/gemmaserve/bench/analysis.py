"""``bench combine``, ``bench report`` and ``bench import``: read saved result files, write derived ones.

Each action takes its request model (:mod:`gemmaserve.bench.requests`) and returns the typed result both
front ends render; none of them measures or prints. The analysis modules are imported inside the
functions, so importing this costs nothing until an action runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gemmaserve.bench.requests import CombineRequest, ImportedResult, ImportRequest, ReportRequest

if TYPE_CHECKING:
    from gemmaserve.bench.combine import Comparison
    from gemmaserve.bench.report import ReportOutput
    from gemmaserve.measurements.schema import HardwareInfo


def comparison_document(comparison: Comparison) -> str:
    """The comparison as one Markdown document (what ``bench combine --out FILE.md`` writes)."""
    from gemmaserve.bench.report import comparison_markdown

    return f"# Comparison (baseline: {comparison.baseline})\n\n" + comparison_markdown(comparison)


def combine_files(request: CombineRequest) -> Comparison:
    """Compare the result files (the first is the baseline A); with ``out``, also write the comparison.

    ``out`` ending in ``.md`` gets the Markdown document, any other name the JSON document.

    Raises:
        ResultFileInvalid: a file is missing, not JSON, or not of this schema version.
        UsageError: fewer than two files.
        OSError: ``out`` cannot be written (its directory is missing, say).
    """
    from gemmaserve.bench.combine import combine_results
    from gemmaserve.fileio import write_atomic

    comparison = combine_results(list(request.files), utilisation=request.utilisation)
    if request.out:
        markdown = request.out.endswith(".md")
        write_atomic(
            request.out, comparison_document(comparison) if markdown else comparison.model_dump_json(indent=2) + "\n"
        )
    return comparison


def write_report(request: ReportRequest) -> ReportOutput:
    """``report.md`` (and, unless ``markdown_only``, ``report.html`` with PNG charts) from a directory.

    Raises:
        UsageError: the directory holds no result files.
        ResultFileInvalid: a JSON file there is not a result file.
        MissingExtra: the HTML page needs matplotlib (report.md is written first).
    """
    from gemmaserve.bench.report import build_report

    return build_report(
        request.directory, out_dir=request.out, utilisation=request.utilisation, html_page=not request.markdown_only
    )


def import_vllm_file(request: ImportRequest) -> ImportedResult:
    """Convert a ``vllm bench serve --save-result`` file into a result file at ``request.out``; return it
    and where it is.

    Raises:
        UnknownName: an instance type the catalog does not know.
        ResultFileInvalid: the input is not a vLLM result file.
    """
    from gemmaserve.bench.vllm_import import import_vllm_result
    from gemmaserve.measurements.schema import save_result

    hardware = _hardware(request.instance, request.region)
    result = import_vllm_result(request.vllm_file, label=request.label, url=request.url, hardware=hardware)
    Path(request.out).parent.mkdir(parents=True, exist_ok=True)
    save_result(result, request.out)
    return ImportedResult(**dict(result), path=request.out)


def _hardware(instance: str | None, region: str) -> HardwareInfo:
    from gemmaserve.measurements.schema import HardwareInfo

    if not instance:
        return HardwareInfo()
    from gemmaserve.catalog import resolve_instance
    from gemmaserve.cost import hourly_price

    entry = resolve_instance(instance)
    quote = hourly_price(entry.key, region)
    return HardwareInfo(
        gpu=entry.gpu,
        gpu_count=entry.gpu_count,
        instance=entry.key,
        price_usd_per_hour=quote.usd_per_hour if quote else None,
        price_region=quote.region if quote else None,
        price_date=quote.date if quote else None,
        price_source=quote.source if quote else None,
    )
