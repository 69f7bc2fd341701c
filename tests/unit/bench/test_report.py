from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from gemmaserve.bench import report
from gemmaserve.cli import app
from gemmaserve.errors import MissingExtra, ResultFileInvalid, UsageError
from gemmaserve.measurements import schema

from .test_schema_builders import build_result, save_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _directory(tmp_path: Path) -> Path:
    return save_run(
        tmp_path / "run",
        build_result(
            label="t4-bf16",
            correct=[True] * 37 + [False] * 3,
            load_tok_s={1: [48.0, 49.0, 50.0], 4: [180.0, 185.0, 190.0]},
        ),
        build_result(
            label="l4-bf16",
            url="http://127.0.0.1:8001",
            rate_tokens_per_s=80.0,
            price_usd_per_hour=1.1267,
            gpu="l4",
            instance="ml.g6.xlarge",
            correct=[True] * 38 + [False] * 2,
            load_tok_s={1: [78.0, 79.0, 80.0], 4: [300.0, 305.0, 310.0]},
            seed=4,
        ),
    )


def test_report_writes_markdown_html_and_charts(tmp_path: Path) -> None:
    output = report.build_report(_directory(tmp_path))
    markdown = Path(output.markdown_path).read_text()
    assert "| t4-bf16 | 50.00 |" in markdown
    assert "| 4 | 185.0 | 305.0 |" in markdown
    assert "l4-bf16 answers 38/40 vs t4-bf16 37/40: no measurable difference" in markdown
    # $0.736/h at 185 tok/s.
    assert f"${0.736 / (185 * 3600) * 1e6:,.2f}" in markdown
    assert {Path(p).name for p in output.charts} == {
        "decode.png",
        "throughput.png",
        "latency.png",
        "cost.png",
        "quality.png",
    }
    for chart in output.charts:
        assert Path(chart).read_bytes().startswith(PNG_MAGIC)
    page = Path(output.html_path or "").read_text()
    assert page.count("data:image/png;base64,") == 5
    assert not re.search(r'src="(?!data:)', page), "the page must not reference external files"
    assert "<table>" in page and "<h2>Decode rate (one stream)</h2>" in page


def test_markdown_only_needs_no_matplotlib(tmp_path: Path) -> None:
    def no_matplotlib(name: str) -> ModuleType:
        raise ImportError(f"No module named {name!r}")

    directory = _directory(tmp_path)
    output = report.build_report(directory, html_page=False, import_module=no_matplotlib)
    assert output.html_path is None and output.charts == []
    assert "![" not in Path(output.markdown_path).read_text()


def test_missing_matplotlib_names_the_extra_and_keeps_the_markdown(tmp_path: Path) -> None:
    def no_matplotlib(name: str) -> ModuleType:
        raise ImportError(f"No module named {name!r}")

    directory = _directory(tmp_path)
    with pytest.raises(MissingExtra) as info:
        report.build_report(directory, import_module=no_matplotlib)
    assert info.value.hint == 'pip install "gemmaserve[report]"'
    assert (directory / "report" / "report.md").is_file()


def test_one_file_reports_without_a_comparison(tmp_path: Path) -> None:
    directory = tmp_path / "one"
    directory.mkdir()
    result = build_result(price_usd_per_hour=None)
    result.completeness.missing = ["quality"]
    schema.save_result(result, directory / "a.json")
    output = report.build_report(directory, html_page=False)
    assert output.comparison is None
    assert any("missing quality" in w for w in output.warnings)


def test_a_comparison_file_in_the_directory_is_skipped(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    comparison = report.combine_loaded(
        [schema.load_result(directory / "a.json"), schema.load_result(directory / "b.json")], ["a", "b"]
    )
    (directory / "comparison.json").write_text(comparison.model_dump_json())
    output = report.build_report(directory, html_page=False)
    assert output.skipped == [str(directory / "comparison.json")]


def test_a_stranger_json_file_is_refused_by_name(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    (directory / "notes.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ResultFileInvalid, match=r"notes\.json is neither"):
        report.build_report(directory, html_page=False)


def test_empty_or_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="No result files"):
        report.build_report(tmp_path, html_page=False)
    with pytest.raises(UsageError, match="not a directory"):
        report.build_report(tmp_path / "nope", html_page=False)


# --- the CLI ------------------------------------------------------------------


def test_cli_combine_json_and_out_file(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    runner = CliRunner()
    out = tmp_path / "cmp.json"
    result = runner.invoke(
        app, ["bench", "combine", str(directory / "a.json"), str(directory / "b.json"), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["baseline"] == "t4-bf16"
    assert json.loads(out.read_text()) == document
    text = runner.invoke(app, ["bench", "combine", str(directory / "a.json"), str(directory / "b.json")])
    assert text.exit_code == 0 and text.stdout.startswith("Comparison (baseline: t4-bf16)\n")
    lines = text.stdout.splitlines()
    for sentence in document["pairs"][0]["sentences"]:
        assert f"- {sentence}" in lines
    assert "Answers that differ (1 of 40; 39 identical):" in lines
    assert re.split(r"\s{2,}", lines[-1]) == ["q37", "42", "41 ✗", "42 ✓"]  # the differing answer, each side's mark


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["bench", "combine", "only.json"], 2),
        (["bench", "combine", "a.json", "missing.json"], 1),
        (["bench", "combine", "a.json", "b.json", "--utilisation", "0"], 2),
    ],
)
def test_cli_combine_exit_codes(tmp_path: Path, args: list[str], code: int) -> None:
    directory = _directory(tmp_path)
    schema.save_result(build_result(), directory / "only.json")
    args = [str(directory / a) if a.endswith(".json") else a for a in args]
    from gemmaserve.cli.errors import run_with_error_mapping

    assert run_with_error_mapping(app, args, debug=False) == code


def test_cli_report(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    result = CliRunner().invoke(app, ["bench", "report", str(directory), "--markdown-only", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["markdown_path"].endswith("report.md")


def test_a_target_measured_twice_is_told_apart_and_its_drift_reported(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    schema.save_result(build_result(label="t4-bf16", seed=7), directory / "c.json")
    output = report.build_report(directory, html_page=False)
    markdown = Path(output.markdown_path).read_text()
    assert "| t4-bf16 (run 2) |" in markdown
    assert output.comparison is not None and output.comparison.drift
    assert "### Drift (the same target measured twice)" in markdown


@pytest.mark.parametrize("correct", [[True] * 40, [False] * 40, [True] * 7], ids=["40-of-40", "0-of-40", "7-of-7"])
def test_perfect_or_zero_score_reports_with_its_interval(tmp_path: Path, correct: list[bool]) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    schema.save_result(build_result(label="a", correct=correct), directory / "a.json")
    schema.save_result(
        build_result(label="b", url="http://127.0.0.1:8001", correct=[True] * 20 + [False] * 20, seed=3),
        directory / "b.json",
    )
    output = report.build_report(directory)
    assert output.html_path and Path(output.html_path).exists()
    assert "quality.png" in {Path(p).name for p in output.charts}


def test_wilson_interval_contains_the_score_at_both_extremes() -> None:
    from gemmaserve.measurements import stats

    for total in (1, 3, 7, 40, 391, 1000):
        for correct in (0, 1, total - 1, total):
            interval = stats.wilson_interval(correct, total)
            share = correct / total
            assert interval.low <= share <= interval.high, (correct, total)
        assert stats.wilson_interval(0, total).low == 0.0
        assert stats.wilson_interval(total, total).high == 1.0


def test_report_over_failures_missing_phases_and_a_negative_intercept(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    failed = build_result(label="failing", correct=[False] * 10, load_tok_s={1: [40.0], 4: []})
    requests = [
        r.model_copy(
            update={
                "success": False,
                "error": "timeout: no reply",
                "ttft_s": None,
                "e2el_s": None,
                "itl_s": [],
                "tpot_s": None,
            }
        )
        if i % 2
        else r
        for i, r in enumerate(failed.requests)
    ]
    failed = failed.model_copy(
        update={
            "requests": requests,
            "decode": failed.decode.model_copy(update={"long_e2el_s": []}) if failed.decode else None,
            "quality": None,
            "completeness": schema.Completeness(
                planned=["decode", "load:1", "load:4", "quality"],
                finished=["load:1"],
                missing=["decode", "load:4", "quality"],
                interrupted=True,
            ),
            "failures": schema.FailureSummary(
                requests=len(requests), failed=len(requests) // 2, by_reason={"timeout": len(requests) // 2}
            ),
        }
    )
    schema.save_result(failed, directory / "failing.json")
    negative = build_result(
        label="negative",
        url="http://127.0.0.1:8001",
        intercept_s=-0.010,
        rate_tokens_per_s=404.8,
        correct=[True] * 40,
        seed=5,
    )
    schema.save_result(negative, directory / "negative.json")
    empty = build_result(
        label="empty", url="http://127.0.0.1:8002", load_tok_s={}, correct=None, weights_gib=None, kv_cache_tokens=None
    )
    empty = empty.model_copy(
        update={
            "decode": None,
            "completeness": schema.Completeness(planned=["decode"], finished=[], missing=["decode"], interrupted=True),
        }
    )
    schema.save_result(empty, directory / "empty.json")
    output = report.build_report(directory)
    markdown = Path(output.markdown_path).read_text()
    assert "missing decode, load:4, quality" in markdown
    assert re.search(
        r"\| negative \| [\d.]+ \| [^|]* \| n/a: negative intercept \(-\d+\.\d ms\), not a fixed cost \|", markdown
    )
    assert output.html_path and Path(output.html_path).exists()
