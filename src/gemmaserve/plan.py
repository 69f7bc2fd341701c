"""Capacity and cost planning: which Gemma 4 checkpoint fits which GPU, and at what price (pure).

``plan_deployment`` answers for one model × encoding × GPU (and optionally an
instance type, whose host RAM and price then count), for one vLLM release: weights on
the GPU, what vLLM subtracts before its KV pool (:mod:`gemmaserve.engine_memory`), the
KV pool and concurrency it will log (:mod:`gemmaserve.capacity`), host RAM and swap
needed while loading, disk, dtype, whether the Turing clamp is needed, and the first
term that binds, in words. Figures are those of a first start (a fresh container
compiles); the warm figure is given beside it where it differs. ``plan`` builds the full
table for a :class:`PlanRequest` and prices each fitting row from its speeds
(:mod:`gemmaserve.speed`: predicted, or measured with ``--decode-rate`` / ``--from-bench``,
the only I/O besides the packaged catalog). ``docs/plan.md`` compares the plan with recorded
and published engine runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Annotated, Literal, TypedDict, Unpack

from pydantic import BaseModel, Field, model_validator

from gemmaserve.capacity import GIB, KvCapacity, in_flight_tokens, kv_capacity, longest_context_that_fits
from gemmaserve.catalog import (
    Checkpoint,
    Gpu,
    Instance,
    Model,
    load_catalog,
    load_speed_data,
    resolve_encoding,
    resolve_gpu,
    resolve_model,
)
from gemmaserve.cost import usd_per_million_tokens
from gemmaserve.engine_memory import (
    LARGE_GPU_MIN_GIB,
    SMALL_GPU_BATCHED,
    UNEXPLAINED_GIB,
    EngineMemory,
    Placement,
    default_batch,
    engine_memory,
    is_multimodal,
)
from gemmaserve.measurements.schema import ClientSettings
from gemmaserve.measurements.speeds import BenchSpeeds, read_bench_speeds
from gemmaserve.request_model import READS, ActionRequest, Cli, ServingSettings, token_count
from gemmaserve.result_model import ActionResult
from gemmaserve.speed import (
    CONCURRENCY_LEVELS,
    MeasuredSpeed,
    SpeedPrediction,
    SpeedQuestion,
    Workload,
    kv_stream_limit,
    predict,
    predict_from_measured,
)
from gemmaserve.tensor_parallel import (
    TENSOR_PARALLEL_SIZES,
    custom_all_reduce_mib,
    rank_geometry,
    unsupported_reason,
)
from gemmaserve.vllm_releases import (
    DEFAULT_SERIES,
    resolve_release,
    sagemaker_image_series,
)

# Host RAM while vLLM loads: the checkpoint is staged through host memory on top of the
# engine's own resident set. Published: a 7.8 GB host peaked at 6,761 MiB swap (bf16 E2B)
# and 4,770 MiB (QAT), i.e. checkpoint + ~3.8 GiB.
LOAD_BASELINE_HOST_GIB = 3.8
HOST_OS_RESERVE_GIB = 0.5
# A CUDA build of torch + vLLM and its caches in the install environment.
INSTALL_DISK_GIB = 12.0
COMPILE_CACHE_DISK_GIB = 1.0
MIN_MAX_MODEL_LEN = 16

# The workload speeds and $/M are predicted for: bench measure's load defaults, 16 streams.
DEFAULT_CONCURRENCY = 16
DEFAULT_INPUT_TOKENS = ClientSettings.model_fields["load_input_tokens"].default
DEFAULT_OUTPUT_TOKENS = ClientSettings.model_fields["load_output_tokens"].default

Verdict = Literal["fits", "fits-with-swap", "does-not-fit", "not-servable"]
SortKey = Literal["cost", "fit"]


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
    vllm_version: str = DEFAULT_SERIES
    first_start: bool = True
    weights_gib: float
    weights_source: Literal["published", "estimated"]
    engine_overhead_gib: float
    kv_budget_gib: float
    kv_cache_tokens: int
    max_concurrency: float
    kv_cache_tokens_warm: int = 0
    max_concurrency_warm: float = 0.0
    kv_cache_tokens_low: int = 0  # with the largest remainder real starts held beyond the plan
    max_concurrency_low: float = 0.0
    max_model_len_that_fits: int | None = None
    memory: EngineMemory | None = None
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
    concurrency: int = DEFAULT_CONCURRENCY
    output_tokens_per_s: float | None = None  # at ``concurrency`` streams
    usd_per_million_low: float | None = None
    usd_per_million_high: float | None = None
    speed_source: str | None = None  # "predicted", or "measured: <where>"
    speed: SpeedPrediction | None = None
    tensor_parallel_size: int = 1  # GPUs the model is split over; memory and KV figures are one rank's


class PlanTable(ActionResult):
    rows: list[PlanRow]
    concurrency: int = DEFAULT_CONCURRENCY
    input_tokens: int = DEFAULT_INPUT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    bench_files_unused: list[str] = Field(default_factory=list)
    price_date: str
    vllm_version: str = DEFAULT_SERIES
    sort: SortKey = "fit"
    cheapest_fit: int | None = None  # index into rows
    next_command: str | None = None


def smallest_instance(gpu: Gpu, platform: str = "ec2", gpus: int = 1) -> Instance | None:
    """The cheapest instance of ``platform`` that carries ``gpus`` of ``gpu``: exactly one for a single GPU,
    at least ``gpus`` for a model split over several (the whole instance is paid for)."""
    candidates = [
        inst
        for inst in load_catalog().instances.values()
        if inst.gpu == gpu.key
        and inst.platform == platform
        and (inst.gpu_count == 1 if gpus == 1 else inst.gpu_count >= gpus)
    ]
    return min(candidates, key=lambda inst: (inst.price_usd_per_hour or math.inf, inst.memory_gib), default=None)


def _series_for(vllm_version: str | None, instance: Instance | None) -> str:
    if vllm_version is None and instance is not None and instance.platform == "sagemaker":
        return sagemaker_image_series()
    return resolve_release(vllm_version).series


DEFAULT_SERVING = ServingSettings()  # the request models' own defaults, written once there


def plan_deployment(
    model: str | Model,
    encoding: str | Checkpoint,
    gpu: str | Gpu | None = None,
    *,
    instance: Instance | None = None,
    first_start: bool = True,
    **settings: Unpack[SettingsByName],
) -> PlanRow:
    """:func:`plan_for` called with catalog names and :class:`ServingSettings` fields by keyword
    (``max_model_len=32768, vllm="0.30"``; the rest keep the request model's defaults): a convenience for
    scripts and tests (``benchmarks/``, ``tests/``). The library hands :func:`plan_for` a :class:`PlanTarget` and the
    request's :class:`ServingSettings` instead.

    Raises:
        UnknownName: for names not in the catalog.
        UsageError: for out-of-range numbers, an unsupported vLLM version, or neither GPU nor instance.
    """
    from gemmaserve.errors import UsageError

    model_obj = resolve_model(model) if isinstance(model, str) else model
    checkpoint = resolve_encoding(model_obj, encoding) if isinstance(encoding, str) else encoding
    if instance is not None:
        gpu_obj = resolve_gpu(instance.gpu)
    elif gpu is None:
        raise UsageError("Name a GPU or an instance type.", hint="--gpu t4 or --instance ml.g4dn.xlarge")
    else:
        gpu_obj = resolve_gpu(gpu) if isinstance(gpu, str) else gpu
    # Unchecked here, as a request's would be: plan_for raises UsageError for what is out of range.
    serving = DEFAULT_SERVING.model_copy(update={"tensor_parallel_size": 1, **settings})
    ranks = serving.tensor_parallel_size or 1
    return plan_for(PlanTarget(model_obj, checkpoint, gpu_obj, instance, ranks), serving, first_start)


class SettingsByName(TypedDict, total=False):
    """:class:`ServingSettings`'s fields as :func:`plan_deployment`'s keywords (typed; defaults: the model's)."""

    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    language_model_only: bool
    vllm: str | None
    tensor_parallel_size: int | None


@dataclass(frozen=True, slots=True)
class PlanTarget:
    """Where one row is planned: ``checkpoint`` of ``model`` on ``gpu`` (on ``instance`` when one is named, which
    carries the GPU, host RAM and price), split over ``tensor_parallel_size`` GPUs of one host."""

    model: Model
    checkpoint: Checkpoint
    gpu: Gpu
    instance: Instance | None = None
    tensor_parallel_size: int = 1


def plan_for(target: PlanTarget, settings: ServingSettings, first_start: bool = True) -> PlanRow:
    """Plan one model × encoding on one GPU (or on the GPU of the target's instance), or split over
    ``tensor_parallel_size`` of them on one host (the memory and KV figures are then one rank's).

    ``settings.language_model_only`` plans vLLM's ``--language-model-only``: the vision and audio
    towers are neither loaded nor profiled. ``settings.vllm`` picks the release whose memory
    arithmetic is followed (default: the newest supported, or the SageMaker image's release
    for a SageMaker instance); ``settings.tensor_parallel_size`` is not read (the target says it).
    ``first_start`` plans a start that compiles (a fresh container); the warm figures are returned
    beside it either way.

    Raises:
        UsageError: for out-of-range numbers or an unsupported vLLM version.
    """
    from gemmaserve.errors import UsageError

    model_obj, checkpoint, gpu_obj, instance = target.model, target.checkpoint, target.gpu, target.instance
    max_model_len, gpu_memory_utilization = settings.max_model_len, settings.gpu_memory_utilization
    max_num_batched_tokens, language_model_only = settings.max_num_batched_tokens, settings.language_model_only
    release = resolve_release(_series_for(settings.vllm, instance))
    if not 0.05 <= gpu_memory_utilization <= 0.99:
        raise UsageError(
            f"--gpu-memory-utilization must be between 0.05 and 0.99, got {gpu_memory_utilization}",
            hint="vLLM's default is 0.92 (0.34: unset sizes the pool from measured free memory).",
        )
    if max_model_len < MIN_MAX_MODEL_LEN:
        raise UsageError(f"--max-model-len must be at least {MIN_MAX_MODEL_LEN}, got {max_model_len}")
    geometry = model_obj.geometry
    if max_model_len > geometry.max_position_embeddings:
        raise UsageError(
            f"--max-model-len {max_model_len} exceeds {model_obj.key}'s context of "
            f"{geometry.max_position_embeddings} tokens",
            hint=f"Use --max-model-len {geometry.max_position_embeddings} or less.",
        )

    n = target.tensor_parallel_size
    if n not in TENSOR_PARALLEL_SIZES:
        raise UsageError(f"--tensor-parallel-size must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))}")
    if instance is not None and instance.gpu_count < n:
        raise UsageError(
            f"{instance.key} has {instance.gpu_count} GPU(s): it cannot hold --tensor-parallel-size {n}",
            hint="Name an instance with as many GPUs, or leave --instance out.",
        )
    rank = rank_geometry(geometry, n)
    dtype = gpu_obj.serving_dtype
    notes: list[str] = []
    if not gpu_obj.bf16:
        notes.append(f"{gpu_obj.name} has no bf16 datapath: serve in float16")
    needs_clamp = gpu_obj.pre_ampere and geometry.full_head_dim >= 512

    memory = engine_memory(Placement(geometry, checkpoint, gpu_obj, release, n), settings, first_start=first_start)
    batched, seqs = memory.max_num_batched_tokens, memory.max_num_seqs
    budget_gib = memory.kv_budget_gib

    def pool(gib: float) -> KvCapacity:  # one rank's KV pool of ``gib`` (none below zero)
        return kv_capacity(
            max(0.0, gib) * GIB, rank, max_model_len=max_model_len, max_num_batched_tokens=batched, release=release
        )

    margin_gib = UNEXPLAINED_GIB + memory.cudagraph_estimate_spread_gib
    capacity, warm, low = pool(budget_gib), pool(memory.kv_budget_warm_gib), pool(budget_gib - margin_gib)
    overhead_gib = memory.requested_gib - memory.weights_gib - budget_gib
    if memory.compile_peak_gib > memory.peak_activation_warm_gib:
        notes.append(
            f"a first start compiles and counts a {memory.peak_activation_gib:.2f} GiB peak "
            f"({memory.peak_activation_warm_gib:.2f} GiB once the compile cache is warm: "
            f"{warm.kv_cache_tokens:,} KV tokens)"
        )
    if memory.batched_tokens_raised_for_video:
        notes.append(f"vLLM raises --max-num-batched-tokens to {batched:,} to fit one video")
    large_default = max_num_batched_tokens is None and default_batch(gpu_obj, release)[0] > SMALL_GPU_BATCHED
    if large_default and capacity.kv_cache_tokens:
        small = kv_capacity(
            max(0.0, budget_gib) * GIB,
            geometry,
            max_model_len=max_model_len,
            max_num_batched_tokens=SMALL_GPU_BATCHED,
            release=release,
        )
        notes.append(
            f"vLLM's defaults for a GPU of {LARGE_GPU_MIN_GIB:g} GiB or more: {seqs:,} sequences and {batched:,} "
            f"batched tokens, so each request's sliding layers reserve {in_flight_tokens(release, batched):,} "
            f"in-flight tokens; --max-num-batched-tokens {SMALL_GPU_BATCHED} gives about "
            f"{small.kv_cache_tokens:,} KV tokens"
        )
    if n > 1:
        memory.estimated_terms.append(
            f"host RAM while loading counts the engine's {LOAD_BASELINE_HOST_GIB} GiB once per rank"
        )
    if memory.estimated_terms:
        notes.append("estimated: " + "; ".join(memory.estimated_terms))
    if release.sizing == "after-warmup":
        notes.append(
            "vLLM 0.34 sizes the pool after warmup; leave --gpu-memory-utilization unset to give it all free memory"
        )

    if n > 1:
        fully_connected = gpu_obj.nvlink
        buffers = custom_all_reduce_mib(release.version, n, fully_connected=fully_connected)
        notes.append(
            f"split over {n} GPUs: weights, engine memory and KV tokens are one rank's (vLLM logs one rank's "
            f"pool); NCCL's buffers{f' and the custom all-reduce ({buffers} MiB)' if buffers else ''} come out of "
            f"the {1 - gpu_memory_utilization:.0%} left outside --gpu-memory-utilization, not out of the pool"
        )
        if not buffers:
            notes.append(
                f"vLLM turns its custom all-reduce off on more than two GPUs without NVLink: every all-reduce "
                f"goes through NCCL over {gpu_obj.link}"
            )
    checkpoint_gib = checkpoint.total_bytes / GIB
    # Every rank's worker process has the engine's own resident set while it loads its shard.
    host_needed = checkpoint_gib + LOAD_BASELINE_HOST_GIB * n
    host_ram = instance.memory_gib if instance else None
    swap_needed = max(0.0, host_needed - (host_ram - HOST_OS_RESERVE_GIB)) if host_ram is not None else None

    verdict: Verdict = "fits"
    binding: str | None = None
    longest: int | None = None
    refused = unsupported_reason(geometry, n)
    if not checkpoint.servable_by_vllm:
        verdict, binding = "not-servable", f"{checkpoint.format} is not served by vLLM (use llama.cpp)"
    elif refused:
        verdict, binding = "not-servable", refused
    elif budget_gib <= 0:
        verdict = "does-not-fit"
        binding = (
            f"GPU memory: weights {memory.weights_gib:.2f} GiB + engine {overhead_gib:.2f} GiB exceed "
            f"{gpu_memory_utilization:g} × {gpu_obj.visible_memory_gib} GiB"
        )
    elif not capacity.fits_one_request:
        verdict = "does-not-fit"
        longest = longest_context_that_fits(
            budget_gib * GIB, rank, max_num_batched_tokens=batched, release=release, upper=max_model_len
        )
        binding = f"KV cache: {capacity.kv_cache_tokens:,} tokens cannot hold one {max_model_len:,}-token request"
        if longest >= MIN_MAX_MODEL_LEN:
            binding += f"; lower --max-model-len to {longest:,}"
        else:
            binding += "; no context fits: a smaller model, encoding or --max-num-batched-tokens"
    if verdict == "does-not-fit" and binding and is_multimodal(checkpoint) and not language_model_only:
        text_only = plan_for(
            PlanTarget(model_obj, checkpoint, gpu_obj, None, n),
            settings.model_copy(update={"language_model_only": True, "vllm": release.series}),
            first_start,
        )
        rescued = text_only.fits
    else:
        rescued = False
    if rescued and binding:
        binding += "; --language-model-only (no vision/audio towers) makes it fit"
    if verdict == "fits" and not low.fits_one_request:
        notes.append(
            f"close to the edge: with {margin_gib:.2f} GiB less for the cache (the most real starts held "
            f"beyond the plan), {low.kv_cache_tokens:,} KV tokens cannot hold one {max_model_len:,}-token request"
        )
    if verdict == "fits" and swap_needed:
        verdict = "fits-with-swap"
        binding = (
            f"host RAM: loading needs {host_needed:.1f} GiB, the host has {host_ram:g} GiB; "
            f"add a swapfile of {math.ceil(swap_needed + 1)} GiB"
        )

    price = instance.price if instance else None
    if price and price.estimated:
        notes.append(f"{instance.key if instance else ''} price is an estimate, not a recorded list price")

    args = [
        checkpoint.repo_id,
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        f"{gpu_memory_utilization:g}",
        "--max-num-seqs",
        str(seqs),
    ]
    if max_num_batched_tokens:
        args += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if language_model_only:
        args.append("--language-model-only")
    if n > 1:
        args += ["--tensor-parallel-size", str(n)]
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
        vllm_version=release.series,
        first_start=first_start,
        weights_gib=round(memory.weights_gib, 2),
        weights_source="published" if memory.weights_source == "published" else "estimated",
        engine_overhead_gib=round(overhead_gib, 2),
        kv_budget_gib=round(max(0.0, budget_gib), 2),
        kv_cache_tokens=capacity.kv_cache_tokens,
        max_concurrency=round(capacity.max_concurrency, 2),
        kv_cache_tokens_warm=warm.kv_cache_tokens,
        max_concurrency_warm=round(warm.max_concurrency, 2),
        kv_cache_tokens_low=low.kv_cache_tokens,
        max_concurrency_low=round(low.max_concurrency, 2),
        max_model_len_that_fits=longest,
        memory=memory,
        checkpoint_gib=round(checkpoint_gib, 2),
        host_ram_needed_gib=round(host_needed, 1),
        host_ram_gib=host_ram,
        swap_needed_gib=round(swap_needed, 1) if swap_needed is not None else None,
        disk_gib=round(checkpoint_gib + INSTALL_DISK_GIB + COMPILE_CACHE_DISK_GIB, 1),
        price_usd_per_hour=price.usd_per_hour if price else None,
        price_source=f"{price.source} ({price.date})" if price else None,
        decode_tokens_per_s=None,
        usd_per_million_output_tokens=None,
        vllm_args=args,
        tensor_parallel_size=n,
    )


_VERDICT_ORDER = {"fits": 0, "fits-with-swap": 1, "does-not-fit": 2, "not-servable": 3}


def _sort_key(row: PlanRow, sort: SortKey) -> tuple[object, ...]:
    price = row.usd_per_million_output_tokens
    hourly = row.price_usd_per_hour if row.price_usd_per_hour is not None else math.inf
    if sort == "cost":
        return (price if price is not None else math.inf, hourly, _VERDICT_ORDER[row.verdict], -row.kv_cache_tokens)
    return (_VERDICT_ORDER[row.verdict], hourly, -row.max_concurrency, row.model, row.encoding)


def next_command(row: PlanRow) -> str:
    """The command that deploys ``row``: a SageMaker preflight for ml.* instances, else a local serve (a
    model split over several GPUs with its ``--tensor-parallel-size``)."""
    flags = [
        f"--model {row.model.removeprefix('gemma-4-')}",
        f"--encoding {row.encoding}",
        f"--max-model-len {row.max_model_len}",
    ]
    if row.gpu_memory_utilization != DEFAULT_SERVING.gpu_memory_utilization:
        flags.append(f"--gpu-memory-utilization {row.gpu_memory_utilization:g}")
    if row.language_model_only:
        flags.append("--language-model-only")
    if row.tensor_parallel_size > 1:
        flags.append(f"--tensor-parallel-size {row.tensor_parallel_size}")
    if row.instance and row.instance.startswith("ml."):
        return f"gemmaserve sagemaker preflight {' '.join(flags)} --instance {row.instance}"
    return f"gemmaserve serve start {' '.join(flags)}"


class PlanRequest(ServingSettings, ActionRequest, action="plan", effect=READS):
    """``gemmaserve plan``: which rows of the catalog to plan, and under which serving settings."""

    model: Annotated[list[str] | None, Field(description="Model (e.g. gemma-4-e2b, e2b, 26b-a4b); default all.")] = None
    encoding: Annotated[
        list[str] | None,
        Field(description="Checkpoint encoding: bf16, qat-w4a16, qat-q4_0-unquantized, gguf-q4_0; default all."),
    ] = None
    gpu: Annotated[
        list[str] | None, Field(description="GPU (t4, l4, l40s, a10g, a100-40gb, a100-80gb, h100, h200); default all.")
    ] = None
    instance: Annotated[
        str | None, Field(description="An instance type (ml.g4dn.xlarge, g6.xlarge, …): its GPU, host RAM and price.")
    ] = None
    platform: Annotated[
        Literal["ec2", "sagemaker"], Field(description="Which instances price a GPU when --instance is not given.")
    ] = "ec2"
    warm: Annotated[bool, Field(description="Plan a restart with a warm compile cache (default: a first start).")] = (
        False
    )
    sort: Annotated[
        SortKey, Field(description="Fitting rows first (then $/h), or by $/M output tokens (then $/h).")
    ] = "fit"
    concurrency: Annotated[int, Field(ge=1, description="Streams in flight that speeds and $/M are predicted for.")] = (
        DEFAULT_CONCURRENCY
    )
    input_tokens: Annotated[int, *token_count(ge=1, description="Prompt tokens of a request, for speeds and $/M.")] = (
        DEFAULT_INPUT_TOKENS
    )
    output_tokens: Annotated[int, *token_count(ge=1, description="Output tokens of a request, for speeds and $/M.")] = (
        DEFAULT_OUTPUT_TOKENS
    )
    decode_rate: Annotated[
        float | None,
        Field(
            gt=0,
            description="A measured one-stream decode rate (tokens/s) of the one model, encoding and GPU asked "
            "for: it replaces that row's predicted rate.",
        ),
    ] = None
    from_bench: Annotated[
        str | None,
        Cli(metavar="DIR"),
        Field(
            description="A `bench measure --out` folder: each result that names its --model, --encoding and --gpu "
            "replaces the prediction for that row."
        ),
    ] = None

    @model_validator(mode="after")
    def _one_row_for_a_measured_rate(self) -> PlanRequest:
        if self.decode_rate is None:
            return self
        one_gpu = self.instance is not None or len(self.gpu or []) == 1
        if len(self.model or []) != 1 or len(self.encoding or []) != 1 or not one_gpu:
            raise ValueError(
                "a measured rate belongs to one model, encoding and GPU: name exactly one --model, --encoding "
                "and --gpu (or --instance), or use --from-bench DIR for several"
            )
        return self


def plan(request: PlanRequest) -> PlanTable:
    """Every model × encoding × GPU the request asks for (all of the catalog by default), sorted.

    Without ``instance`` each GPU is planned on the cheapest single-GPU instance of ``platform``
    that carries it, so host RAM and price are real terms of every row. Each fitting row gets its
    predicted speeds (:mod:`gemmaserve.speed`), or measured ones from ``decode_rate`` /
    ``from_bench``, and $/M output tokens at ``concurrency``. ``sort="cost"`` orders by that $/M.

    Raises:
        UnknownName: for names not in the catalog.
        UsageError: for an unsupported vLLM version, or a ``from_bench`` that is no result folder.
    """
    from gemmaserve.catalog import resolve_instance

    catalog = load_catalog()
    vllm_version = request.vllm
    if vllm_version is not None:
        resolve_release(vllm_version)  # bad versions fail before any row
    elif request.platform == "sagemaker" or (request.instance or "").strip().lower().startswith("ml."):
        vllm_version = sagemaker_image_series()
    settings = request.serving().model_copy(update={"vllm": vllm_version})
    bench = read_bench_speeds(request.from_bench) if request.from_bench else BenchSpeeds()
    chosen_models = [resolve_model(name) for name in request.model] if request.model else list(catalog.models.values())
    asked_n = request.tensor_parallel_size
    targets: list[tuple[Gpu, Instance | None]]
    if request.instance is not None:
        inst = resolve_instance(request.instance)
        targets = [(resolve_gpu(inst.gpu), inst)]
    else:
        chosen_gpus = [resolve_gpu(name) for name in request.gpu] if request.gpu else list(catalog.gpus.values())
        targets = [(gpu, smallest_instance(gpu, request.platform, asked_n or 1)) for gpu in chosen_gpus]
    rows: list[PlanRow] = []
    for model in chosen_models:
        checkpoints = (
            [resolve_encoding(model, name) for name in request.encoding]
            if request.encoding
            else list(model.encodings.values())
        )
        for checkpoint in checkpoints:
            for gpu, target_instance in targets:
                if request.max_model_len > model.geometry.max_position_embeddings:
                    continue
                plan_on = partial(_plan_on, PlanTarget(model, checkpoint, gpu), settings, not request.warm)
                planned = [plan_on(target_instance, asked_n or 1)]
                if asked_n is None and planned[0].verdict == "does-not-fit":
                    split = smallest_split_that_fits(gpu, target_instance, request.platform, plan_on)
                    if split is not None:
                        planned.append(split)
                measured = bench.by_row.get((model.key, checkpoint.key, gpu.key))
                if request.decode_rate is not None:
                    measured = MeasuredSpeed(request.decode_rate, {}, "measured: --decode-rate")
                for row in planned:
                    # A rate measured on one GPU says nothing of the same model split over several.
                    rows.append(with_speed(row, request, measured if row.tensor_parallel_size == 1 else None))
    rows.sort(key=lambda row: _sort_key(row, request.sort))
    fitting = [i for i, row in enumerate(rows) if row.fits and row.price_usd_per_hour is not None]
    cheapest = min(fitting, key=lambda i: _sort_key(rows[i], "cost"), default=None)
    series = {row.vllm_version for row in rows}
    return PlanTable(
        rows=rows,
        price_date=catalog.price_date,
        vllm_version=series.pop() if len(series) == 1 else resolve_release(vllm_version).series,
        sort=request.sort,
        cheapest_fit=cheapest,
        next_command=next_command(rows[cheapest]) if cheapest is not None else None,
        concurrency=request.concurrency,
        input_tokens=request.input_tokens,
        output_tokens=request.output_tokens,
        bench_files_unused=bench.unused,
    )


def _plan_on(
    row: PlanTarget, settings: ServingSettings, first_start: bool, instance: Instance | None, n: int
) -> PlanRow:
    """``row`` planned on ``instance`` over ``n`` GPUs (the one-GPU row, then each split tried)."""
    return plan_for(replace(row, instance=instance, tensor_parallel_size=n), settings, first_start)


def smallest_split_that_fits(
    gpu: Gpu, instance: Instance | None, platform: str, plan_on: Callable[[Instance | None, int], PlanRow]
) -> PlanRow | None:
    """Where one GPU does not hold the model: the fewest GPUs of the same kind on one host that do (2, 4, 8),
    on ``instance`` when it has them, else on the cheapest instance of ``platform`` that does."""
    for n in TENSOR_PARALLEL_SIZES[1:]:
        if instance is not None and instance.gpu_count > 1:
            host = instance if instance.gpu_count >= n else None
        else:
            host = smallest_instance(gpu, platform, n)
        if host is None:
            continue
        row = plan_on(host, n)
        if row.fits:
            return row
        if row.verdict == "not-servable":
            return None
    return None


def with_speed(row: PlanRow, request: PlanRequest, measured: MeasuredSpeed | None) -> PlanRow:
    """``row`` with its speeds and $/M at the request's concurrency: predicted, or from ``measured``.
    Rows that do not fit get neither."""
    if not row.fits:
        return row
    catalog = load_catalog()
    model = catalog.models[row.model]
    checkpoint = model.encodings[row.encoding]
    gpu = catalog.gpus[row.gpu]
    data = load_speed_data()
    platform = "sagemaker" if (row.instance or "").startswith("ml.") else "vm"
    workload = Workload(request.input_tokens, request.output_tokens, data.platforms[platform].call_s)
    pool = kv_capacity(
        row.kv_budget_gib * GIB,
        rank_geometry(model.geometry, row.tensor_parallel_size),
        max_model_len=min(row.max_model_len, request.input_tokens + request.output_tokens),
        max_num_batched_tokens=row.max_num_batched_tokens,
        release=resolve_release(row.vllm_version),
    )
    limit = kv_stream_limit(pool.max_concurrency, row.max_num_seqs)
    levels = tuple(sorted({*CONCURRENCY_LEVELS, request.concurrency}))
    question = SpeedQuestion(model.geometry, checkpoint, gpu, workload, levels, limit, row.tensor_parallel_size)
    if measured is None:
        speed = predict(question, data, catalog.gpus)
    else:
        speed = predict_from_measured(question, data, catalog.gpus, measured)
    rate = speed.output_tokens_per_s[request.concurrency]
    price = row.price_usd_per_hour

    def per_million(tokens_per_s: float) -> float | None:
        return round(usd_per_million_tokens(price, tokens_per_s), 3) if price and tokens_per_s > 0 else None

    notes = list(row.notes)
    if speed.effective_concurrency[request.concurrency] < request.concurrency:
        notes.append(
            f"at most {speed.effective_concurrency[request.concurrency]} of {request.concurrency} streams run at once "
            f"(--max-num-seqs {row.max_num_seqs}, or the KV pool at {request.input_tokens + request.output_tokens:,} "
            "tokens a request): the rest wait"
        )
    return row.model_copy(
        update={
            "concurrency": request.concurrency,
            "decode_tokens_per_s": speed.decode_tokens_per_s,
            "output_tokens_per_s": rate,
            "usd_per_million_output_tokens": per_million(rate),
            "usd_per_million_low": per_million(speed.output_high[request.concurrency]),
            "usd_per_million_high": per_million(speed.output_low[request.concurrency]),
            "speed_source": speed.source,
            "speed": speed,
            "notes": notes,
        }
    )
