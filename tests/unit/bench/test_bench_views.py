"""The benchmark results' views (gemmaserve/views/bench.py): what measure, combine, report and import print.

Built from the results themselves (no run): the awkward cases first, an empty run, a percentile that could
not be measured, a fixed cost that is no cost, a comparison with no price; and ``ok`` (with the exit
status it gives) for every way a run can end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.bench.combine import Comparison, PairComparison, RatioRow
from gemmaserve.bench.report import ReportOutput
from gemmaserve.bench.requests import EXIT_CODES, ImportedResult, LatencyRow, MeasureReport, RunStatus, TargetSummary
from gemmaserve.cli import app
from gemmaserve.cli.errors import exit_code_for
from gemmaserve.measurements.schema import Percentiles, load_result
from gemmaserve.views import page_for, summary_for
from gemmaserve.views.bench import NOT_MEASURABLE_LEGEND
from gemmaserve.views.page import plain_lines

from .test_schema_builders import build_result


def _target(**changes: object) -> TargetSummary:
    values: dict[str, object] = {
        "url": "http://127.0.0.1:8000",
        "label": "t4",
        "path": "out/t4.json",
        "status": RunStatus.SUCCESS,
        "requests": 70,
        "failed": 0,
        "short_replies": 0,
        "failures_by_reason": {},
        "finished": ["decode", "load:1"],
        "missing": [],
        "decode_tokens_per_s": 200.04,
        "intercept_s": 0.0369,
        "load_output_tokens_per_s": {"c1": 179.4, "c4": None},
        "latency": [],
        "quality_correct": None,
        "quality_total": None,
        "client_warning": None,
    }
    return TargetSummary.model_validate({**values, **changes})


def _report(status: RunStatus, targets: list[TargetSummary]) -> MeasureReport:
    return MeasureReport(
        run_id="r",
        out_dir="out",
        status=status,
        exit_code=EXIT_CODES[status],
        transport="aiohttp",
        targets=targets,
        message="all good",
    )


@pytest.mark.parametrize("status", list(RunStatus))
def test_the_exit_status_from_ok_is_the_one_scripts_read_in_exit_code(status: RunStatus) -> None:
    report = _report(status, [_target(status=status)])
    assert exit_code_for(report) == report.exit_code == EXIT_CODES[status]
    assert report.model_dump(mode="json")["ok"] is (status is RunStatus.SUCCESS)  # partial is not ok


def test_a_run_reads_as_its_outcome_and_latency_tables_then_its_files_and_next_command() -> None:
    unmeasurable = Percentiles(n=8, not_measurable="not measurable: about 4 tokens per read")
    latency = LatencyRow(
        phase="load:1",
        concurrency=1,
        ttft_s=Percentiles(n=3, p50=0.0423, p99=0.0445),
        itl_s=unmeasurable,
        tpot_s=Percentiles(n=0),
    )
    flagged = _target(
        label="t4-qat",
        path="out/t4-qat.json",
        status=RunStatus.PARTIAL,
        failed=3,
        failures_by_reason={"http_500": 3},
        missing=["quality"],
        decode_tokens_per_s=None,
        intercept_flag="negative",
        load_output_tokens_per_s={},
        quality_correct=30,
        quality_answered=38,
        quality_total=40,
        latency=[latency],
    )
    lines = plain_lines(page_for(_report(RunStatus.PARTIAL, [_target(), flagged])))
    assert lines[0] == "bench measure — all good"
    cells = [re.split(r"\s{2,}", line) for line in lines[1:4]]
    assert cells == [
        ["target", "status", "decode tok/s", "fixed ms", "load tok/s", "quality", "failed"],
        ["t4", "success", "200.0", "36.9", "c1:179 c4:–", "–", "0/70"],
        ["t4-qat", "partial *", "–", "n/a (negative)", "–", "30/38 (2 failed, left out)", "3/70"],
    ]
    assert lines[4] == "" and re.split(r"\s{2,}", lines[6]) == ["t4-qat", "load:1", "42.3 / 44.5", "n/m", "–"]
    assert lines[7] == NOT_MEASURABLE_LEGEND
    assert lines[-4:] == [
        "",
        "* t4-qat: http_500 ×3; missing: quality",
        "Files: out/t4.json, out/t4-qat.json",
        "Next: gemmaserve bench combine out/t4.json out/t4-qat.json",
    ]
    assert max(len(line) for line in lines if not line.startswith(("Files:", "Next:"))) <= 100


def test_latency_that_could_not_be_measured_keeps_the_table_within_100_columns() -> None:
    """On a busy machine several tokens land per network read in every phase: ITL and TPOT both read
    not measurable, in each row (the page was 116 columns wide then)."""
    unmeasurable = Percentiles(n=30, not_measurable="not measurable: about 14 tokens per read")
    rows = [
        LatencyRow(
            phase=phase, concurrency=1, ttft_s=Percentiles(n=3, p50=0.0144, p99=0.0187), itl_s=unmeasurable,
            tpot_s=unmeasurable,
        )
        for phase in ("decode", "load:1", "load:16")
    ]  # fmt: skip
    lines = plain_lines(page_for(_report(RunStatus.SUCCESS, [_target(label="t4-qat-busy", latency=rows)])))
    assert max(len(line) for line in lines if not line.startswith(("Files:", "Next:"))) <= 100, lines
    assert lines.count(NOT_MEASURABLE_LEGEND) == 1


def test_a_run_of_one_target_points_to_the_report_and_one_of_none_to_nothing() -> None:
    one = plain_lines(page_for(_report(RunStatus.SUCCESS, [_target()])))
    assert one[-1] == "Next: gemmaserve bench report out"
    assert not any("TTFT" in line for line in one)  # no latency rows: no latency table
    none = plain_lines(page_for(_report(RunStatus.FAILED, [])))
    assert none == [
        "bench measure — all good",
        "target  status  decode tok/s  fixed ms  load tok/s  quality  failed",
        "(no rows)",
    ]


def test_the_agent_gets_the_warnings_the_cli_writes_to_stderr_and_the_page_has_none() -> None:
    warned = _target(client_warning="client used 40% of a core", decode_warnings=["rates disagree"], note="a note")
    report = _report(RunStatus.SUCCESS, [warned])
    text = summary_for(report)
    assert text.splitlines()[-3:] == [
        "Warning: t4: client used 40% of a core",
        "Warning: t4: rates disagree",
        "Warning: t4: a note",
    ]
    assert not any("Warning" in line for line in plain_lines(page_for(report)))


def _comparison(**changes: object) -> Comparison:
    pair = PairComparison(
        a="t4>",
        b="l4",
        ratios=[
            RatioRow(metric="decode rate", unit="tok/s", a=501.4, b=800.1, ratio=1.596, ci_low=1.594, ci_high=1.606),
            RatioRow(metric="per-call fixed cost", unit="s", a=0.05281, b=None, ratio=None),
        ],
        quality=None,
        break_even={},
        sentences=["l4 decodes at 1.60x the rate of t4>."],
    )
    values: dict[str, object] = {
        "files": ["a.json", "b.json"],
        "baseline": "t4>",
        "targets": [],
        "pairs": [pair],
        "drift": [],
        "costs": [],
        "warnings": ["t4> has no price: no cost figures."],
    }
    return Comparison.model_validate({**values, **changes})


def test_a_comparison_reads_as_sentences_and_a_ratio_table_with_labels_as_written() -> None:
    lines = plain_lines(page_for(_comparison()))
    assert lines[:4] == ["Comparison (baseline: t4>)", "", "l4 vs t4>", "- l4 decodes at 1.60x the rate of t4>."]
    assert lines[4] == "" and [re.split(r"\s{2,}", line.strip()) for line in lines[5:8]] == [
        ["metric", "unit", "t4>", "l4", "B/A", "95% CI of B/A"],  # a label ending in ">" is no alignment mark
        ["decode rate", "tok/s", "501.4", "800.1", "1.596", "1.594–1.606"],
        ["per-call fixed cost", "ms", "52.81", "—", "—", "—"],
    ]
    assert lines[-3:] == ["", "Warnings", "- t4> has no price: no cost figures."]
    assert _comparison().ok and exit_code_for(_comparison()) == 0


def test_a_comparison_of_nothing_but_drift_says_so() -> None:
    from gemmaserve.bench.combine import DriftRow

    drift = DriftRow(
        label="t4",
        metric="decode rate",
        first=500.0,
        second=499.0,
        ratio=0.998,
        ci_low=0.996,
        ci_high=1.003,
        significant=False,
        sentence="t4 decode rate: second run -0.2% vs first (within noise).",
    )
    lines = plain_lines(page_for(_comparison(pairs=[], drift=[drift], warnings=[])))
    assert lines == [
        "Comparison (baseline: t4>)",
        "",
        "Drift (the same target measured twice)",
        "- t4 decode rate: second run -0.2% vs first (within noise).",
    ]


def test_a_report_lists_its_files_and_the_agent_also_gets_its_warnings() -> None:
    output = ReportOutput(
        directory="run",
        markdown_path="run/report/report.md",
        html_path=None,
        charts=[],
        files=["run/a.json"],
        imported=["run/v.json"],
        skipped=["run/cmp.json"],
        comparison=None,
        findings={},
        warnings=["a: missing quality"],
    )
    assert plain_lines(page_for(output)) == [
        "Markdown: run/report/report.md",
        "Imported from vllm bench serve: run/v.json",
        "Skipped (not a result file): run/cmp.json",
    ]
    assert summary_for(output).splitlines()[-1] == "Warning: a: missing quality"


def test_an_import_is_the_file_as_saved_plus_where_and_ok(tmp_path: Path) -> None:
    from tests.unit.bench.test_report_vllm_import import _vllm_record

    source = tmp_path / "vllm.json"
    source.write_text(json.dumps(_vllm_record(4, 190.0)))
    out = tmp_path / "l4.json"
    shown = CliRunner().invoke(app, ["bench", "import", str(source), "--out", str(out), "--label", "l4"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == f"Wrote {out} (l4; c=4: 190.0 tok/s; temperature not recorded)\n"
    cli = CliRunner().invoke(app, ["bench", "import", str(source), "--out", str(out), "--label", "l4", "--json"])
    document = json.loads(cli.stdout)
    saved = json.loads(out.read_text())
    assert {key: value for key, value in document.items() if key not in ("ok", "path")} == saved
    assert (document["ok"], document["path"]) == (True, str(out))
    assert "ok" not in saved and load_result(out).target.label == "l4"  # the file stays a result file
    assert ImportedResult.model_validate(document).model_dump(mode="json") == document


def test_an_import_with_no_load_level_and_a_temperature_reads_plainly() -> None:
    result = build_result(label="t4", load_tok_s={})
    result.client.temperature = 0.7
    imported = ImportedResult(**dict(result), path="x.json")
    assert plain_lines(page_for(imported)) == ["Wrote x.json (t4; no load level; temperature 0.7)"]
