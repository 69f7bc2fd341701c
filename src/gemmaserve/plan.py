"""Capacity and cost planning: which Gemma 4 checkpoint fits which GPU, and at what price (pure).

``plan_deployment`` answers for one model × encoding × GPU (and optionally an
instance type, whose host RAM and price then count): weights on the GPU, the KV
pool vLLM will report, concurrency at the context length, host RAM and swap
needed while loading, disk, dtype, whether the Turing clamp is needed, and the
first term that binds. ``plan_all`` builds the full table. No I/O beyond the
packaged catalog; every constant below is fitted to or read from a published
run, and ``docs/plan.md`` says how close it gets.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from gemmaserve.capacity import GIB, kv_capacity
from gemmaserve.catalog import (
    Checkpoint,
    Gpu,
    Instance,
    Model,
    load_catalog,
    resolve_encoding,
    resolve_gpu,
    resolve_model,
)

# vLLM's defaults for GPUs under 70 GiB when run as `vllm serve` (arg_utils: larger GPUs get
# 8192 / 1024). The published L4 runs only reconcile with 2048 batched tokens.
SMALL_GPU_MAX_NUM_BATCHED_TOKENS = 2048
LARGE_GPU_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
LARGE_GPU_THRESHOLD_GIB = 70.0

# Weights as vLLM reports them ("Model loading took X GiB") versus the checkpoint's parts:
# E2B bf16 9.75 GiB for 9.51 GiB of parts (1.025), QAT 8.01 for 7.75 (1.034).
WEIGHTS_OVERHEAD_FACTOR = 1.03
# Memory vLLM keeps for itself besides weights and KV (non-torch allocations, the sampler's
# logits for max_num_seqs × 262,144-token vocabulary, the multimodal encoder's profiling run),
# fitted so the published E2B L4 figures come out: 0.9 × visible − weights − KV budget.
ENGINE_OVERHEAD_BASE_GIB = 3.335
# Extra overhead of the W4A16 (Marlin) path, fitted from the two E2B runs.
QUANTIZED_EXTRA_OVERHEAD_GIB = 0.39
# Activation memory per batched token of the profiling run, in bytes per (hidden + 3 × widest
# MLP) element at 2 bytes, scaled against E2B (whose share is folded into the base above).
_E2B_ACTIVATION_WIDTH = 1536 + 3 * 12288

# Host RAM while vLLM loads: the checkpoint is staged through host memory on top of the
# engine's own resident set. Published: a 7.8 GB host peaked at 6,761 MiB swap (bf16 E2B)
# and 4,770 MiB (QAT), i.e. checkpoint + ~3.8 GiB.
LOAD_BASELINE_HOST_GIB = 3.8
HOST_OS_RESERVE_GIB = 0.5
# A CUDA build of torch + vLLM and its caches in the install environment.
INSTALL_DISK_GIB = 12.0
COMPILE_CACHE_DISK_GIB = 1.0

Verdict = Literal["fits", "fits-with-swap", "does-not-fit", "not-servable"]

# vLLM releases whose memory arithmetic the plan follows, oldest first; the last is the default.
SUPPORTED_VLLM_VERSIONS = ("0.26", "0.27", "0.28", "0.29", "0.30", "0.31", "0.32", "0.33", "0.34")
DEFAULT_VLLM_VERSION = SUPPORTED_VLLM_VERSIONS[-1]
TOWER_PARTS = ("audio_tower", "vision_tower")


def resolve_vllm_version(version: str | None) -> str:
    """The supported minor series (``"0.30"``) a vLLM version string belongs to.

    Raises:
        UsageError: for a version outside the supported range.
    """
    from gemmaserve.errors import UsageError

    if version is None:
        return DEFAULT_VLLM_VERSION
    text = version.strip().lower().removeprefix("v")
    parts = text.split(".")
    series = ".".join(parts[:2])
    if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) and series in SUPPORTED_VLLM_VERSIONS:
        return series
    raise UsageError(
        f"vLLM {version!r} is outside the releases the plan follows",
        hint=f"Use one of {SUPPORTED_VLLM_VERSIONS[0]}.x to {SUPPORTED_VLLM_VERSIONS[-1]}.x, e.g. --vllm 0.30.0.",
    )


class PlanRow(BaseModel):
    model: str
    encoding: str
    repo_id: str
    gpu: str
    instance: str | None
    verdict: Verdict
    fits: bool
    binding_term: str | None
    notes: list[str]
    dtype: str
    needs_turing_clamp: bool
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    language_model_only: bool = False
    vllm_version: str = DEFAULT_VLLM_VERSION
    weights_gib: float
    weights_source: Literal["published", "estimated"]
    engine_overhead_gib: float
    kv_budget_gib: float
    kv_cache_tokens: int
    max_concurrency: float
    checkpoint_gib: float
    host_ram_needed_gib: float
    host_ram_gib: float | None
    swap_needed_gib: float | None
    disk_gib: float
    price_usd_per_hour: float | None
    price_source: str | None
    decode_tokens_per_s: float | None
    usd_per_million_output_tokens: float | None
    vllm_args: list[str]


class PlanTable(BaseModel):
    rows: list[PlanRow]
    price_date: str


def _weights_gib(
    checkpoint: Checkpoint, *, language_model_only: bool = False
) -> tuple[float, Literal["published", "estimated"]]:
    if checkpoint.calibration and not language_model_only:
        return checkpoint.calibration[0].weights_gib, "published"
    parts = sum(
        size for name, size in checkpoint.parts_bytes.items()
        if not (language_model_only and name in TOWER_PARTS)
    )
    return parts / GIB * WEIGHTS_OVERHEAD_FACTOR, "estimated"


def _engine_overhead_gib(model: Model, checkpoint: Checkpoint, max_num_batched_tokens: int) -> float:
    geometry = model.geometry
    widest_mlp = geometry.intermediate_size * (2 if geometry.num_kv_shared_layers else 1)
    width = geometry.hidden_size + 3 * widest_mlp
    activation_delta = (width - _E2B_ACTIVATION_WIDTH) * 2 * max_num_batched_tokens / GIB
    overhead = ENGINE_OVERHEAD_BASE_GIB + max(0.0, activation_delta) * 4
    if checkpoint.quantization:
        overhead += QUANTIZED_EXTRA_OVERHEAD_GIB
    return overhead


def smallest_instance(gpu: Gpu, platform: str = "ec2") -> Instance | None:
    """The cheapest single-GPU instance of ``platform`` that carries ``gpu``."""
    candidates = [
        inst for inst in load_catalog().instances.values()
        if inst.gpu == gpu.key and inst.platform == platform and inst.gpu_count == 1
    ]
    return min(candidates, key=lambda inst: (inst.price_usd_per_hour or math.inf, inst.memory_gib), default=None)


def plan_deployment(
    model: str | Model,
    encoding: str | Checkpoint,
    gpu: str | Gpu | None = None,
    *,
    instance: Instance | None = None,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    decode_tokens_per_s: float | None = None,
    language_model_only: bool = False,
    vllm_version: str | None = None,
) -> PlanRow:
    """Plan one model × encoding on one GPU (or on the GPU of ``instance``).

    ``language_model_only`` plans vLLM's ``--language-model-only``: the vision and audio
    towers are neither loaded nor profiled. ``vllm_version`` picks the release whose memory
    arithmetic is followed (default: the newest supported).

    Raises:
        UnknownName: for names not in the catalog.
        UsageError: for out-of-range numbers or an unsupported vLLM version.
    """
    from gemmaserve.errors import UsageError

    series = resolve_vllm_version(vllm_version)
    if not 0.05 <= gpu_memory_utilization <= 0.99:
        raise UsageError(
            f"--gpu-memory-utilization must be between 0.05 and 0.99, got {gpu_memory_utilization}",
            hint="vLLM's default is 0.9.",
        )
    if max_model_len < 16:
        raise UsageError(f"--max-model-len must be at least 16, got {max_model_len}")
    model_obj = resolve_model(model) if isinstance(model, str) else model
    checkpoint = resolve_encoding(model_obj, encoding) if isinstance(encoding, str) else encoding
    if instance is not None:
        gpu_obj = resolve_gpu(instance.gpu)
    elif gpu is None:
        raise UsageError("Name a GPU or an instance type.", hint="--gpu t4 or --instance ml.g4dn.xlarge")
    else:
        gpu_obj = resolve_gpu(gpu) if isinstance(gpu, str) else gpu
    if max_model_len > model_obj.geometry.max_position_embeddings:
        raise UsageError(
            f"--max-model-len {max_model_len} exceeds {model_obj.key}'s context of "
            f"{model_obj.geometry.max_position_embeddings} tokens"
        )

    large_gpu = gpu_obj.visible_memory_gib >= LARGE_GPU_THRESHOLD_GIB
    batched = max_num_batched_tokens or (
        LARGE_GPU_MAX_NUM_BATCHED_TOKENS if large_gpu else SMALL_GPU_MAX_NUM_BATCHED_TOKENS
    )
    seqs = max_num_seqs or DEFAULT_MAX_NUM_SEQS
    dtype = gpu_obj.serving_dtype
    notes: list[str] = []
    if not gpu_obj.bf16:
        notes.append(f"{gpu_obj.name} has no bf16 datapath: serve in float16")
    needs_clamp = gpu_obj.pre_ampere and model_obj.geometry.full_head_dim >= 512

    weights_gib, weights_source = _weights_gib(checkpoint, language_model_only=language_model_only)
    overhead_gib = _engine_overhead_gib(model_obj, checkpoint, batched)
    budget_gib = gpu_obj.visible_memory_gib * gpu_memory_utilization - weights_gib - overhead_gib
    capacity = kv_capacity(
        max(0.0, budget_gib) * GIB,
        model_obj.geometry,
        dtype_bytes=2,
        max_model_len=max_model_len,
        max_num_batched_tokens=min(batched, max_model_len),
    )
    checkpoint_gib = checkpoint.total_bytes / GIB
    host_needed = checkpoint_gib + LOAD_BASELINE_HOST_GIB
    host_ram = instance.memory_gib if instance else None
    swap_needed = max(0.0, host_needed - (host_ram - HOST_OS_RESERVE_GIB)) if host_ram is not None else None

    verdict: Verdict = "fits"
    binding: str | None = None
    if not checkpoint.servable_by_vllm:
        verdict, binding = "not-servable", f"{checkpoint.format} is not served by vLLM (use llama.cpp)"
    elif budget_gib <= 0:
        verdict = "does-not-fit"
        binding = (
            f"GPU memory: weights {weights_gib:.2f} GiB + engine {overhead_gib:.2f} GiB exceed "
            f"{gpu_memory_utilization:g} × {gpu_obj.visible_memory_gib} GiB"
        )
    elif capacity.max_concurrency < 1:
        verdict = "does-not-fit"
        binding = (
            f"KV cache: {capacity.kv_cache_tokens:,} tokens cannot hold one {max_model_len:,}-token request; "
            "lower --max-model-len (or --max-num-batched-tokens: sliding layers keep that many tokens too)"
        )
    elif swap_needed:
        verdict = "fits-with-swap"
        binding = (
            f"host RAM: loading needs {host_needed:.1f} GiB, the host has {host_ram:g} GiB; "
            f"add a swapfile of {math.ceil(swap_needed + 1)} GiB"
        )

    price = instance.price if instance else None
    usd_per_m = None
    if price and decode_tokens_per_s:
        from gemmaserve.bench.cost import usd_per_million_tokens

        usd_per_m = usd_per_million_tokens(price.usd_per_hour, decode_tokens_per_s)
    if price and price.estimated:
        notes.append(f"{instance.key if instance else ''} price is an estimate, not a recorded list price")

    args = [
        checkpoint.repo_id,
        "--dtype", dtype,
        "--max-model-len", str(max_model_len),
        "--gpu-memory-utilization", f"{gpu_memory_utilization:g}",
        "--max-num-seqs", str(seqs),
    ]
    if max_num_batched_tokens:
        args += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if language_model_only:
        args.append("--language-model-only")
    return PlanRow(
        model=model_obj.key,
        encoding=checkpoint.key,
        repo_id=checkpoint.repo_id,
        gpu=gpu_obj.key,
        instance=instance.key if instance else None,
        verdict=verdict,
        fits=verdict in ("fits", "fits-with-swap"),
        binding_term=binding,
        notes=notes,
        dtype=dtype,
        needs_turing_clamp=needs_clamp,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        language_model_only=language_model_only,
        vllm_version=series,
        weights_gib=round(weights_gib, 2),
        weights_source=weights_source,
        engine_overhead_gib=round(overhead_gib, 2),
        kv_budget_gib=round(max(0.0, budget_gib), 2),
        kv_cache_tokens=capacity.kv_cache_tokens,
        max_concurrency=round(capacity.max_concurrency, 2),
        checkpoint_gib=round(checkpoint_gib, 2),
        host_ram_needed_gib=round(host_needed, 1),
        host_ram_gib=host_ram,
        swap_needed_gib=round(swap_needed, 1) if swap_needed is not None else None,
        disk_gib=round(checkpoint_gib + INSTALL_DISK_GIB + COMPILE_CACHE_DISK_GIB, 1),
        price_usd_per_hour=price.usd_per_hour if price else None,
        price_source=f"{price.source} ({price.date})" if price else None,
        decode_tokens_per_s=decode_tokens_per_s,
        usd_per_million_output_tokens=round(usd_per_m, 3) if usd_per_m is not None else None,
        vllm_args=args,
    )


def plan_all(
    *,
    models: list[str] | None = None,
    encodings: list[str] | None = None,
    gpus: list[str] | None = None,
    instance: str | None = None,
    platform: Literal["ec2", "sagemaker"] = "ec2",
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    decode_tokens_per_s: float | None = None,
    language_model_only: bool = False,
    vllm_version: str | None = None,
) -> PlanTable:
    """Every model × encoding × GPU asked for (all of the catalog by default).

    Without ``instance`` each GPU is planned on the cheapest single-GPU instance of
    ``platform`` that carries it, so host RAM and price are real terms of every row.
    """
    from gemmaserve.catalog import resolve_instance

    catalog = load_catalog()
    chosen_models = [resolve_model(name) for name in models] if models else list(catalog.models.values())
    targets: list[tuple[Gpu, Instance | None]]
    if instance is not None:
        inst = resolve_instance(instance)
        targets = [(resolve_gpu(inst.gpu), inst)]
    else:
        chosen_gpus = [resolve_gpu(name) for name in gpus] if gpus else list(catalog.gpus.values())
        targets = [(gpu, smallest_instance(gpu, platform)) for gpu in chosen_gpus]
    rows: list[PlanRow] = []
    for model in chosen_models:
        checkpoints = (
            [resolve_encoding(model, name) for name in encodings] if encodings else list(model.encodings.values())
        )
        for checkpoint in checkpoints:
            for gpu, target_instance in targets:
                if max_model_len > model.geometry.max_position_embeddings:
                    continue
                rows.append(
                    plan_deployment(
                        model, checkpoint, gpu, instance=target_instance, max_model_len=max_model_len,
                        gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=max_num_batched_tokens, decode_tokens_per_s=decode_tokens_per_s,
                        language_model_only=language_model_only, vllm_version=vllm_version,
                    )
                )
    return PlanTable(rows=rows, price_date=catalog.price_date)
