"""``bench report DIR``: a Markdown report, and a standalone HTML page with PNG charts, from saved files.

Reads every ``*.json`` in the directory: gemmaserve result files, and ``vllm bench
serve --save-result`` files (imported on the fly so they sit in the same tables).
The Markdown needs nothing optional; charts and HTML need the ``report`` extra
(matplotlib), imported only when asked for.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from gemmaserve.bench import charts, html, plausibility
from gemmaserve.bench.combine import (
    Comparison,
    Disagreement,
    QualityComparison,
    RatioRow,
    combine_loaded,
    decode_findings,
    result_warnings,
    summarize_target,
)
from gemmaserve.bench.cost_table import cost_table
from gemmaserve.bench.vllm_import import import_vllm_result, looks_like_vllm_result
from gemmaserve.errors import ResultFileInvalid, UsageError
from gemmaserve.fileio import write_atomic
from gemmaserve.measurements.schema import PlausibilityFinding, ResultFile, parse_result
from gemmaserve.result_model import ActionResult


class ReportOutput(ActionResult):
    """What ``bench report`` returns: the files it wrote and read, and what it found."""

    directory: str
    markdown_path: str
    html_path: str | None
    charts: list[str]
    files: list[str]
    imported: list[str]  # vLLM result files converted on the fly
    skipped: list[str]  # JSON files that are neither (e.g. a combine --out comparison)
    comparison: Comparison | None
    findings: dict[str, list[PlausibilityFinding]]  # per target label as shown: implausible decode figures
    warnings: list[str]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def quality_cell(correct: int | None, answered: int | None, total: int | None) -> str:
    """Correct of answered, and how many were left out (a failed request is not a wrong answer)."""
    if correct is None or not total:
        return "—"
    answered = total if answered is None else answered
    left_out = f" ({total - answered} failed, left out)" if total > answered else ""
    return f"{correct}/{answered}{left_out}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f}"


def _fixed_cost(intercept_s: float | None, flag: str | None) -> str:
    if intercept_s is not None and flag is not None:
        return f"n/a: {flag} intercept ({intercept_s * 1000:.1f} ms), not a fixed cost"
    return _ms(intercept_s)


def _interval(low: float, high: float) -> str:
    return f"{low:,.2f}–{high:,.2f}" if high != float("inf") else f"{low:,.2f}–∞"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def load_directory(directory: str | os.PathLike[str]) -> tuple[list[ResultFile], list[str], list[str], list[str]]:
    """(results, their paths, imported vLLM paths, skipped paths), in file-name order."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory.", hint="gemmaserve bench report DIR (the --out of bench measure)")
    results, paths, imported, skipped = [], [], [], []
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultFileInvalid(f"{path} is not readable JSON: {exc}", path=str(path)) from None
        if isinstance(data, dict) and "schema_version" in data:
            results.append(parse_result(data, source=str(path)))
        elif looks_like_vllm_result(data):
            results.append(import_vllm_result(path))
            imported.append(str(path))
        elif isinstance(data, dict) and {"pairs", "baseline", "targets"} <= set(data):
            skipped.append(str(path))
            continue
        else:
            raise ResultFileInvalid(
                f"{path} is neither a gemmaserve result file nor a vllm bench serve result.",
                hint="Move it out of the report directory.",
                path=str(path),
            )
        paths.append(str(path))
    if not results:
        raise UsageError(f"No result files in {root}.", hint="Run: gemmaserve bench measure TARGET --out DIR")
    return results, paths, imported, skipped


#: Disagreeing answers a comparison lists per pair (the JSON holds them all).
SHOWN_DISAGREEMENTS = 50


def ratio_cells(row: RatioRow) -> list[str]:
    """One ratio as shown: metric, unit (seconds as ms), A, B, B/A and its 95% interval."""
    digits = {"s": 2, "": 3, "tokens": 0}.get(row.unit, 1)
    scale, unit = (1000.0, "ms") if row.unit == "s" else (1.0, row.unit)
    a = row.a * scale if row.a is not None else None
    b = row.b * scale if row.b is not None else None
    ci = f"{row.ci_low:.3f}–{row.ci_high:.3f}" if row.ci_low is not None and row.ci_high is not None else "—"
    return [row.metric, unit, _fmt(a, digits), _fmt(b, digits), _fmt(row.ratio, 3), ci]


def disagreements_heading(quality: QualityComparison) -> str:
    return f"Answers that differ ({len(quality.disagreements)} of {quality.paired}; {quality.identical_answers} identical):"


def disagreement_cells(d: Disagreement) -> list[str]:
    """One question the two answered differently: its id, the expected answer, each side's and whether right."""
    return [
        d.question_id,
        d.expected,
        f"{d.a_extracted or '—'} {'✓' if d.a_correct else '✗'}",
        f"{d.b_extracted or '—'} {'✓' if d.b_correct else '✗'}",
    ]


def comparison_markdown(comparison: Comparison) -> str:
    """The comparison part: ratios B/A with intervals, quality verdicts and disagreements, drift, warnings."""
    lines: list[str] = []
    for pair in comparison.pairs:
        lines += [f"### {pair.b} vs {pair.a}", ""]
        lines += [f"- {sentence}" for sentence in pair.sentences] + [""]
        rows = [ratio_cells(row) for row in pair.ratios]
        lines += _table(["metric", "unit", pair.a, pair.b, "B/A", "95% CI of B/A"], rows)
        if pair.quality and pair.quality.disagreements:
            lines += [disagreements_heading(pair.quality), ""]
            lines += _table(
                ["question", "expected", pair.a, pair.b],
                [disagreement_cells(d) for d in pair.quality.disagreements[:SHOWN_DISAGREEMENTS]],
            )
    if comparison.drift:
        lines += ["### Drift (the same target measured twice)", ""]
        lines += [f"- {row.sentence}" for row in comparison.drift] + [""]
    if comparison.warnings:
        lines += ["### Warnings", ""] + [f"- {warning}" for warning in comparison.warnings] + [""]
    return "\n".join(lines)


def _latency_rows(results: Sequence[ResultFile]) -> list[list[str]]:
    rows = []
    for result in results:
        for level in result.load:
            cells = [result.target.label, str(level.concurrency)]
            for metric in (level.ttft_s, level.tpot_s, level.itl_s, level.e2el_s):
                if metric is not None and metric.not_measurable:
                    cells += [metric.not_measurable, "—"]
                else:
                    cells += [_ms(metric.p50 if metric else None), _ms(metric.p99 if metric else None)]
            rows.append(cells)
    return rows


def render_markdown(
    results: Sequence[ResultFile],
    paths: Sequence[str],
    comparison: Comparison | None,
    *,
    chart_files: Sequence[str] = (),
    utilisation: float = 1.0,
) -> str:
    summaries = [summarize_target(r, p) for r, p in zip(results, paths, strict=True)]
    lines = ["# Benchmark report", ""]
    lines += _table(
        ["target", "URL", "GPU", "instance", "$/hour", "price date", "complete", "failed requests"],
        [
            [
                s.label,
                f"`{s.url}`",
                s.gpu or "—",
                s.instance or "—",
                _fmt(s.price_usd_per_hour, 4),
                r.hardware.price_date or "—",
                "yes" if not s.missing else "missing " + ", ".join(s.missing),
                f"{r.failures.failed}/{r.failures.requests}",
            ]
            for s, r in zip(summaries, results, strict=True)
        ],
    )
    charts_by_name = {Path(name).stem: Path(name).name for name in chart_files}
    lines += [
        "## Decode rate (one stream)",
        "",
        (
            "Rate = (long − short) / (median wall at long − median wall at short); the per-call fixed cost is "
            "the line's value at 0 tokens."
        ),
        "",
    ]
    lines += _table(
        ["target", "tok/s", "95% CI", "per-call fixed cost (ms)"],
        [
            [
                s.label,
                _fmt(s.decode_tokens_per_s, 2),
                _interval(s.decode_ci.low, s.decode_ci.high) if s.decode_ci else "—",
                _fixed_cost(s.intercept_s, s.intercept_flag),
            ]
            for s in summaries
        ],
    )
    flagged = [(s.label, finding) for s in summaries for finding in s.findings]
    if flagged:
        lines += [
            "Plausibility findings (how a call is timed bounds these figures; docs/bench-report.md says how):",
            "",
        ]
        lines += [f"- {label}: {plausibility.finding_line(finding)}" for label, finding in flagged] + [""]
    if "decode" in charts_by_name:
        lines += [f"![decode rates]({charts_by_name['decode']})", ""]
    levels = sorted({c for s in summaries for c in s.load_tokens_per_s})
    lines += ["## Throughput vs concurrency (aggregate output tok/s, median of repeats)", ""]
    lines += _table(
        ["concurrency", *(s.label for s in summaries)],
        [[str(c), *(_fmt(s.load_tokens_per_s.get(c)) for s in summaries)] for c in levels],
    )
    if "throughput" in charts_by_name:
        lines += [f"![throughput]({charts_by_name['throughput']})", ""]
    lines += ["## Latency percentiles (ms)", ""]
    lines += _table(
        [
            "target",
            "conc.",
            "TTFT p50",
            "TTFT p99",
            "TPOT p50",
            "TPOT p99",
            "ITL p50",
            "ITL p99",
            "E2EL p50",
            "E2EL p99",
        ],
        _latency_rows(results),
    )
    if "latency" in charts_by_name:
        lines += [f"![latency]({charts_by_name['latency']})", ""]
    quality = [(s, r) for s, r in zip(summaries, results, strict=True) if r.quality]
    if quality:
        lines += [
            "## Answer quality",
            "",
            "Correct of the questions answered: a failed request is not a wrong answer; it is left out and "
            "counted apart, as the comparison does.",
            "",
        ]
        lines += _table(
            ["target", "set", "correct", "95% CI (Wilson)"],
            [
                [
                    s.label,
                    r.quality.set_name if r.quality else "—",
                    quality_cell(s.quality_correct, s.quality_answered, s.quality_total),
                    f"{s.quality_ci.low:.1%}–{s.quality_ci.high:.1%}" if s.quality_ci else "—",
                ]
                for s, r in quality
            ],
        )
        if "quality" in charts_by_name:
            lines += [f"![quality]({charts_by_name['quality']})", ""]
    tables = [t for t in (cost_table(r, utilisation=utilisation) for r in results) if t is not None]
    if tables:
        lines += [f"## Cost per million output tokens (at {utilisation:.0%} utilisation; idle hours bill too)", ""]
        cost_rows = []
        for table in tables:
            for point in table.points:
                where = "decode (1 stream)" if point.concurrency == 0 else f"c={point.concurrency}"
                cost_rows.append(
                    [
                        table.label,
                        where,
                        _fmt(point.output_tokens_per_s),
                        _fmt(table.price_usd_per_hour, 4),
                        f"${point.usd_per_million_output_tokens:,.2f}",
                    ]
                )
        lines += _table(["target", "at", "tok/s", "$/hour", "$/M output tokens"], cost_rows)
        lines += [
            "Prices: "
            + "; ".join(
                f"{t.label}: {t.price_source or 'unknown source'}, {t.price_date or 'undated'}" for t in tables
            ),
            "",
        ]
        if "cost" in charts_by_name:
            lines += [f"![cost]({charts_by_name['cost']})", ""]
    overhead = [(r.target.label, r.client_overhead) for r in results if r.client_overhead]
    if overhead:
        lines += ["## Client overhead", ""]
        lines += _table(
            ["target", "CPU µs per chunk", "CPU share of wall", "note"],
            [
                [
                    label,
                    _fmt(o.cpu_s_per_chunk * 1e6 if o.cpu_s_per_chunk is not None else None),
                    f"{o.share:.1%}" if o.share is not None else "—",
                    o.warning or "",
                ]
                for label, o in overhead
            ],
        )
    if comparison is not None:
        lines += [f"## Comparison (baseline: {comparison.baseline})", "", comparison_markdown(comparison)]
    lines += ["## Files", ""] + [f"- `{path}`" for path in paths] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _distinct_labels(results: Sequence[ResultFile]) -> list[ResultFile]:
    """The second and later runs of a label become 'label (run 2)' for display."""
    seen: dict[str, int] = {}
    shown = []
    for result in results:
        label = result.target.label
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            target = result.target.model_copy(update={"label": f"{label} (run {seen[label]})"})
            result = result.model_copy(update={"target": target})
        shown.append(result)
    return shown


def build_report(
    directory: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    utilisation: float = 1.0,
    html_page: bool = True,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> ReportOutput:
    """Write ``report.md`` (and, with the extra, ``report.html`` plus ``*.png``) into ``out_dir``.

    ``out_dir`` defaults to ``DIR/report``. The Markdown is written first, so a
    missing extra loses nothing.

    Raises:
        UsageError: DIR is not a directory or holds no result files.
        ResultFileInvalid: a JSON file there is not a result file.
        MissingExtra: ``html_page`` and matplotlib is not installed (report.md is written).
    """
    if not 0 < utilisation <= 1:
        raise UsageError(f"utilisation must be in (0, 1], got {utilisation}.", hint="e.g. --utilisation 0.25")
    results, paths, imported, skipped = load_directory(directory)
    target = Path(out_dir) if out_dir is not None else Path(directory) / "report"
    target.mkdir(parents=True, exist_ok=True)
    comparison = combine_loaded(results, paths, utilisation=utilisation) if len(results) >= 2 else None
    # Drift needs the shared label; tables and charts need to tell the runs apart.
    results = _distinct_labels(results)
    markdown_path = target / "report.md"
    chart_files: list[str] = []
    html_path: str | None = None
    if html_page:
        write_atomic(markdown_path, render_markdown(results, paths, comparison, utilisation=utilisation))
        pyplot = charts.load_pyplot(import_module)  # raises MissingExtra, report.md already written
        chart_files = charts.draw_all(pyplot, results, target, utilisation=utilisation)
    markdown = render_markdown(results, paths, comparison, chart_files=chart_files, utilisation=utilisation)
    write_atomic(markdown_path, markdown)
    if html_page:
        page = target / "report.html"
        write_atomic(page, html.markdown_page(markdown, title="gemmaserve benchmark report", image_dir=target))
        html_path = str(page)
    return ReportOutput(
        directory=str(directory),
        markdown_path=str(markdown_path),
        html_path=html_path,
        charts=chart_files,
        files=paths,
        imported=imported,
        skipped=skipped,
        comparison=comparison,
        findings={result.target.label: decode_findings(result) for result in results},
        warnings=comparison.warnings if comparison else result_warnings(results),
    )
