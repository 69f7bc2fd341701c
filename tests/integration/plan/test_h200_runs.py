"""The plan against real vLLM 0.26.0 starts on an H200 that no constant was solved from, and the CUDA-graph pool
against the starts it was solved from (``benchmarks/results/plan_gpu_h200_*``, written by
``benchmarks/plan_gpu_speed.py``): Google's multimodal class with and without --language-model-only at an
L4's budget, text-only starts at 0.9 (31B and 26B A4B among them, predicted before they ran), and the
graph pool by --max-num-seqs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.plan.replay import replay_h200_start

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
RUNS = [
    run
    for path in sorted(RESULTS.glob("plan_gpu_h200_*/*/plan_gpu_speed.json"))
    for run in json.loads(path.read_text())["runs"]
]
GRAPH_SOLVED_FROM = {"e2b-graphs-seqs4", "e2b-graphs-seqs64", "e2b-mm-l4", "e2b-speed"}  # 4/64/256/1,024 sequences


def _replay(run: dict[str, Any]) -> Any:
    settings = run["settings"]
    return replay_h200_start(settings, run["figures"]["total_gib"], settings["text_only"], "0.26")


def test_the_results_hold_every_kind_of_start() -> None:
    names = {run["name"] for run in RUNS}
    assert {"e2b-mm-l4", "e2b-mm-l4-text-only", "e2b-speed", "e4b-speed", "e2b-graphs-seqs4"} <= names
    assert {"31b-speed", "26b-a4b-speed"} <= names
    assert all(run["status"] == "ok" for run in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=[run["name"] for run in RUNS])
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


# A held-out miss, left visible: the pool per captured size scaled by layer count gives 26B A4B (30 layers)
# 0.51 GiB where the engine took 0.40 (31B, 60 layers: 0.97 against 0.86, inside the tolerance). vLLM 0.26
# counts the pool after sizing, so its KV tokens are unaffected; a release that counts it first would get
# at most 0.11 GiB fewer KV tokens from the plan than from the engine (errs low, never promises more).
GRAPH_POOL_MISSES = {"26b-a4b-speed", "26b-a4b-routing"}


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(
            run, marks=pytest.mark.xfail(strict=True, reason="graph pool of the MoE: 0.51 GiB planned, 0.40 logged")
        )
        if run["name"] in GRAPH_POOL_MISSES
        else run
        for run in RUNS
    ],
    ids=[run["name"] for run in RUNS],
)
def test_the_graph_pool_follows_the_capture_sizes(run: dict[str, Any]) -> None:
    memory = _replay(run).memory
    logged = run["figures"]["graph_capture_gib"]
    tolerance = 0.01 if run["name"] in GRAPH_SOLVED_FROM or run["settings"]["model"] == "gemma-4-e2b" else 0.15 * logged
    assert memory.cudagraph_gib == pytest.approx(logged, abs=tolerance)


def test_docs_hold_the_table_of_every_start() -> None:
    import subprocess
    import sys

    script = RESULTS.parent / "plan_runs_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
