"""The allocator against vLLM's own planner: answers recorded by running each release's real source.

``benchmarks/plan_gpu_memory_oracle.py`` ran ``get_kv_cache_groups``,
``get_kv_cache_config_from_groups`` and ``get_max_concurrency_for_kv_cache_config`` of every
supported release (0.26.0 – 0.34.0, from the PyPI wheels) on every catalog geometry; the
plan must give the same block count, groups and tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.capacity import kv_capacity, kv_layout
from gemmaserve.catalog import load_catalog
from gemmaserve.vllm_releases import SUPPORTED_SERIES, resolve_release

ORACLE = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks" / "plan_gpu_memory_oracle.json").read_text(encoding="utf-8")
)
CASES = [(version, case) for version, cases in sorted(ORACLE["releases"].items()) for case in cases]


def test_every_supported_series_was_run() -> None:
    assert {resolve_release(version).series for version in ORACLE["releases"]} == set(SUPPORTED_SERIES)


@pytest.mark.parametrize(
    ("version", "case"), CASES, ids=[f"{v}-{c['model']}-{c['max_model_len']}-{c['available_bytes']}" for v, c in CASES]
)
def test_the_plan_allocates_as_vllm_does(version: str, case: dict[str, Any]) -> None:
    release = resolve_release(version)
    geometry = load_catalog().models[case["model"]].geometry
    capacity = kv_capacity(
        case["available_bytes"],
        geometry,
        max_model_len=case["max_model_len"],
        max_num_batched_tokens=case["batched"],
        release=release,
    )
    assert capacity.num_blocks == case["num_blocks"]
    assert capacity.kv_cache_tokens == case["kv_cache_tokens"]
    assert capacity.max_concurrency == pytest.approx(case["max_concurrency"], rel=1e-12)
    layout = kv_layout(geometry, release)
    assert layout.num_groups == len(case["group_layers"])
    assert layout.group_size == max(case["group_layers"])
    assert sorted(
        spec.block_size for spec, n in zip(layout.specs, layout.groups_per_spec, strict=True) for _ in range(n)
    ) == sorted(case["group_block_sizes"])
