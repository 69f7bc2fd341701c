"""Views of the benchmark's results: ``bench measure``, ``combine``, ``report`` and ``import``.

``measure`` reads as two tables that fit 100 columns (the outcome per target; TTFT/ITL/TPOT p50 / p99 per
target and phase), ``combine`` as the comparison's sentences and ratio tables, ``report`` and ``import`` as
the files they wrote. The warnings the CLI writes to stderr (:func:`measure_warnings`, a report's
``warnings``) are not on the page; an agent, who has no stderr, gets them at the end of the MCP text.
"""

from __future__ import annotations

from gemmaserve.bench.combine import Comparison, PairComparison
from gemmaserve.bench.report import ReportOutput
from gemmaserve.bench.requests import ImportedResult, MeasureReport, RunStatus, TargetSummary
from gemmaserve.measurements.schema import Percentiles, ResultFile
from gemmaserve.views import summary, view
from gemmaserve.views.page import Block, Column, Line, Page, Row, Style, page, summary_text, table

STATUS_STYLES: dict[RunStatus, Style | None] = {
    RunStatus.SUCCESS: None,
    RunStatus.PARTIAL: "warn",
    RunStatus.INTERRUPTED: "warn",
    RunStatus.FAILED: "bad",
}


# A latency cell the client could not measure reads "n/m", explained once below its table (the reason, with
# how many tokens arrived per read, is in the result file and --json); written out in each cell, two of them
# took a row past 100 columns.
NOT_MEASURABLE_LEGEND = "n/m: not measurable, several tokens arrived per network read (--json says how many)"


@view(MeasureReport)
def measure_page(report: MeasureReport) -> Page:
    latency = [
        (target.label, row.phase, _ms(row.ttft_s), _ms(row.itl_s), _ms(row.tpot_s))
        for target in report.targets
        for row in target.latency
    ]
    paths = [target.path for target in report.targets]
    if len(paths) > 1:
        next_step = f"Next: gemmaserve bench combine {' '.join(paths)}"
    else:
        next_step = f"Next: gemmaserve bench report {report.out_dir}"
    return page(
        Line(f"bench measure — {report.message}", STATUS_STYLES[report.status]),
        table(
            ["target", "status", "decode tok/s>", "fixed ms>", "load tok/s", "quality>", "failed>"],
            [Row(_outcome_cells(target), STATUS_STYLES[target.status]) for target in report.targets],
        ),
        "" if latency else None,
        table(["target", "phase", "TTFT ms p50 / p99>", "ITL ms p50 / p99>", "TPOT ms p50 / p99>"], latency)
        if latency
        else None,
        NOT_MEASURABLE_LEGEND if any("n/m" in row for row in latency) else None,
        "" if paths else None,
        *(_problems(target) for target in report.targets),
        f"Files: {', '.join(paths)}" if paths else None,
        next_step if paths else None,
    )


@summary(MeasureReport)
def measure_summary(report: MeasureReport) -> str:
    """The page, then the warnings the CLI writes to stderr."""
    return _with_warnings(measure_page(report), measure_warnings(report))


def measure_warnings(report: MeasureReport) -> list[str]:
    """Per target: the client's own load, implausible decode figures, a note (``"t4: …"``)."""
    return [
        f"{target.label}: {message}"
        for target in report.targets
        for message in (target.client_warning, *target.decode_warnings, target.note)
        if message
    ]


def _outcome_cells(target: TargetSummary) -> tuple[str, ...]:
    load = " ".join(
        f"{level}:{rate:.0f}" if rate is not None else f"{level}:–"
        for level, rate in target.load_output_tokens_per_s.items()
    )
    return (
        target.label,
        target.status.value + (" *" if target.missing or target.failures_by_reason else ""),
        f"{target.decode_tokens_per_s:.1f}" if target.decode_tokens_per_s else "–",
        _fixed_cost(target.intercept_s, target.intercept_flag),
        load or "–",
        _quality(target),
        f"{target.failed}/{target.requests}",
    )


def _fixed_cost(intercept_s: float | None, flag: str | None) -> str:
    if intercept_s is None:
        return "–"
    if flag is not None:  # never shown as a cost: it says the line does not fit
        return f"n/a ({flag})"
    return f"{intercept_s * 1000:.1f}"


def _quality(target: TargetSummary) -> str:
    from gemmaserve.bench.report import quality_cell

    return quality_cell(target.quality_correct, target.quality_answered, target.quality_total).replace("—", "–")


def _ms(values: Percentiles) -> str:
    if values.not_measurable:
        return "n/m"
    if values.p50 is None or values.p99 is None:
        return "–"
    return f"{values.p50 * 1000:.1f} / {values.p99 * 1000:.1f}"


def _problems(target: TargetSummary) -> Line | None:
    """``* t4: http_500 ×3; missing: load:16``: what the ``*`` after a status stands for."""
    problems = [f"{reason} ×{count}" for reason, count in sorted(target.failures_by_reason.items())]
    if target.missing:
        problems.append(f"missing: {', '.join(target.missing)}")
    return Line(f"* {target.label}: {'; '.join(problems)}", "warn") if problems else None


@view(Comparison)
def comparison_page(comparison: Comparison) -> Page:
    """The comparison document's sections (``bench combine --out FILE.md`` writes them as Markdown)."""
    blocks: list[Block | str | None] = [Line(f"Comparison (baseline: {comparison.baseline})", "bold")]
    for pair in comparison.pairs:
        blocks += _pair_blocks(pair)
    if comparison.drift:
        blocks += ["", Line("Drift (the same target measured twice)", "bold")]
        blocks += [f"- {row.sentence}" for row in comparison.drift]
    if comparison.warnings:
        blocks += ["", Line("Warnings", "bold")]
        blocks += [Line(f"- {warning}", "warn") for warning in comparison.warnings]
    return page(*blocks)


def _pair_blocks(pair: PairComparison) -> list[Block | str | None]:
    from gemmaserve.bench.report import SHOWN_DISAGREEMENTS, disagreement_cells, disagreements_heading, ratio_cells

    numbers = [Column(pair.a, "right"), Column(pair.b, "right"), Column("B/A", "right")]
    blocks: list[Block | str | None] = ["", Line(f"{pair.b} vs {pair.a}", "bold")]
    blocks += [f"- {sentence}" for sentence in pair.sentences]
    blocks.append("")
    blocks.append(table(["metric", "unit", *numbers, "95% CI of B/A"], [ratio_cells(row) for row in pair.ratios]))
    quality = pair.quality
    if quality and quality.disagreements:
        blocks.append(disagreements_heading(quality))
        shown = quality.disagreements[:SHOWN_DISAGREEMENTS]
        sides = [Column(pair.a), Column(pair.b)]
        blocks.append(table(["question", "expected", *sides], [disagreement_cells(d) for d in shown]))
    return blocks


@view(ReportOutput)
def report_page(output: ReportOutput) -> Page:
    return page(
        f"Markdown: {output.markdown_path}",
        f"HTML:     {output.html_path}" if output.html_path else None,
        *(f"Chart:    {chart}" for chart in output.charts),
        *(f"Imported from vllm bench serve: {path}" for path in output.imported),
        *(f"Skipped (not a result file): {path}" for path in output.skipped),
    )


@summary(ReportOutput)
def report_summary(output: ReportOutput) -> str:
    """The page, then the warnings the CLI writes to stderr."""
    return _with_warnings(report_page(output), output.warnings)


@view(ImportedResult)
def imported_page(result: ImportedResult) -> Page:
    return page(f"Wrote {result.path} ({result.target.label}; {import_summary(result)})")


def import_summary(result: ResultFile) -> str:
    """The load levels an imported file holds and its temperature: ``c=8: 1,234.5 tok/s; temperature …``."""
    from gemmaserve.bench.vllm_import import TEMPERATURE_FROM_METADATA

    levels = (
        ", ".join(
            f"c={level.concurrency}: "
            + ("–" if level.median_output_tokens_per_s is None else f"{level.median_output_tokens_per_s:,.1f}")
            + " tok/s"
            for level in result.load
        )
        or "no load level"
    )
    temperature, note = result.client.temperature, result.client.sampling_note
    if temperature is None:
        return levels + "; temperature not recorded"
    source = " (from --metadata)" if note == TEMPERATURE_FROM_METADATA else ""
    return levels + f"; temperature {temperature:g}{source}"


def _with_warnings(shown: Page, warnings: list[str]) -> str:
    return "\n".join([summary_text(shown), *(f"Warning: {warning}" for warning in warnings)])
