"""Each row's low end (``kv_cache_tokens_low``) holds every real start and published log in the repository.

The remainder a real engine holds beyond the plan (non-torch memory and workspaces, which vary by GPU) is
not modelled; the row shows the pool with the largest remainder seen held back. These tests keep that
figure true as runs are added: above every remainder, yet not inflated past the largest one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gemmaserve.engine_memory import GIB, GPUS_WITH_REAL_STARTS, UNEXPLAINED_GIB
from gemmaserve.plan import plan_deployment

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _runs_table() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("plan_runs_table", BENCHMARKS / "plan_runs_table.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def _starts() -> list[tuple[str, int, object]]:
    table = _runs_table()
    runs = [*table.recorded(), *table.gpu_machine_results(), *table.published()]
    return [(f"{name} ({where})", logged, row) for name, where, logged, row in runs if logged and row.kv_cache_tokens]


def test_every_real_start_lies_between_the_low_end_and_the_plan() -> None:
    starts = _starts()
    assert len(starts) >= 20
    remainders = []
    for name, logged, row in starts:
        assert row.kv_cache_tokens_low <= logged, name
        bytes_per_token = row.kv_budget_gib * GIB / row.kv_cache_tokens
        # Model Runner V1 (the MoE in 0.26) sizes with its sampled graph estimate, which the row's low end
        # also allows for; what is left is the margin every start shares.
        spread = row.memory.cudagraph_estimate_spread_gib if row.memory else 0.0
        remainders.append((row.kv_cache_tokens - logged) * bytes_per_token / GIB - spread)
    assert max(remainders) <= UNEXPLAINED_GIB
    assert max(remainders) >= 0.9 * UNEXPLAINED_GIB, "the low end is wider than any start has needed"


def test_the_low_end_holds_that_much_less_for_the_cache() -> None:
    row = plan_deployment("e4b", "qat-w4a16", "l4", max_model_len=8192, vllm="0.30")
    assert row.kv_cache_tokens_low < row.kv_cache_tokens
    bytes_per_token = row.kv_budget_gib * GIB / row.kv_cache_tokens
    assert (row.kv_cache_tokens - row.kv_cache_tokens_low) * bytes_per_token / GIB == pytest.approx(
        UNEXPLAINED_GIB, rel=0.05
    )
    assert row.max_concurrency_low < row.max_concurrency


@pytest.mark.parametrize("gpu", ["t4", "a10g", "l40s", "h100", "h200", "l4"])
def test_gpus_without_a_real_start_name_the_unmeasured_term(gpu: str) -> None:
    row = plan_deployment("e2b", "bf16", gpu)
    assert row.memory is not None
    named = any("non-torch memory and workspaces" in term for term in row.memory.estimated_terms)
    assert named == (gpu not in GPUS_WITH_REAL_STARTS)


def test_a_row_that_fits_only_without_the_remainder_says_so() -> None:
    # find the longest context E4B bf16 holds on a T4, then ask for a little less: it fits, its low end does not
    longest = plan_deployment("e4b", "qat-w4a16", "t4", max_model_len=131072).max_model_len_that_fits
    assert longest
    edge = plan_deployment("e4b", "qat-w4a16", "t4", max_model_len=longest)
    assert edge.fits and edge.kv_cache_tokens_low < longest
    assert any(note.startswith("close to the edge") for note in edge.notes)
    roomy = plan_deployment("e4b", "qat-w4a16", "t4", max_model_len=4096)
    assert roomy.fits and not any(note.startswith("close to the edge") for note in roomy.notes)
