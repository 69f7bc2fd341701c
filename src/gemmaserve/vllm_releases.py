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
    sources: dict[str, str]


def _sources(version: str, **lines: str) -> dict[str, str]:
    return {key: f"vllm {version}: {value}" for key, value in lines.items()}


_COMMON_026 = {
    "sliding_reservation": "v1/kv_cache_interface.py:584 SlidingWindowSpec.max_admission_blocks_per_request: "
    "min(window - 1 + max_in_flight_tokens, max_model_len) // block (ceil) + 1",
    "in_flight": "config/vllm.py:512-533 max_concurrent_batches (2 with async scheduling) x max_num_batched_tokens",
    "page_unification": "v1/core/kv_cache_utils.py:1067 unify_kv_cache_spec_page_size: smaller pages scale their block size",
    "grouping": "v1/core/kv_cache_utils.py:1224 group size = largest type's count if max < 1.5 x min, else the smallest",
    "num_blocks": "v1/core/kv_cache_utils.py:1005 get_num_blocks: available // page // group_size",
    "concurrency": "v1/core/kv_cache_utils.py:937 blocks per request summed over groups; num_blocks / that",
    "tokens": "v1/core/kv_cache_utils.py:1829 get_kv_cache_capacity: int(max_concurrency x max_model_len)",
    "block_size": "config/cache.py:47 CacheConfig.DEFAULT_BLOCK_SIZE = 16",
    "sliding_block": "model_executor/layers/attention/attention.py:95,655 _largest_kernel_block_within: without a "
    "padded page the smallest kernel block (TRITON_ATTN: MultipleOf(16) -> 16), then unified",
    "budget": "v1/worker/gpu_worker.py:541 requested_memory - (weights + torch peak + non-torch) - cudagraph estimate",
    "utilization": "config/cache.py:68 gpu_memory_utilization default 0.92",
    "runner": "config/vllm.py:550,605 Model Runner V2 for non-MoE models, V1 for MoE",
    "v2_cudagraph": "v1/worker/gpu/model_runner.py:705 V2 profile_cudagraph_memory returns 0",
    "v2_sampler": "v1/worker/gpu/model_runner.py:654 V2 dummy sampler: compute_logits then Triton kernels in place",
    "v1_sampler": "v1/sample/sampler.py:96 V1 sampler: logits.to(float32), then top-k/top-p sorts",
    "batch_defaults": "engine/arg_utils.py:2431 get_batch_defaults: >= 70 GiB and not A100: 8192 / 1024, else 2048 / 256",
    "mm_floor": "engine/arg_utils.py:2596 _get_min_mm_batched_tokens: prefix-LM multimodal models raise the default "
    "max_num_batched_tokens to the largest item (model_executor/models/gemma4_mm.py:91-92,266 video: 32 x (70 + 8))",
    "cudagraph_estimate": "envs.py:1986 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1",
}


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
        "sources": _sources(version, **_COMMON_026),
    }
    base.update(overrides)
    return VllmRelease(**base)  # type: ignore[arg-type]


RELEASES: dict[str, VllmRelease] = {
    "0.26": _release("0.26.0"),
    "0.27": _release("0.27.1", sources=_sources(
        "0.27.1", **{**_COMMON_026, "sliding_reservation": "v1/kv_cache_interface.py:604 (as 0.26)",
                     "grouping": "v1/core/kv_cache_utils.py:1248 (1.5, as 0.26)"})),
    "0.28": _release("0.28.0", huge_gpu_gib=160.0, sources=_sources(
        "0.28.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:95,634 the smallest kernel block "
                     "without a padded page (TRITON_ATTN: 16), then unified",
                     "sliding_reservation": "v1/kv_cache_interface.py:566 window - 1 + extra_retained_tokens (0 "
                     "without multi-module drafts) + max_in_flight_tokens",
                     "grouping": "v1/core/kv_cache_utils.py:1214 (1.5)",
                     "batch_defaults": "engine/arg_utils.py:2553 >= 160 GiB: 16384 / 1024; >= 70 GiB: 8192 / 1024"})),
    "0.29": _release("0.29.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
                     sources=_sources(
        "0.29.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:95,634 the smallest kernel block "
                     "without a padded page (TRITON_ATTN: 16), then unified",
                     "sliding_reservation": "v1/kv_cache_interface.py:724",
                     "grouping": "v1/core/kv_cache_utils.py:1313 (1.5)",
                     "runner": "config/vllm.py:645 Model Runner V2 for every model it supports (MoE included)",
                     "v2_cudagraph": "v1/worker/gpu/model_runner.py:896 V2 profile_cudagraph_memory estimates graphs",
                     "batch_defaults": "engine/arg_utils.py:2669"})),
    "0.30": _release("0.30.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
                     null_block_in_fit_check=True, sources=_sources(
        "0.30.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:98,648 the largest kernel "
                     "block whose page fits sw_per_token x block_size (TRITON_ATTN: 16)",
                     "sliding_reservation": "v1/kv_cache_interface.py:836",
                     "grouping": "v1/core/kv_cache_utils.py:1543 (1.5)",
                     "null_block": "v1/core/kv_cache_utils.py:2722 the fit check plans against num_blocks - 1",
                     "tokens": "v1/core/kv_cache_utils.py:2383 int(max_concurrency x max_model_len)",
                     "runner": "config/vllm.py:675 V2 for every supported model",
                     "v2_cudagraph": "v1/worker/gpu/model_runner.py:983 V2 estimates CUDA graph memory",
                     "batch_defaults": "engine/arg_utils.py:2701"})),
    "0.31": _release("0.31.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
                     null_block_in_fit_check=True, sources=_sources(
        "0.31.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:101,651 the largest kernel "
                     "block whose page fits sw_per_token x block_size (TRITON_ATTN: 16)", "sliding_reservation": "v1/kv_cache_interface.py:860",
                     "grouping": "v1/core/kv_cache_utils.py:1561 (1.5)",
                     "tokens": "v1/core/kv_cache_utils.py:2452"})),
    "0.32": _release("0.32.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
                     null_block_in_fit_check=True, sources=_sources(
        "0.32.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:101,651 the largest kernel "
                     "block whose page fits sw_per_token x block_size (TRITON_ATTN: 16)", "sliding_reservation": "v1/kv_cache_interface.py:879",
                     "grouping": "v1/core/kv_cache_utils.py:1470 (1.5)",
                     "tokens": "v1/core/kv_cache_utils.py:2308"})),
    "0.33": _release("0.33.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
                     null_block_in_fit_check=True, sources=_sources(
        "0.33.0", **{**_COMMON_026,
                     "sliding_block": "model_executor/layers/attention/attention.py:101,656 the largest kernel "
                     "block whose page fits sw_per_token x block_size (TRITON_ATTN: 16)", "sliding_reservation": "v1/kv_cache_interface.py:938",
                     "grouping": "v1/core/kv_cache_planning.py:524 (1.5)",
                     "page_unification": "v1/core/kv_cache_planning.py:346",
                     "tokens": "v1/core/kv_cache_utils.py:1128",
                     "block_size": "config/cache.py:185 DEFAULT_BLOCK_SIZE = 16"})),
    "0.34": _release(
        "0.34.0", huge_gpu_gib=160.0, v2_runner_for_moe=True, v2_profiles_cudagraphs=True,
        null_block_in_fit_check=True, block_size=64, sliding_block="primary-block",
        sizing="after-warmup", default_gpu_memory_utilization=1.0, sources=_sources(
            "0.34.0", **{**_COMMON_026,
                         "sliding_reservation": "v1/kv_cache_interface.py:952",
                         "in_flight": "config/vllm.py:560 max_concurrent_batches: pp_size + 1 with async scheduling",
                         "grouping": "v1/core/kv_cache_planning.py:570 (1.5)",
                         "page_unification": "v1/core/kv_cache_planning.py:392",
                         "num_blocks": "v1/core/kv_cache_planning.py:724 available // bytes per block",
                         "tokens": "v1/core/kv_cache_utils.py:1149",
                         "block_size": "config/cache.py:185 DEFAULT_BLOCK_SIZE = 64",
                         "sliding_block": "model_executor/layers/attention/attention.py:101,686 sliding layers pick "
                         "the largest kernel block within their page budget that divides the primary block",
                         "budget": "v1/worker/extensible_kv_cache.py:592 extensible KV cache (default on CUDA, "
                         "config/cache.py:395) sized after warmup and CUDA graph capture: requested - weights - "
                         "graphs - non-torch - transient peak",
                         "utilization": "config/cache.py:216,495 unset -> 1.0 with the extensible KV cache",
                         "runner": "v1/worker/gpu_worker.py:587 one (V2) GPU model runner",
                         "batch_defaults": "engine/arg_utils.py:2977"})),
}
SUPPORTED_SERIES: tuple[str, ...] = tuple(RELEASES)
DEFAULT_SERIES = SUPPORTED_SERIES[-1]



def sagemaker_image_series() -> str:
    """The series of the vLLM in the SageMaker image gemmaserve deploys (``sagemaker/container.py``)."""
    from gemmaserve.sagemaker.container import PINNED_IMAGE

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
