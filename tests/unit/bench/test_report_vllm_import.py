"""Import of `vllm bench serve --save-result` files (keys as vllm/benchmarks/serve.py writes them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gemmaserve.bench import report, vllm_import
from gemmaserve.cli import app
from gemmaserve.errors import ResultFileInvalid
from gemmaserve.measurements import schema


def _vllm_record(concurrency: int | None, throughput: float, *, detailed: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {
        "date": "20261201-120000",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": "google/gemma-4-E2B-it",
        "tokenizer_id": "google/gemma-4-E2B-it",
        "num_prompts": 8,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": 10.24,
        "completed": 8,
        "failed": 0,
        "total_input_tokens": 1024,
        "total_output_tokens": 2048,
        "request_throughput": 0.78,
        "request_goodput": None,
        "output_throughput": throughput,
        "total_token_throughput": throughput * 1.5,
        "max_output_tokens_per_s": throughput * 1.2,
        "max_concurrent_requests": concurrency or 8,
        "rtfx": 0.0,
        "latencies": [5.1] * 8,
        "queue_times": [0.0] * 8,
        "mean_ttft_ms": 61.0,
        "median_ttft_ms": 60.0,
        "std_ttft_ms": 2.0,
        "p99_ttft_ms": 70.0,
        "mean_tpot_ms": 20.1,
        "median_tpot_ms": 20.0,
        "std_tpot_ms": 0.1,
        "p99_tpot_ms": 21.0,
        "mean_itl_ms": 20.0,
        "median_itl_ms": 20.0,
        "std_itl_ms": 0.5,
        "p99_itl_ms": 25.0,
    }
    if detailed:
        record.update(
            {
                "input_lens": [128] * 8,
                "output_lens": [256] * 7 + [0],
                "ttfts": [0.05] * 7 + [0.0],
                "itls": [[0.02] * 255] * 7 + [[]],
                "start_times": [100.0 + i * 0.01 for i in range(8)],
                "generated_texts": ["x"] * 7 + [""],
                "errors": [""] * 7 + ["Bad Request"],
                "latencies": [0.05 + 255 * 0.02] * 7 + [0.0],
                "completed": 7,
                "failed": 1,
            }
        )
    return record


def test_summary_only_file_becomes_one_load_level(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(_vllm_record(4, 190.0)))
    result = vllm_import.import_vllm_result(path)
    assert result.target.kind == schema.TargetKind.IMPORTED and result.target.label == "google/gemma-4-E2B-it"
    (level,) = result.load
    assert (level.concurrency, level.output_tokens_per_s, level.input_tokens, level.output_tokens) == (
        4,
        [190.0],
        128,
        256,
    )
    assert (
        level.ttft_s is not None
        and level.ttft_s.p50 == pytest.approx(0.060)
        and level.ttft_s.p99 == pytest.approx(0.070)
    )
    assert level.tpot_s is not None and level.tpot_s.mean == pytest.approx(0.0201)
    assert result.decode is None and result.quality is None and result.requests == []
    # It is a valid result file: it survives the strict round trip.
    schema.save_result(result, tmp_path / "out.json")
    assert schema.load_result(tmp_path / "out.json") == result


def test_detailed_file_keeps_every_request_and_its_failure(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(_vllm_record(None, 200.0, detailed=True)))
    result = vllm_import.import_vllm_result(path, label="remote-l4")
    (level,) = result.load
    assert level.concurrency == 8  # request rate inf, no --max-concurrency: all prompts at once
    assert len(result.requests) == 8 and sum(not r.success for r in result.requests) == 1
    ok = result.requests[0]
    assert ok.tpot_s == pytest.approx(0.02) and ok.start_offset_s == 0.0
    assert result.requests[3].start_offset_s == pytest.approx(0.03)
    assert level.ttft_s is not None and level.ttft_s.n == 7 and level.ttft_s.p50 == pytest.approx(0.05)
    assert (result.failures.failed, result.failures.requests) == (1, 8)


def test_append_result_lines_become_levels_and_repeats(tmp_path: Path) -> None:
    path = tmp_path / "sweep.jsonl"
    lines = [_vllm_record(1, 50.0), _vllm_record(4, 180.0), _vllm_record(4, 190.0)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = vllm_import.import_vllm_result(path)
    assert [(lv.concurrency, lv.output_tokens_per_s) for lv in result.load] == [(1, [50.0]), (4, [180.0, 190.0])]
    assert result.load[1].median_output_tokens_per_s == 185.0


@pytest.mark.parametrize("content", ["{nope", json.dumps({"duration": 1.0}), json.dumps([1])])
def test_other_files_are_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ResultFileInvalid):
        vllm_import.import_vllm_result(path)


def test_report_imports_vllm_files_into_the_same_tables(tmp_path: Path) -> None:
    from .test_schema_builders import build_result

    directory = tmp_path / "run"
    directory.mkdir()
    schema.save_result(build_result(label="ours", load_tok_s={4: [180.0, 185.0, 190.0]}), directory / "a.json")
    (directory / "b-vllm.json").write_text(json.dumps(_vllm_record(4, 200.0)))
    output = report.build_report(directory, html_page=False)
    assert output.imported == [str(directory / "b-vllm.json")]
    assert "| 4 | 185.0 | 200.0 |" in Path(output.markdown_path).read_text()


def test_cli_import_with_an_instance_price(tmp_path: Path) -> None:
    source = tmp_path / "vllm.json"
    source.write_text(json.dumps(_vllm_record(4, 190.0)))
    out = tmp_path / "imported.json"
    result = CliRunner().invoke(
        app,
        ["bench", "import", str(source), "--out", str(out), "--label", "l4", "--instance", "ml.g6.xlarge", "--json"],
    )
    assert result.exit_code == 0, result.output
    loaded = schema.load_result(out)
    assert loaded.target.label == "l4" and loaded.hardware.gpu == "l4"
    assert loaded.hardware.price_usd_per_hour is not None and loaded.hardware.price_usd_per_hour > 0
    assert json.loads(result.stdout)["target"]["label"] == "l4"
    bad = CliRunner().invoke(app, ["bench", "import", str(source), "--out", str(out), "--instance", "ml.nope"])
    assert bad.exit_code != 0


# A `vllm bench serve --save-result --max-concurrency 4` file of vLLM 0.32.0, key for key in the order
# vllm/benchmarks/serve.py writes them: the setup (lines 2258-2264), the traffic (2278-2282), the
# benchmark's result (1280-1302, without the per-request lists that only --save-detailed keeps,
# 2380-2392) and the percentiles of the default metrics ttft, tpot, itl at the default 99th
# (1385-1391), plus client queueing, recorded because --max-concurrency was given (1320-1321, 1398).
# No key says how it sampled: vLLM writes none (lines 2185-2206 only decide what is sent).
VLLM_032_FILE: dict[str, Any] = {
    "date": "20261203-141502",
    "endpoint_type": "openai-chat",
    "backend": "openai-chat",
    "label": None,
    "model_id": "google/gemma-4-E2B-it",
    "tokenizer_id": "google/gemma-4-E2B-it",
    "num_prompts": 40,
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 4,
    "duration": 12.91,
    "completed": 40,
    "failed": 0,
    "total_input_tokens": 5120,
    "total_output_tokens": 10240,
    "request_throughput": 3.098,
    "request_goodput": None,
    "output_throughput": 793.2,
    "total_token_throughput": 1189.8,
    "latencies": [1.29] * 40,
    "queue_times": [0.0] * 40,
    "max_output_tokens_per_s": 812.0,
    "max_concurrent_requests": 4,
    "rtfx": 0.0,
    "mean_ttft_ms": 31.2,
    "median_ttft_ms": 30.8,
    "std_ttft_ms": 1.9,
    "p99_ttft_ms": 36.0,
    "mean_tpot_ms": 4.93,
    "median_tpot_ms": 4.92,
    "std_tpot_ms": 0.05,
    "p99_tpot_ms": 5.06,
    "mean_itl_ms": 4.93,
    "median_itl_ms": 4.9,
    "std_itl_ms": 0.4,
    "p99_itl_ms": 6.1,
    "mean_client_queue_time_ms": 0.02,
    "median_client_queue_time_ms": 0.02,
    "std_client_queue_time_ms": 0.01,
    "p99_client_queue_time_ms": 0.05,
}


def test_a_real_vllm_file_says_its_temperature_is_not_recorded_never_none(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(VLLM_032_FILE))
    result = vllm_import.import_vllm_result(path)
    assert result.client.temperature is None
    note = result.client.sampling_note or ""
    assert note.startswith("not recorded: vllm bench serve writes no sampling settings")
    assert "temperature 0 (greedy) up to vLLM 0.14" in note and "server's default from 0.15" in note
    (level,) = result.load
    assert (level.concurrency, level.output_tokens_per_s) == (4, [793.2])

    from .test_schema_builders import build_result

    schema.save_result(build_result(label="t4"), tmp_path / "a.json")
    output = report.build_report(tmp_path, html_page=False)
    shown = "\n".join([*output.warnings, Path(output.markdown_path).read_text()])
    assert "None" not in shown
    assert "google/gemma-4-E2B-it: temperature not recorded (vllm bench serve writes no sampling settings" in shown
    assert "t4 used 0.0" in shown

    cli = CliRunner().invoke(app, ["bench", "import", str(path), "--out", str(tmp_path / "out.json")])
    assert cli.exit_code == 0 and "temperature not recorded" in cli.output


def test_a_temperature_given_as_metadata_is_read(tmp_path: Path) -> None:
    # `--metadata temperature=0.7` is the one way a file records it: a string at the top level (line 2271).
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps({**VLLM_032_FILE, "temperature": "0.7"}))
    result = vllm_import.import_vllm_result(path)
    assert result.client.temperature == 0.7
    assert result.client.sampling_note == "temperature from the file's --metadata"
