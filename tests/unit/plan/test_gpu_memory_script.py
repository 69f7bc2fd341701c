"""The GPU measurement script: the model directory it writes and the engine lines it reads.

The lines below are built from vLLM 0.26.0's own format strings (``v1/worker/gpu_worker.py``
``compile_or_warm_up_model``, ``v1/core/kv_cache_utils.py`` ``get_kv_cache_configs``,
``model_executor/model_loader``) with the figures of the real H200 run in
``../shared/gpu-vllm-kit/README.md``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gemmaserve.catalog import load_catalog

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "plan_gpu_memory.py"

LOG_026 = """\
(EngineCore pid=812) INFO 12-03 01:12:44 [gpu_model_runner.py:4702] Model loading took 8.86 GiB memory and 6.214 seconds
(EngineCore pid=812) INFO 12-03 01:13:20 [backends.py:1155] Dynamo bytecode transform time: 9.81 s
(EngineCore pid=812) INFO 12-03 01:13:50 [backends.py:393] Compiling a graph for compile range (1, 2048) takes 31.20 s
(EngineCore pid=812) INFO 12-03 01:13:57 [monitor.py:53] torch.compile took 73.02 s in total
(EngineCore pid=812) INFO 12-03 01:14:01 [gpu_model_runner.py:6712] Estimated CUDA graph memory: 0.51 GiB total
(EngineCore pid=812) INFO 12-03 01:14:02 [gpu_worker.py:561] Available KV cache memory: 112.19 GiB
(EngineCore pid=812) INFO 12-03 01:14:02 [kv_cache_utils.py:2177] GPU KV cache size: 9,192,646 tokens
(EngineCore pid=812) INFO 12-03 01:14:02 [kv_cache_utils.py:2179] Maximum concurrency for 8,192 tokens per request: 1122.15x
(EngineCore pid=812) INFO 12-03 01:14:18 [gpu_model_runner.py:6890] Graph capturing finished in 15 secs, took 0.59 GiB
(EngineCore pid=812) INFO 12-03 01:14:18 [gpu_worker.py:853] Free memory on device (139.24/139.8 GiB) on startup. Desired GPU memory utilization is (0.9, 125.82 GiB). Actual usage is 8.86 GiB for weight, 4.55 GiB for peak activation, 0.22 GiB for non-torch memory, and 0.53 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=120000000000` (111.76 GiB) to fit into requested memory, or `--kv-cache-memory=1` (1 GiB) to fully utilize gpu memory. Current kv cache memory in use is 112.19 GiB.
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_gpu_memory", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["plan_gpu_memory"] = module
    spec.loader.exec_module(module)
    return module


def test_reads_every_figure_of_a_vllm_026_start(script: ModuleType) -> None:
    figures = script.parse_engine_lines(LOG_026)
    assert figures["weights_gib"] == 8.86
    assert figures["available_kv_gib"] == 112.19
    assert figures["kv_cache_tokens"] == 9_192_646
    assert figures["max_concurrency"] == 1122.15
    assert figures["peak_activation_gib"] == 4.55
    assert figures["non_torch_gib"] == 0.22
    assert figures["cudagraph_gib"] == 0.53
    assert figures["requested_gib"] == 125.82 and figures["total_gib"] == 139.8
    assert figures["cudagraph_estimate_gib"] == 0.51
    assert figures["graph_capture_gib"] == 0.59
    assert figures["compile_s"] == 73.02
    assert figures["compiled_this_start"] is True
    warm = "INFO [backends.py:292] Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took 2.1 s"
    assert script.parse_engine_lines(warm)["compiled_this_start"] is False


# Verbatim from the E2B start on Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0, debug logging) of
# benchmarks/results/plan_gpu_h200_2026-12-06/e2b-graphs (H100, vLLM 0.26.0).
LOG_026_V1_DEBUG = """\
(EngineCore pid=1573) INFO 12-06 02:40:22 [v1/worker/gpu_model_runner.py:6612] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=51 (largest=512)
(EngineCore pid=1573) DEBUG 12-06 02:40:23 [v1/worker/gpu_model_runner.py:6688] Estimated PIECEWISE CUDA graph memory: 138.00 MiB first-capture + (51-1) × 4.00 MiB per-graph
(EngineCore pid=1573) DEBUG 12-06 02:40:25 [v1/worker/gpu_model_runner.py:6688] Estimated FULL CUDA graph memory: 2.00 MiB first-capture + (51-1) × 2.00 MiB per-graph
(EngineCore pid=1573) INFO 12-06 02:40:26 [v1/worker/gpu_model_runner.py:6737] Estimated CUDA graph memory: 0.43 GiB total
(EngineCore pid=1573) INFO 12-06 02:40:38 [v1/worker/gpu_model_runner.py:6844] Graph capturing finished in 12 secs, took 0.45 GiB
(EngineCore pid=1573) INFO 12-06 02:40:38 [v1/worker/gpu_worker.py:793] CUDA graph pool memory: 0.45 GiB (actual), 0.43 GiB (estimated), difference: 0.02 GiB (4.4%).
"""


def test_reads_the_v1_estimate_by_mode_beside_the_pool_it_took(script: ModuleType) -> None:
    figures = script.parse_engine_lines(LOG_026_V1_DEBUG)
    assert figures["cudagraph_estimate_parts_mib"] == {
        "PIECEWISE": {"first_capture": 138.0, "graphs": 51, "per_graph": 4.0},
        "FULL": {"first_capture": 2.0, "graphs": 51, "per_graph": 2.0},
    }
    assert figures["cudagraph_estimate_gib"] == 0.43 and figures["cudagraph_actual_gib"] == 0.45
    assert figures["cudagraph_profiling"] == "PIECEWISE=51 (largest=512), FULL=51 (largest=512)"


def test_a_start_that_ran_out_of_memory_says_so(script: ModuleType) -> None:
    text = "ERROR 12-03 [core.py:1] ValueError: No available memory for the cache blocks. Try increasing ...\n"
    assert "out_of_memory" in script.parse_engine_lines(text)
    assert "available_kv_gib" not in script.parse_engine_lines(text)


@pytest.mark.parametrize("key", ["gemma-4-e2b", "gemma-4-e4b", "gemma-4-26b-a4b", "gemma-4-31b"])
def test_the_config_carries_the_catalog_geometry(script: ModuleType, key: str, tmp_path: Path) -> None:
    geometry = load_catalog().models[key].geometry
    config = script.text_config(geometry)
    script.write_model_dir(tmp_path, config)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["architectures"] == ["Gemma4ForCausalLM"]
    assert written["num_hidden_layers"] == geometry.num_hidden_layers
    assert written["layer_types"][-1] == "full_attention"
    full = [i for i, kind in enumerate(written["layer_types"]) if kind == "full_attention"]
    assert len(full) == geometry.layer_types().count("full")
    assert written["use_double_wide_mlp"] == geometry.use_double_wide_mlp
    assert written["enable_moe_block"] == (geometry.num_experts > 0)
    if geometry.full_attention_k_eq_v:
        assert written["num_global_key_value_heads"] == geometry.full_kv_heads
    tokenizer = json.loads((tmp_path / "tokenizer.json").read_text())
    assert tokenizer["model"]["type"] == "WordLevel" and tokenizer["model"]["vocab"]["<eos>"] == 1


def test_the_runs_cover_every_model_the_issue_names_cold_first(script: ModuleType) -> None:
    runs = script.RUNS
    assert {run.model for run in runs} >= {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-26b-a4b", "gemma-4-31b"}
    seen: set[str] = set()
    for run in runs:
        # A warm run reuses the caches of an earlier cold run with the same compile key.
        assert run.cold or run.cache in seen, run.name
        seen.add(run.cache)
    assert sum(run.estimate_s for run in runs[:4]) < 600


def test_budgets_are_those_of_the_named_gpus(script: ModuleType) -> None:
    run = script.RUNS[0]
    assert run.budget == "l4"
    assert script.budget_gib(run, 139.8) == pytest.approx(0.9 * 22.05)


def test_returned_runs_merge_into_the_data_file_once(script: ModuleType, tmp_path: Path) -> None:
    data = tmp_path / "runs.json"
    data.write_text(json.dumps({"schema": script.SCHEMA, "vllm_version": "0.26.0", "runs": []}))
    result = tmp_path / "result.json"
    run = {
        "name": "e2b-l4-cold",
        "status": "ok",
        "wall_s": 90.0,
        "figures": script.parse_engine_lines(LOG_026),
        "engine_lines": [],
        "settings": {"model": "gemma-4-e2b", "cold": True},
        "command": ["vllm", "serve", "x", "--language-model-only"],
    }
    result.write_text(json.dumps({"environment": {"vllm": "0.26.0"}, "runs": [run]}))
    assert script.merge_runs(data, result) == 1
    assert script.merge_runs(data, result) == 0
    merged = json.loads(data.read_text())["runs"][0]
    assert merged["settings"]["language_model_only"] is True
    assert merged["figures"]["kv_cache_tokens"] == 9_192_646


def test_compare_prints_every_recorded_run_beside_the_plan(script: ModuleType) -> None:
    table = script.compare(SCRIPT.parent / "plan_gpu_memory_runs.json")
    data = json.loads((SCRIPT.parent / "plan_gpu_memory_runs.json").read_text())
    assert len(table.splitlines()) == 2 + len(data["runs"])
    assert "9,192,646 / " in table
