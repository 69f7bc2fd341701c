"""Plausibility findings where results are shown: report (Markdown, HTML, --json), combine, MCP summaries."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gemmaserve.bench import combine, report
from gemmaserve.bench.requests import MeasureReport, RunStatus, TargetSummary
from gemmaserve.cli import app
from gemmaserve.mcp_server import build_server
from gemmaserve.measurements import schema
from gemmaserve.views import summary_for
from tests.support.mcp.fixtures import call_tool

from .test_plausibility import LONG, SHORT, _calls
from .test_schema_builders import build_result, save_run

BOTH = [schema.PlausibilityFlag.FIXED_COST_ABOVE_TTFT, schema.PlausibilityFlag.DECODE_RATES_DISAGREE]


def _with_decode_calls(result: schema.ResultFile, records: list[schema.RequestRecord]) -> schema.ResultFile:
    """The result with these decode calls, its decode section as a file written before the findings had."""
    walls = {tokens: [r.e2el_s for r in records if r.requested_output_tokens == tokens] for tokens in (SHORT, LONG)}
    decode = schema.DecodeMeasurement(
        short_tokens=SHORT,
        long_tokens=LONG,
        short_e2el_s=[w for w in walls[SHORT] if w is not None],
        long_e2el_s=[w for w in walls[LONG] if w is not None],
    )
    return result.model_copy(update={"requests": [*result.requests, *records], "decode": decode})


def _directory(tmp_path: Path) -> Path:
    honest = _with_decode_calls(build_result(label="honest"), _calls(jitter_s=0.002))
    # The quoted case: a 250 ms fixed cost against a TTFT of 45 ms. The 225 ms each call spends beyond its
    # tokens is in the streams' TPOT too (20.4 ms, not 20), so the two rates disagree as well.
    queued = _with_decode_calls(
        build_result(label="queued", url="http://127.0.0.1:8001", seed=2), _calls(extra_end_s=0.225)
    )
    return save_run(tmp_path / "run", honest, queued)


def test_report_names_the_finding_with_its_numbers_in_markdown_html_and_json(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    output = report.build_report(directory)
    markdown = Path(output.markdown_path).read_text()
    assert "| queued | 50.00 | 50.00–50.00 | n/a: above_ttft intercept (250.0 ms), not a fixed cost |" in markdown
    assert "| honest | 50.01 | 49.99–50.01 | 25.2 |" in markdown
    assert "- queued: fixed_cost_above_ttft: per-call fixed cost 250.0 ms is 205.0 ms above" in markdown
    assert "honest: fixed_cost_above_ttft" not in markdown
    assert output.html_path and "fixed_cost_above_ttft" in Path(output.html_path).read_text()
    assert [f.flag for f in output.findings["queued"]] == BOTH
    assert output.findings["honest"] == []
    assert any(w.startswith("queued: fixed_cost_above_ttft: ") for w in output.warnings)

    cli = CliRunner().invoke(app, ["bench", "report", str(directory), "--markdown-only", "--json"])
    assert cli.exit_code == 0, cli.output
    document = json.loads(cli.stdout)
    finding = document["findings"]["queued"][0]
    assert finding["flag"] == "fixed_cost_above_ttft" and round(finding["numbers"]["ttft_ms"]) == 45
    text = CliRunner().invoke(app, ["bench", "report", str(directory), "--markdown-only"])
    assert "Warning: queued: fixed_cost_above_ttft: " in text.stderr


def test_combine_carries_the_finding_and_drops_the_fixed_cost_ratio(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    files = [str(directory / "a.json"), str(directory / "b.json")]
    comparison = combine.combine_results(files)
    queued = next(t for t in comparison.targets if t.label == "queued")
    assert queued.intercept_flag == "above_ttft"
    assert [f.flag for f in queued.findings] == BOTH
    assert not any(row.metric == "per-call fixed cost" for pair in comparison.pairs for row in pair.ratios)
    assert any("queued: fixed_cost_above_ttft: " in w for w in comparison.warnings)
    text = CliRunner().invoke(app, ["bench", "combine", *files])
    assert text.exit_code == 0 and "- queued: fixed_cost_above_ttft: per-call fixed cost 250.0 ms" in text.stdout


def test_mcp_summaries_show_the_findings(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    server = build_server()
    reported = call_tool(server, "bench_report", {"directory": str(directory), "markdown_only": True})
    assert "Warning: queued: fixed_cost_above_ttft: " in reported.content[0].text  # type: ignore[union-attr]
    files = [str(directory / "a.json"), str(directory / "b.json")]
    combined = call_tool(server, "bench_combine", {"files": files})
    assert "queued: fixed_cost_above_ttft: " in combined.content[0].text  # type: ignore[union-attr]


def test_measure_summary_for_an_agent_shows_the_decode_warnings() -> None:
    target = TargetSummary(
        url="http://127.0.0.1:8000",
        label="queued",
        path="out/queued.json",
        status=RunStatus.SUCCESS,
        requests=10,
        failed=0,
        short_replies=0,
        failures_by_reason={},
        finished=["decode"],
        missing=[],
        decode_tokens_per_s=50.0,
        intercept_s=0.25,
        intercept_flag="above_ttft",
        decode_warnings=["fixed_cost_above_ttft: per-call fixed cost 250.0 ms is 205.0 ms above …"],
        load_output_tokens_per_s={},
        quality_correct=None,
        quality_total=None,
        client_warning=None,
    )
    report_model = MeasureReport(
        run_id="r", out_dir="out", status=RunStatus.SUCCESS, exit_code=0, transport="t", targets=[target], message="ok"
    )
    text = summary_for(report_model)
    assert "n/a (above_ttft)" in text  # the fixed-cost cell: never shown as a cost
    assert "Warning: queued: fixed_cost_above_ttft: per-call fixed cost 250.0 ms" in text
