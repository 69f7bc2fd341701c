"""The plan against real vLLM 0.26.0 starts on an H200 and an H100 that no constant was solved from, and the
CUDA-graph pool against every start (``benchmarks/results/plan_gpu_h[12]00_*``, written by
``benchmarks/plan_gpu_speed.py``): Google's multimodal class with and without --language-model-only at an
L4's budget, text-only starts at 0.9 (31B and 26B A4B among them, predicted before they ran), the graph
pool by --max-num-seqs, and by model runner (each model on both, the runner forced)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.catalog import resolve_model
from gemmaserve.engine_memory import GIB, cudagraph_bytes, cudagraph_capture_sizes, cudagraph_estimate_spread_gib
from gemmaserve.vllm_releases import RELEASES
from tests.support.plan.replay import replay_h200_start

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
RUNS = [
    run
    for path in sorted(RESULTS.glob("plan_gpu_h[12]00_*/*/plan_gpu_speed.json"))
    for run in json.loads(path.read_text())["runs"]
]
# Starts with the model runner forced (VLLM_USE_V2_MODEL_RUNNER) measure the graph pool only: the plan picks
# vLLM's default runner, as a user's start does.
DEFAULT_RUNNER = [run for run in RUNS if "VLLM_USE_V2_MODEL_RUNNER" not in run["settings"].get("env", {})]


def _replay(run: dict[str, Any]) -> Any:
    settings = run["settings"]
    return replay_h200_start(settings, run["figures"]["total_gib"], settings["text_only"], "0.26")


def test_the_results_hold_every_kind_of_start() -> None:
    names = {run["name"] for run in RUNS}
    assert {"e2b-mm-l4", "e2b-mm-l4-text-only", "e2b-speed", "e4b-speed", "e2b-graphs-seqs4"} <= names
    assert {"31b-speed", "26b-a4b-speed"} <= names
    assert all(run["status"] == "ok" for run in RUNS)


@pytest.mark.parametrize("run", DEFAULT_RUNNER, ids=[run["name"] for run in DEFAULT_RUNNER])
def test_kv_tokens_within_three_percent_of_the_engines(run: dict[str, Any]) -> None:
    row = _replay(run)
    assert row.fits
    assert row.kv_cache_tokens == pytest.approx(run["figures"]["kv_cache_tokens"], rel=0.03)


def test_the_multimodal_class_counts_no_compile_peak_and_text_only_does() -> None:
    # The engine's own breakdown: 0.29 GiB peak with the towers (sampler), 4.55 GiB text-only (the compile peak).
    by_name = {run["name"]: run for run in RUNS}
    multimodal, text_only = by_name["e2b-mm-l4"], by_name["e2b-mm-l4-text-only"]
    assert multimodal["figures"]["peak_activation_gib"] < 1 < text_only["figures"]["peak_activation_gib"]
    for run in (multimodal, text_only):
        memory = _replay(run).memory
        assert memory.peak_activation_gib == pytest.approx(run["figures"]["peak_activation_gib"], abs=0.15)


@pytest.mark.parametrize("run", RUNS, ids=[run["name"] for run in RUNS])
def test_the_graph_pool_follows_the_capture_sizes_and_the_runner(run: dict[str, Any]) -> None:
    # E2B on V2 gave the per-size parts, E2B on V1 the V1 share; every other model on either runner is held
    # out (26B A4B on V2 and 31B on V1 were predicted before they ran: results/plan_gpu_h[12]00_2026-12-06).
    memory = _replay(run).memory
    forced = run["settings"].get("env", {}).get("VLLM_USE_V2_MODEL_RUNNER")
    if forced is None:  # vLLM's own runner: the plan's figure itself
        planned = memory.cudagraph_gib
    else:  # a runner the plan never picks for this model: its pool function on that runner
        model = resolve_model(run["settings"]["model"]).geometry
        sizes = cudagraph_capture_sizes(memory.max_num_seqs, memory.max_num_batched_tokens, RELEASES["0.26"])
        planned = cudagraph_bytes(model, sizes, memory.max_num_seqs, "v2" if forced == "1" else "v1") / GIB
    logged = run["figures"]["graph_capture_gib"]
    tolerance = 0.01 if run["settings"]["model"] == "gemma-4-e2b" else 0.15 * logged
    assert planned == pytest.approx(logged, abs=tolerance)


def test_v1_sizes_with_an_estimate_within_its_sampling_step_of_its_pool() -> None:
    v1_starts = [run for run in RUNS if "cudagraph_estimate_gib" in run["figures"]]
    assert {run["settings"]["model"] for run in v1_starts} == {"gemma-4-e2b", "gemma-4-26b-a4b", "gemma-4-31b"}
    for run in v1_starts:
        figures = run["figures"]
        memory = _replay(run).memory
        sizes = cudagraph_capture_sizes(memory.max_num_seqs, memory.max_num_batched_tokens, RELEASES["0.26"])
        spread = cudagraph_estimate_spread_gib(sizes, memory.max_num_seqs, "v1")
        assert abs(figures["cudagraph_estimate_gib"] - figures["graph_capture_gib"]) <= spread, run["name"]
        # where V1 is vLLM's own choice (the MoE in 0.26), the plan counts it and widens the row's low end
        if memory.runner == "v1":
            assert memory.cudagraph_counted and memory.cudagraph_estimate_spread_gib == pytest.approx(spread)


def test_docs_hold_the_table_of_every_start() -> None:
    import subprocess
    import sys

    script = RESULTS.parent / "plan_runs_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
