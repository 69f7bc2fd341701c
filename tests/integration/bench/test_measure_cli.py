"""``gemmaserve bench measure`` through click: exit codes and the --json document."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.cli import app
from gemmaserve.testing.mock_server import MockConfig
from gemmaserve.testing.runner import ThreadedMockServer, start_mock_process

SMALL = [
    "--decode-calls",
    "1",
    "--decode-long",
    "32",
    "--concurrency",
    "1,2",
    "--repeats",
    "1",
    "--output-tokens",
    "8",
    "--quality-set",
    "none",
    "--max-client-lag-ms",
    "0",
]  # these check exit codes and documents, not timing: no lag guard


def _invoke(args: list[str]):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["bench", "measure", *args], catch_exceptions=False)


def test_success_exits_0_with_one_json_document(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    result = _invoke([mock_server.url, "--out", str(tmp_path), "--label", "a", *SMALL, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "success" and document["targets"][0]["path"] == str(tmp_path / "a.json")
    assert document["ok"] is True and document["exit_code"] == 0


def test_partial_exits_1(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    mock_server.configure(fault="http_429", fault_every=2)
    result = _invoke([mock_server.url, "--out", str(tmp_path), *SMALL, "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["status"] == "partial" and document["targets"][0]["failures_by_reason"]["http_429"] >= 1
    assert document["ok"] is False and document["exit_code"] == 1


def test_table_mode_renders(mock_server: ThreadedMockServer, tmp_path: Path) -> None:
    result = _invoke([mock_server.url, "--out", str(tmp_path), "--label", "t4-qat", *SMALL])
    assert result.exit_code == 0 and "t4-qat" in result.stdout and "success" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["ftp://nowhere"],
        ["http://127.0.0.1:1", "--concurrency", "0"],
        ["http://127.0.0.1:1", "--label", "a", "--label", "b"],
        ["http://127.0.0.1:1", "--quality-set", "nope"],
    ],
)
def test_bad_usage_exits_2(args: list[str], tmp_path: Path) -> None:
    from gemmaserve.cli.errors import run_with_error_mapping

    code = run_with_error_mapping(app, ["bench", "measure", *args, "--out", str(tmp_path)], debug=False)
    assert code == 2


def test_combine_and_report_are_registered_when_present() -> None:
    from gemmaserve.cli.bench import cli

    try:
        import gemmaserve.cli.bench_analysis  # noqa: F401
    except ImportError:
        pytest.skip("bench_analysis not present yet")
    assert {"measure", "combine", "report"} <= set(cli.commands)


def test_sigint_saves_and_exits_130(tmp_path: Path) -> None:
    from gemmaserve.measurements.schema import load_result

    with start_mock_process(MockConfig(ttft_s=0.001, itl_s=0.005)) as server:
        url = server.url
        client = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gemmaserve",
                "bench",
                "measure",
                url,
                "--out",
                str(tmp_path),
                "--label",
                "x",
                "--decode-calls",
                "1",
                "--decode-long",
                "20",
                "--concurrency",
                "1",
                "--repeats",
                "50",
                "--output-tokens",
                "40",
                "--quality-set",
                "none",
                "--max-client-lag-ms",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        path = tmp_path / "x.json"
        # The interrupt must land after the decode step, during the 50 load repeats (seconds of them).
        # No deadline: a run that never finishes its decode step is ended by the suite's timeout.
        while not (path.exists() and "decode" in load_result(path).completeness.finished):
            assert client.poll() is None, "the run ended before it finished its decode step"
            time.sleep(0.05)
        client.send_signal(signal.SIGINT)
        client.communicate(timeout=20)
        assert client.returncode == 130
        result = load_result(path)
        assert result.completeness.interrupted and "load:1" in result.completeness.missing
        assert "decode" in result.completeness.finished


def test_cli_and_mcp_build_the_same_run_from_the_same_options() -> None:
    from gemmaserve.bench.requests import MeasureRequest
    from gemmaserve.errors import UsageError

    common = dict(  # noqa: C408 - keyword arguments, passed on as such
        targets=["http://127.0.0.1:1", "http://127.0.0.1:2"],
        out="results",
        decode_short=16,
        decode_long=512,
        decode_calls=5,
        concurrency=[1, 4],
        repeats=2,
        input_tokens=64,
        output_tokens=128,
        quality_set="published-40",
        quality_max_tokens=1024,
        temperature=0.0,
        ignore_eos=True,
        timeout_s=60.0,
        seed=1,
        warmup=1,
        quality_concurrency=4,
        requests_per_stream=1,
        label=["a"],
    )
    request = MeasureRequest.parse(common)
    settings, options = request.client_settings(), request.target_options()
    assert settings.concurrency_levels == [1, 4] and settings.quality_set == "published-40"
    assert [o.label for o in options] == ["a", None]

    with pytest.raises(UsageError, match="--label"):
        MeasureRequest.parse({**common, "targets": ["http://127.0.0.1:1"], "label": ["a", "b"]})
    with pytest.raises(UsageError):
        MeasureRequest.parse({**common, "concurrency": [0]})


def test_concurrency_takes_commas_or_repeats_and_the_old_timeout_spelling(
    mock_server: ThreadedMockServer, tmp_path: Path
) -> None:
    from gemmaserve.bench.requests import MeasureRequest
    from gemmaserve.errors import UsageError

    base = {"targets": ["http://127.0.0.1:1"], "out": "r"}
    assert MeasureRequest.parse({**base, "concurrency": ["1,4", "16"]}).concurrency == [1, 4, 16]
    assert MeasureRequest.parse({**base, "concurrency": [2, 8]}).concurrency == [2, 8]
    with pytest.raises(UsageError, match="comma-separated"):
        MeasureRequest.parse({**base, "concurrency": ["1,x"]})
    args = [mock_server.url, "--out", str(tmp_path), "--label", "a", *SMALL, "--timeout", "30", "--json"]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["client"]["timeout_s"] == 30 and saved["client"]["concurrency_levels"] == [1, 2]


def test_cross_field_rules_are_usage_errors() -> None:
    from gemmaserve.bench.requests import MeasureRequest
    from gemmaserve.errors import UsageError

    base = {"targets": ["http://127.0.0.1:1"], "out": "r"}
    with pytest.raises(UsageError, match="--decode-long"):
        MeasureRequest.parse({**base, "decode_short": 64, "decode_long": 64})
    with pytest.raises(UsageError, match="once per target"):
        MeasureRequest.parse({**base, "price_usd_per_hour": [1.0, 2.0]})
    with pytest.raises(UsageError, match="letters, digits"):
        MeasureRequest.parse({**base, "label": ["a/b"]})
    assert MeasureRequest.parse({**base, "quality_set": "NONE"}).client_settings().quality_set is None


def test_progress_lines_on_stderr_off_a_terminal_and_latency_table(
    mock_server: ThreadedMockServer, tmp_path: Path
) -> None:
    result = _invoke([mock_server.url, "--out", str(tmp_path), "--label", "t4-qat", *SMALL])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any("t4-qat: decode #1" in line and "requests" in line for line in lines), result.stderr
    assert any("t4-qat: load:2" in line for line in lines), result.stderr
    assert "TTFT ms p50 / p99" in result.stdout and "load:2" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines() if not line.startswith(("Files:", "Next:"))) <= 100


def test_help_has_examples() -> None:
    for command in ("measure", "combine", "report", "import"):
        result = CliRunner().invoke(app, ["bench", command, "--help"])
        assert result.exit_code == 0 and "Examples:\n    gemmaserve bench" in result.output, command


def test_the_package_exports_its_actions_without_loading_the_engine() -> None:
    code = (
        "import sys, gemmaserve.bench as b, gemmaserve.bench.requests;"
        "assert 'aiohttp' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules);"
        "assert callable(b.measure_endpoints) and b.MeasureRequest.action == 'bench measure'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
