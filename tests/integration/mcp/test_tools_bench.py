"""``bench_measure`` against the local streaming server: agrees with the CLI, reports progress, refuses bad usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gemmaserve.cli import app
from gemmaserve.mcp_server import build_server
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import ThreadedMockServer, start_mock_thread
from tests.support.mcp.fixtures import (
    ProgressLog,
    call_tool,
    cli_json,
    error_details,
    error_text,
)

SMALL = {
    "max_client_lag_ms": 0,
    "decode_calls": 2,
    "decode_short": 4,
    "decode_long": 12,
    "concurrency": [1, 2],
    "repeats": 1,
    "input_tokens": 8,
    "output_tokens": 8,
    "quality_set": "none",
    "warmup": 0,
}
SMALL_CLI = [
    "--decode-calls",
    "2",
    "--decode-short",
    "4",
    "--decode-long",
    "12",
    "--concurrency",
    "1,2",
    "--repeats",
    "1",
    "--input-tokens",
    "8",
    "--output-tokens",
    "8",
    "--quality-set",
    "none",
    "--warmup",
    "0",
]
STABLE_TARGET_KEYS = ("label", "status", "requests", "failed", "finished", "missing")


@pytest.fixture
def mock_server() -> Iterator[ThreadedMockServer]:
    with start_mock_thread(MockConfig(ttft_s=0.002, itl_s=0.0005, natural_tokens=8)) as server:
        yield server


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": report["status"],
        "exit_code": report["exit_code"],
        "targets": [{key: target[key] for key in STABLE_TARGET_KEYS} for target in report["targets"]],
    }


def test_measure_agrees_with_the_cli_and_reports_progress(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    progress = ProgressLog()
    result = call_tool(
        build_server(),
        "bench_measure",
        {
            "targets": [mock_server.url],
            "out": str(tmp_path / "mcp"),
            "label": ["mock"],
            **SMALL,
        },
        progress=progress,
    )
    assert not result.is_error, result.content
    report = result.structured_content
    assert report["status"] == "success"  # type: ignore[index]
    assert report["targets"][0]["decode_tokens_per_s"] > 0  # type: ignore[index]
    saved = json.loads((tmp_path / "mcp" / "mock.json").read_text())
    assert saved["run"]["run_id"] == report["run_id"]  # type: ignore[index]
    assert saved["run"]["command"] == ["gemmaserve", "mcp", "bench_measure"]

    cli = CliRunner().invoke(
        app,
        ["bench", "measure", mock_server.url, "--out", str(tmp_path / "cli"), "--label", "mock", *SMALL_CLI, "--json"],
    )
    assert cli.exit_code == 0, cli.output
    assert _stable(report) == _stable(json.loads(cli.stdout))  # type: ignore[arg-type]

    totals = {total for _, total, _ in progress.updates}
    done = [count for count, _, _ in progress.updates]
    assert len(totals) == 1 and done[-1] == totals.pop() == report["targets"][0]["requests"]  # type: ignore[index]
    assert done == sorted(done)


def test_measure_rejects_bad_usage(tmp_path: Path) -> None:
    server = build_server()
    too_many = call_tool(
        server, "bench_measure", {"targets": ["http://127.0.0.1:9"], "out": str(tmp_path), "label": ["a", "b"]}
    )
    assert error_details(too_many)["error"] == "UsageError"
    assert "--label (label): 2 values for 1 target(s): give --label once per target" in error_text(too_many)
    bad_target = call_tool(server, "bench_measure", {"targets": ["ftp://x"], "out": str(tmp_path)})
    assert error_details(bad_target)["error"] == "UsageError"
    for arguments in (
        {"targets": [], "out": str(tmp_path)},
        {"targets": ["http://127.0.0.1:9"]},
        {"targets": ["http://127.0.0.1:9"], "out": str(tmp_path), "concurrency": [0]},
    ):
        text = error_text(call_tool(server, "bench_measure", arguments))
        assert "validation error" in text or "UsageError" in text, arguments


def test_combine_and_report_agree_with_the_cli(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    server = build_server()
    measured = call_tool(
        server,
        "bench_measure",
        {
            "targets": [mock_server.url, mock_server.url],
            "label": ["a", "b"],
            "out": str(tmp_path),
            **SMALL,
        },
    )
    assert measured.structured_content["status"] == "success"  # type: ignore[index]
    files = [str(tmp_path / "a.json"), str(tmp_path / "b.json")]

    missing_dir = call_tool(server, "bench_combine", {"files": files, "out": str(tmp_path / "no" / "cmp.md")})
    assert error_details(missing_dir)["error"] == "FileNotFoundError"
    assert "Fix: Check that the path exists" in error_text(missing_dir)

    (tmp_path / "out").mkdir()
    combined = call_tool(server, "bench_combine", {"files": files, "out": str(tmp_path / "out" / "cmp.md")})
    assert not combined.is_error, combined.content
    assert combined.structured_content == cli_json("bench", "combine", *files)
    assert combined.structured_content["baseline"] == "a"  # type: ignore[index]
    text = combined.content[0].text  # type: ignore[union-attr]
    assert text.startswith("Comparison (baseline: a)\n")  # the view, as the CLI prints it
    document = combined.structured_content
    said = [sentence for pair in document["pairs"] for sentence in pair["sentences"]] + document["warnings"]  # type: ignore[index]
    assert said and all(f"- {sentence}" in text for sentence in said)
    written = (tmp_path / "out" / "cmp.md").read_text()
    assert written.startswith("# Comparison (baseline: a)\n") and all(f"- {sentence}" in written for sentence in said)

    report = call_tool(server, "bench_report", {"directory": str(tmp_path), "markdown_only": True})
    assert not report.is_error, report.content
    assert report.structured_content == cli_json("bench", "report", str(tmp_path), "--markdown-only")
    assert Path(report.structured_content["markdown_path"]).is_file()  # type: ignore[index]


def test_combine_of_a_missing_file_is_an_error_with_the_fix(tmp_path: Path) -> None:
    result = call_tool(build_server(), "bench_combine", {"files": [str(tmp_path / "nope.json")]})
    details = error_details(result)
    assert details["error"] in {"ResultFileInvalid", "UsageError", "BenchError"}, details
    assert "nope.json" in error_text(result)


def test_cancelled_measure_saves_its_files_marked_interrupted(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    server = build_server()
    events: list[float] = []
    with start_mock_thread(MockConfig(ttft_s=0.005, itl_s=0.002, natural_tokens=8)) as slow:

        async def go() -> None:
            async with Client(server) as client, anyio.create_task_group() as group:

                async def cancel_after_two(progress: float, total: float | None, message: str | None) -> None:
                    events.append(progress)
                    if len(events) == 2:
                        group.cancel_scope.cancel()

                arguments = {"targets": [slow.url], "out": str(tmp_path), "label": ["slow"], **SMALL}
                group.start_soon(
                    lambda: client.call_tool("bench_measure", arguments, progress_callback=cancel_after_two)
                )

        anyio.run(go)
    saved = json.loads((tmp_path / "slow.json").read_text())
    assert saved["completeness"]["interrupted"] is True
    assert saved["completeness"]["missing"], saved["completeness"]
    assert saved["completeness"]["finished"] != saved["completeness"]["planned"]  # it stopped early


def test_import_agrees_with_the_cli(tmp_path: Path) -> None:
    from tests.unit.bench.test_report_vllm_import import _vllm_record

    source = tmp_path / "vllm.json"
    source.write_text(json.dumps(_vllm_record(4, 190.0)))
    arguments = {"vllm_file": str(source), "out": str(tmp_path / "mcp" / "l4.json"), "label": "l4"}
    result = call_tool(build_server(), "bench_import", {**arguments, "instance": "ml.g6.xlarge"})
    assert not result.is_error, result.content
    assert result.structured_content["hardware"]["gpu"] == "l4"  # type: ignore[index]
    assert "c=4: 190.0 tok/s" in result.content[0].text  # type: ignore[union-attr]
    cli = cli_json("bench", "import", str(source), "--out", str(tmp_path / "cli.json"), "--label", "l4")
    mcp = call_tool(build_server(), "bench_import", arguments).structured_content
    assert {key: mcp[key] for key in ("target", "load", "hardware")} == {  # type: ignore[index]
        key: cli[key] for key in ("target", "load", "hardware")
    }
    unknown = call_tool(build_server(), "bench_import", {**arguments, "instance": "ml.nope"})
    assert error_details(unknown)["error"] == "UnknownName"


def test_bench_tools_reject_unknown_arguments_naming_the_new_one(tmp_path: Path) -> None:
    server = build_server()
    old = call_tool(server, "bench_measure", {"targets": ["http://127.0.0.1:9"], "out_dir": str(tmp_path)})
    assert "unknown argument 'out_dir'" in error_text(old) and "Did you mean 'out'" in error_text(old)
    typo = call_tool(server, "bench_report", {"directory": str(tmp_path), "markdown": True})
    assert "unknown argument 'markdown'" in error_text(typo)
