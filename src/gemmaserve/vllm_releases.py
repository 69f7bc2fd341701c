"""What each supported vLLM release does with GPU memory, as rules read from its source (pure data).

One :class:`VllmRelease` per minor series, 0.26 – 0.34. Every field names the file
and line of the release's own wheel it was read from (``vllm/…``, the line in the
first release of the series listed), so a reader can open the source and check it.
``capacity`` (the KV allocator) and ``engine_memory`` (what is subtracted before
the KV pool) read these rules; nothing here is fitted to a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gemmaserve.errors import UsageError
from gemmaserve.pinned_image import PINNED_IMAGE

Sizing = Literal["profile", "after-warmup"]


@dataclass(frozen=True, slots=True)
class VllmRelease:
    series: str
    version: str  # the release whose source was read
    # KV allocator
    block_size: int
    sliding_block: Literal["smallest-kernel-block", "primary-block"]
    concurrent_batches: int  # in-flight batches with async scheduling (on by default), one pipeline stage
    group_padding_threshold: float
    null_block_in_fit_check: bool
    # Memory that is not KV
    sizing: Sizing
    default_gpu_memory_utilization: float
    v2_runner_for_moe: bool  # dense Gemma 4 runs on Model Runner V2 in every supported release
    v2_profiles_cudagraphs: bool  # V2's profile_cudagraph_memory is real (before: returns 0)
    large_gpu_batched_tokens: int
    huge_gpu_gib: float | None  # 0.28+: 160 GiB and up get 16,384 batched tokens
    language_model_only_clears_prefix_lm: bool  # --language-model-only lifts the multimodal batch floor
    v2_profiles_encoder: bool  # Model Runner V2's profile_run runs the encoder on a dummy item
    capture_max_num_seqs: bool  # 0.31+: max_num_seqs joins the capture sizes when it falls between steps
    sources: dict[str, str]


RULES: dict[str, str] = {
    "sliding_reservation": "sliding layers hold min(window - 1 + max_in_flight_tokens, max_model_len) tokens, in blocks (ceil) + 1",
    "in_flight": "max_concurrent_batches: 2 with async scheduling (the default) and one pipeline stage; x max_num_batched_tokens",
    "page_unification": "unify_kv_cache_spec_page_size: smaller pages scale their block size up to the largest page",
    "grouping": "group size = the larger type's layer count if it is below 1.5 x the smaller's, else the smaller's",
    "num_blocks": "num_blocks = available // page // group_size (bytes per block across the pools)",
    "concurrency": "blocks one request needs, summed over groups; max concurrency = num_blocks / that",
    "tokens": "logged GPU KV cache size = int(max_concurrency x max_model_len)",
    "block_size": "CacheConfig.DEFAULT_BLOCK_SIZE (16; 64 in 0.34)",
    "sliding_block": "sliding layers choose their own block (_largest_kernel_block_within over TRITON_ATTN's MultipleOf(16)): 16 up to 0.33, the primary block in 0.34",
    "budget": "available = requested - (weights + torch peak + non-torch) - CUDA-graph estimate",
    "utilization": "gpu_memory_utilization default (0.92; unset = 1.0 with the extensible KV cache in 0.34)",
    "runner": "Model Runner V2 where supported (0.26-0.28: not for MoE models)",
    "v2_cudagraph": "Model Runner V2's profile_cudagraph_memory (returns 0 up to 0.28)",
    "v2_sampler": "V2 dummy sampler: compute_logits (soft-capped), then Triton kernels in place",
    "v1_sampler": "V1 sampler: logits.to(float32), top-k/top-p, float32 softmax and exponential noise",
    "batch_defaults": "get_batch_defaults: max_num_batched_tokens / max_num_seqs by device memory",
    "mm_floor": "_get_min_mm_batched_tokens: prefix-LM multimodal models raise a default max_num_batched_tokens to the largest item",
    "cudagraph_estimate": "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1",
    "null_block": "the fit check plans against num_blocks - 1 (BlockPool's null block)",
    "extensible": "extensible KV cache sized after warmup and graph capture (default on CUDA)",
    "lmo_prefix_lm": "the arch config is converted with supports_multimodal (False under --language-model-only), "
    "so is_mm_prefix_lm and the batch floor go away (0.26: converted without it, the floor stays)",
    "v2_encoder_profile": "Model Runner V2's profile_run calls encoder_runner.profile_encoder_cache on the largest "
    "item (0.26: profile_run has no encoder pass)",
    "capture_sizes": "_set_cudagraph_sizes: min(2 x max_num_seqs, 512, max_num_batched_tokens); 1, 2, 4, every 8 to "
    "248, every 16 from 256 (0.31+: max_num_seqs added between steps)",
    "embeddings_outside_graph": "Gemma4ForConditionalGeneration.embed_input_ids looks up the token and per-layer "
    "embeddings eagerly, outside the compiled Gemma4Model; Gemma4ForCausalLM and --language-model-only look them "
    "up inside it",
}

# file:line of each rule in each release's wheel, found by reading its unpacked source.
_LINES: dict[str, dict[str, str]] = {
    "0.26.0": {
        "capture_sizes": "config/vllm.py:1795",
        "lmo_prefix_lm": "config/model.py:773",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:673",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:1525",
        "sliding_reservation": "v1/kv_cache_interface.py:584",
        "in_flight": "config/vllm.py:512",
        "page_unification": "v1/core/kv_cache_utils.py:1067",
        "grouping": "v1/core/kv_cache_utils.py:1224",
        "num_blocks": "v1/core/kv_cache_utils.py:1005",
        "concurrency": "v1/core/kv_cache_utils.py:937",
        "tokens": "v1/core/kv_cache_utils.py:1829",
        "block_size": "config/cache.py:47",
        "sliding_block": "model_executor/layers/attention/attention.py:655",
        "budget": "v1/worker/gpu_worker.py:541",
        "utilization": "config/cache.py:68",
        "runner": "config/vllm.py:550",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:705",
        "v2_sampler": "v1/worker/gpu/model_runner.py:654",
        "v1_sampler": "v1/sample/sampler.py:96",
        "batch_defaults": "engine/arg_utils.py:2431",
        "mm_floor": "engine/arg_utils.py:2596",
        "cudagraph_estimate": "envs.py:1986",
    },
    "0.27.1": {
        "capture_sizes": "config/vllm.py:1834",
        "lmo_prefix_lm": "config/model.py:857",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:715",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:1948",
        "sliding_reservation": "v1/kv_cache_interface.py:604",
        "in_flight": "config/vllm.py:540",
        "page_unification": "v1/core/kv_cache_utils.py:1070",
        "grouping": "v1/core/kv_cache_utils.py:1248",
        "num_blocks": "v1/core/kv_cache_utils.py:1008",
        "concurrency": "v1/core/kv_cache_utils.py:937",
        "tokens": "v1/core/kv_cache_utils.py:1887",
        "block_size": "config/cache.py:47",
        "sliding_block": "model_executor/layers/attention/attention.py:655",
        "budget": "v1/worker/gpu_worker.py:544",
        "utilization": "config/cache.py:68",
        "runner": "config/vllm.py:578",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:749",
        "v2_sampler": "v1/worker/gpu/model_runner.py:683",
        "v1_sampler": "v1/sample/sampler.py:96",
        "batch_defaults": "engine/arg_utils.py:2515",
        "mm_floor": "engine/arg_utils.py:2680",
        "cudagraph_estimate": "envs.py:2018",
    },
    "0.28.0": {
        "capture_sizes": "config/vllm.py:1941",
        "lmo_prefix_lm": "config/model.py:892",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:803",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2014",
        "sliding_reservation": "v1/kv_cache_interface.py:566",
        "in_flight": "config/vllm.py:550",
        "page_unification": "v1/core/kv_cache_utils.py:1036",
        "grouping": "v1/core/kv_cache_utils.py:1214",
        "num_blocks": "v1/core/kv_cache_utils.py:988",
        "concurrency": "v1/core/kv_cache_utils.py:917",
        "tokens": "v1/core/kv_cache_utils.py:1858",
        "block_size": "config/cache.py:48",
        "sliding_block": "model_executor/layers/attention/attention.py:634",
        "budget": "v1/worker/gpu_worker.py:559",
        "utilization": "config/cache.py:69",
        "runner": "config/vllm.py:615",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:843",
        "v2_sampler": "v1/worker/gpu/model_runner.py:771",
        "v1_sampler": "v1/sample/sampler.py:97",
        "batch_defaults": "engine/arg_utils.py:2553",
        "mm_floor": "engine/arg_utils.py:2724",
        "cudagraph_estimate": "envs.py:2093",
    },
    "0.29.0": {
        "capture_sizes": "config/vllm.py:2012",
        "lmo_prefix_lm": "config/model.py:904",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:864",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2041",
        "sliding_reservation": "v1/kv_cache_interface.py:724",
        "in_flight": "config/vllm.py:559",
        "page_unification": "v1/core/kv_cache_utils.py:1135",
        "grouping": "v1/core/kv_cache_utils.py:1313",
        "num_blocks": "v1/core/kv_cache_utils.py:1440",
        "concurrency": "v1/core/kv_cache_utils.py:1047",
        "tokens": "v1/core/kv_cache_utils.py:2021",
        "block_size": "config/cache.py:79",
        "sliding_block": "model_executor/layers/attention/attention.py:634",
        "budget": "v1/worker/gpu_worker.py:606",
        "utilization": "config/cache.py:111",
        "runner": "config/vllm.py:645",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:896",
        "v2_sampler": "v1/worker/gpu/model_runner.py:832",
        "v1_sampler": "v1/sample/sampler.py:97",
        "batch_defaults": "engine/arg_utils.py:2669",
        "mm_floor": "engine/arg_utils.py:2840",
        "cudagraph_estimate": "envs.py:2105",
        "null_block": "v1/core/kv_cache_utils.py:2316",
    },
    "0.30.0": {
        "capture_sizes": "config/vllm.py:2223",
        "lmo_prefix_lm": "config/model.py:917",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:951",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2068",
        "sliding_reservation": "v1/kv_cache_interface.py:836",
        "in_flight": "config/vllm.py:589",
        "page_unification": "v1/core/kv_cache_utils.py:1365",
        "grouping": "v1/core/kv_cache_utils.py:1543",
        "num_blocks": "v1/core/kv_cache_utils.py:1750",
        "concurrency": "v1/core/kv_cache_utils.py:1067",
        "tokens": "v1/core/kv_cache_utils.py:2383",
        "block_size": "config/cache.py:71",
        "sliding_block": "model_executor/layers/attention/attention.py:649",
        "budget": "v1/worker/gpu_worker.py:621",
        "utilization": "config/cache.py:103",
        "runner": "config/vllm.py:675",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:983",
        "v2_sampler": "v1/worker/gpu/model_runner.py:919",
        "v1_sampler": "v1/sample/sampler.py:97",
        "batch_defaults": "engine/arg_utils.py:2701",
        "mm_floor": "engine/arg_utils.py:2872",
        "cudagraph_estimate": "envs.py:2109",
        "null_block": "v1/core/kv_cache_utils.py:2722",
    },
    "0.31.0": {
        "capture_sizes": "config/vllm.py:2459",
        "lmo_prefix_lm": "config/model.py:992",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:969",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2053",
        "sliding_reservation": "v1/kv_cache_interface.py:860",
        "in_flight": "config/vllm.py:592",
        "page_unification": "v1/core/kv_cache_utils.py:1383",
        "grouping": "v1/core/kv_cache_utils.py:1561",
        "num_blocks": "v1/core/kv_cache_utils.py:1771",
        "concurrency": "v1/core/kv_cache_utils.py:1090",
        "tokens": "v1/core/kv_cache_utils.py:2452",
        "block_size": "config/cache.py:71",
        "sliding_block": "model_executor/layers/attention/attention.py:652",
        "budget": "v1/worker/gpu_worker.py:673",
        "utilization": "config/cache.py:103",
        "runner": "config/vllm.py:701",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:1004",
        "v2_sampler": "v1/worker/gpu/model_runner.py:942",
        "v1_sampler": "v1/sample/sampler.py:96",
        "batch_defaults": "engine/arg_utils.py:2829",
        "mm_floor": "engine/arg_utils.py:3000",
        "cudagraph_estimate": "envs.py:2162",
        "null_block": "v1/core/kv_cache_utils.py:2780",
    },
    "0.32.0": {
        "capture_sizes": "config/vllm.py:2363",
        "lmo_prefix_lm": "config/model.py:1026",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:999",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2051",
        "sliding_reservation": "v1/kv_cache_interface.py:879",
        "in_flight": "config/vllm.py:577",
        "page_unification": "v1/core/kv_cache_utils.py:1292",
        "grouping": "v1/core/kv_cache_utils.py:1470",
        "num_blocks": "v1/core/kv_cache_utils.py:1627",
        "concurrency": "v1/core/kv_cache_utils.py:1195",
        "tokens": "v1/core/kv_cache_utils.py:2308",
        "block_size": "config/cache.py:72",
        "sliding_block": "model_executor/layers/attention/attention.py:652",
        "budget": "v1/worker/gpu_worker.py:740",
        "utilization": "config/cache.py:102",
        "runner": "config/vllm.py:703",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:1038",
        "v2_sampler": "v1/worker/gpu/model_runner.py:972",
        "v1_sampler": "v1/sample/sampler.py:97",
        "batch_defaults": "engine/arg_utils.py:2894",
        "mm_floor": "engine/arg_utils.py:3065",
        "cudagraph_estimate": "envs.py:2221",
        "null_block": "v1/core/kv_cache_utils.py:2627",
    },
    "0.33.0": {
        "capture_sizes": "config/vllm.py:2469",
        "lmo_prefix_lm": "config/model.py:1039",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:1030",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2098",
        "sliding_reservation": "v1/kv_cache_interface.py:938",
        "in_flight": "config/vllm.py:588",
        "page_unification": "v1/core/kv_cache_planning.py:346",
        "grouping": "v1/core/kv_cache_planning.py:524",
        "num_blocks": "v1/core/kv_cache_planning.py:681",
        "concurrency": "v1/core/kv_cache_utils.py:1061",
        "tokens": "v1/core/kv_cache_utils.py:1128",
        "block_size": "config/cache.py:185",
        "sliding_block": "model_executor/layers/attention/attention.py:657",
        "budget": "v1/worker/gpu_worker.py:753",
        "utilization": "config/cache.py:215",
        "runner": "config/vllm.py:731",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:1069",
        "v2_sampler": "v1/worker/gpu/model_runner.py:993",
        "v1_sampler": "v1/sample/sampler.py:158",
        "batch_defaults": "engine/arg_utils.py:2940",
        "mm_floor": "engine/arg_utils.py:3119",
        "cudagraph_estimate": "envs.py:2219",
        "null_block": "v1/core/kv_cache_planning.py:1533",
    },
    "0.34.0": {
        "capture_sizes": "config/vllm.py:2407",
        "lmo_prefix_lm": "config/model.py:1059",
        "v2_encoder_profile": "v1/worker/gpu/model_runner.py:1082",
        "embeddings_outside_graph": "model_executor/models/gemma4_mm.py:2285",
        "sliding_reservation": "v1/kv_cache_interface.py:952",
        "in_flight": "config/vllm.py:560",
        "page_unification": "v1/core/kv_cache_planning.py:392",
        "grouping": "v1/core/kv_cache_planning.py:570",
        "num_blocks": "v1/core/kv_cache_planning.py:724",
        "concurrency": "v1/core/kv_cache_utils.py:1082",
        "tokens": "v1/core/kv_cache_utils.py:1149",
        "block_size": "config/cache.py:185",
        "sliding_block": "model_executor/layers/attention/attention.py:686",
        "budget": "v1/worker/gpu_worker.py:776",
        "utilization": "config/cache.py:216",
        "v2_cudagraph": "v1/worker/gpu/model_runner.py:1121",
        "v2_sampler": "v1/worker/gpu/model_runner.py:1039",
        "batch_defaults": "engine/arg_utils.py:2977",
        "mm_floor": "engine/arg_utils.py:3156",
        "cudagraph_estimate": "envs.py:2355",
        "null_block": "v1/core/kv_cache_planning.py:1635",
        "extensible": "v1/worker/extensible_kv_cache.py:592",
    },
}


def _sources(version: str) -> dict[str, str]:
    return {key: f"vllm {version}: {where} {RULES[key]}" for key, where in _LINES[version].items()}


def _release(version: str, **overrides: object) -> VllmRelease:
    base: dict[str, object] = {
        "series": ".".join(version.split(".")[:2]),
        "version": version,
        "block_size": 16,
        "sliding_block": "smallest-kernel-block",
        "concurrent_batches": 2,
        "group_padding_threshold": 1.5,
        "null_block_in_fit_check": False,
        "sizing": "profile",
        "default_gpu_memory_utilization": 0.92,
        "v2_runner_for_moe": False,
        "v2_profiles_cudagraphs": False,
        "large_gpu_batched_tokens": 8192,
        "huge_gpu_gib": None,
        "language_model_only_clears_prefix_lm": True,
        "v2_profiles_encoder": True,
        "capture_max_num_seqs": version >= "0.31",
        "sources": _sources(version),
    }
    base.update(overrides)
    return VllmRelease(**base)  # type: ignore[arg-type]


_V2_EVERYWHERE: dict[str, object] = {"v2_runner_for_moe": True, "v2_profiles_cudagraphs": True}
RELEASES: dict[str, VllmRelease] = {
    "0.26": _release("0.26.0", language_model_only_clears_prefix_lm=False, v2_profiles_encoder=False),
    "0.27": _release("0.27.1"),
    "0.28": _release("0.28.0", huge_gpu_gib=160.0),
    "0.29": _release("0.29.0", huge_gpu_gib=160.0, null_block_in_fit_check=True, **_V2_EVERYWHERE),
    "0.30": _release("0.30.0", huge_gpu_gib=160.0, null_block_in_fit_check=True, **_V2_EVERYWHERE),
    "0.31": _release("0.31.0", huge_gpu_gib=160.0, null_block_in_fit_check=True, **_V2_EVERYWHERE),
    "0.32": _release("0.32.0", huge_gpu_gib=160.0, null_block_in_fit_check=True, **_V2_EVERYWHERE),
    "0.33": _release("0.33.0", huge_gpu_gib=160.0, null_block_in_fit_check=True, **_V2_EVERYWHERE),
    "0.34": _release(
        "0.34.0",
        huge_gpu_gib=160.0,
        null_block_in_fit_check=True,
        block_size=64,
        sliding_block="primary-block",
        sizing="after-warmup",
        default_gpu_memory_utilization=1.0,
        **_V2_EVERYWHERE,
    ),
}
SUPPORTED_SERIES: tuple[str, ...] = tuple(RELEASES)
DEFAULT_SERIES = SUPPORTED_SERIES[-1]


def sagemaker_image_series() -> str:
    """The series of the vLLM in the SageMaker image gemmaserve deploys (:mod:`gemmaserve.pinned_image`)."""
    return resolve_release(PINNED_IMAGE.vllm_version.split("+")[0]).series


def resolve_release(version: str | None) -> VllmRelease:
    """The rules of the supported series a version string (``0.30.0``, ``v0.34``) belongs to.

    Raises:
        UsageError: for a version outside 0.26 – 0.34.
    """
    if version is None:
        return RELEASES[DEFAULT_SERIES]
    text = version.strip().lower().removeprefix("v")
    parts = text.split(".")
    series = ".".join(parts[:2])
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and series in RELEASES:
        return RELEASES[series]
    raise UsageError(
        f"vLLM {version!r} is outside the releases the plan follows",
        hint=f"Use one of {SUPPORTED_SERIES[0]}.x to {SUPPORTED_SERIES[-1]}.x, e.g. --vllm 0.30.0.",
    )
