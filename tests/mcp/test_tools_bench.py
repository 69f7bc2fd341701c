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
from tests.mcp.conftest import ProgressLog, call_tool, error_details, error_text

SMALL = {"decode_calls": 2, "decode_short": 4, "decode_long": 12, "concurrency": [1, 2], "repeats": 1,
         "input_tokens": 8, "output_tokens": 8, "quality_set": "none", "warmup": 0}
SMALL_CLI = ["--decode-calls", "2", "--decode-short", "4", "--decode-long", "12", "--concurrency", "1,2",
             "--repeats", "1", "--input-tokens", "8", "--output-tokens", "8", "--quality-set", "none", "--warmup", "0"]
STABLE_TARGET_KEYS = ("label", "status", "requests", "failed", "finished", "missing")


@pytest.fixture
def mock_server() -> Iterator[ThreadedMockServer]:
    with start_mock_thread(MockConfig(ttft_s=0.002, itl_s=0.0005, natural_tokens=8)) as server:
        yield server


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    return {"status": report["status"], "exit_code": report["exit_code"],
            "targets": [{key: target[key] for key in STABLE_TARGET_KEYS} for target in report["targets"]]}


def test_measure_agrees_with_the_cli_and_reports_progress(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    progress = ProgressLog()
    result = call_tool(build_server(), "bench_measure", {
        "targets": [mock_server.url], "out_dir": str(tmp_path / "mcp"), "labels": ["mock"], **SMALL,
    }, progress=progress)
    assert not result.is_error, result.content
    report = result.structured_content
    assert report["status"] == "success"  # type: ignore[index]
    assert report["targets"][0]["decode_tokens_per_s"] > 0  # type: ignore[index]
    saved = json.loads((tmp_path / "mcp" / "mock.json").read_text())
    assert saved["run"]["run_id"] == report["run_id"]  # type: ignore[index]
    assert saved["run"]["command"] == ["gemmaserve", "mcp", "bench_measure"]

    cli = CliRunner().invoke(app, [
        "bench", "measure", mock_server.url, "--out", str(tmp_path / "cli"), "--label", "mock", *SMALL_CLI, "--json"])
    assert cli.exit_code == 0, cli.output
    assert _stable(report) == _stable(json.loads(cli.stdout))  # type: ignore[arg-type]

    totals = {total for _, total, _ in progress.updates}
    done = [count for count, _, _ in progress.updates]
    assert len(totals) == 1 and done[-1] == totals.pop() == report["targets"][0]["requests"]  # type: ignore[index]
    assert done == sorted(done)


def test_measure_rejects_bad_usage(tmp_path: Path) -> None:
    server = build_server()
    too_many = call_tool(server, "bench_measure", {"targets": ["http://127.0.0.1:9"], "out_dir": str(tmp_path),
                                                   "labels": ["a", "b"]})
    assert error_details(too_many)["error"] == "UsageError"
    assert "Fix: Give labels once per target" in error_text(too_many)
    bad_target = call_tool(server, "bench_measure", {"targets": ["ftp://x"], "out_dir": str(tmp_path)})
    assert error_details(bad_target)["error"] == "UsageError"
    for arguments in ({"targets": [], "out_dir": str(tmp_path)}, {"targets": ["http://127.0.0.1:9"]},
                      {"targets": ["http://127.0.0.1:9"], "out_dir": str(tmp_path), "concurrency": [0]}):
        text = error_text(call_tool(server, "bench_measure", arguments))
        assert "validation error" in text or "UsageError" in text, arguments
