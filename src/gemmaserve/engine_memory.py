"""What vLLM subtracts from its budget before the KV pool, term by term (pure: no I/O).

Up to 0.33 vLLM profiles before it sizes the pool
(``v1/worker/gpu_worker.py`` ``determine_available_memory``)::

    available = utilisation × total − weights − peak activation − non-torch − CUDA-graph estimate

and 0.34 sizes its extensible KV cache after warmup and graph capture
(``v1/worker/extensible_kv_cache.py`` ``measure_kv_cache_bytes``), which subtracts the
same terms with the graphs measured rather than estimated. Each term here comes from
the model's parts, not from a fit:

- **weights**: the checkpoint's parts (towers left out with ``--language-model-only``,
  the tied ``lm_head`` never loaded) plus the rotary caches vLLM builds for
  ``max_position_embeddings``; a published ``Model loading took`` figure when one exists.
- **peak activation**: the largest of the profiling forward pass at
  ``max_num_batched_tokens``, the sampler's dummy batch of ``min(max_num_seqs,
  max_num_batched_tokens)`` rows of 262,144 logits, and, with towers, the encoder's
  profile on the largest item (a 32-frame video), on top of the MoE workspace that
  stays allocated; on a start that compiles (every fresh container) vLLM 0.26 counts a
  larger peak, measured on a real engine.
- **non-torch** memory and **CUDA graphs**: measured on a real engine (see
  ``benchmarks/plan_gpu_memory_runs.json``); the graph pool by capture size and by model
  runner, counted before sizing only where the release's runner estimates it.

Terms that rest on an assumption rather than on source or measurement are named in
:attr:`EngineMemory.estimated_terms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from gemmaserve.catalog import Checkpoint, Geometry, Gpu
from gemmaserve.request_model import ServingSettings
from gemmaserve.tensor_parallel import bytes_removed_per_rank, rank_geometry
from gemmaserve.vllm_releases import VllmRelease

GIB = 1024**3
TOWER_PARTS = ("audio_tower", "vision_tower")
# 12B (``Gemma4UnifiedForConditionalGeneration``) has no towers: linear embedders project raw patches
# and waveform frames, built whatever --language-model-only says (models/gemma4_unified.py:263-288 in
# 0.26.0, :271-288 in 0.34.0: no _mark_tower_model), so they are never left out of the weights.
EMBEDDER_PARTS = ("audio_embedder", "vision_embedder")
MULTIMODAL_PARTS = TOWER_PARTS + EMBEDDER_PARTS
LM_HEAD_PART = "lm_head"
BF16 = 2

# vLLM's defaults (engine/arg_utils.py get_batch_defaults): GPUs of 70 GiB and more that are
# not A100s get the large defaults; 0.28+ gives 160 GiB and more 16,384 batched tokens.
SMALL_GPU_BATCHED, SMALL_GPU_SEQS = 2048, 256
LARGE_GPU_SEQS = 1024
LARGE_GPU_MIN_GIB = 70.0
HUGE_GPU_BATCHED = 16384

# Gemma 4's largest multimodal item, a video (model_executor/models/gemma4_mm.py:91-92,266):
# 32 frames × (70 soft tokens + boi + eoi + ~6 timestamp tokens) = 2,496 tokens. Prefix-LM
# models (use_bidirectional_attention "vision") raise a default max_num_batched_tokens to it.
VIDEO_FRAMES = 32
VIDEO_SOFT_TOKENS_PER_FRAME = 70
VIDEO_TOKENS_PER_ITEM = VIDEO_FRAMES * (VIDEO_SOFT_TOKENS_PER_FRAME + 2 + 6)
VISION_POOLING = 3  # gemma4_vision pooling_kernel_size: 3 × 3 patches per soft token

# Measured on a real vLLM 0.26.0 (H200): non-torch memory 0.22 GiB in every start. The CUDA-graph
# pool of E2B (35 layers) at 4, 64, 256 and 1,024 sequences (4, 19, 51, 51 capture sizes; 3, 11, 35, 51
# of them full decode graphs) logged 0.09, 0.23, 0.53 and 0.59 GiB
# (benchmarks/results/plan_gpu_h200_2026-12-03/graphs and speed): a fixed part and a part per captured
# graph, solved by least squares (each start within 0.004 GiB). Held out: E4B, 0.64 GiB logged.
NON_TORCH_GIB = 0.22
GRAPH_POOL_FIXED_GIB = 0.0548
GRAPH_PER_PIECEWISE_SIZE_GIB = 0.00690
GRAPH_PER_FULL_SIZE_GIB = 0.00358
E2B_LAYERS = 35
# The pool follows the runner, not the model: the same E2B start on one H100 took 0.59 GiB on Model Runner V2
# and 0.45 on V1, and 26B A4B (the MoE, V1 by default in 0.26) took 0.40 on V1 and 0.51 on V2, which the V2
# figure above predicts at 0.51 (benchmarks/results/plan_gpu_h100_2026-12-06, predicted before they ran).
# V1's share of the V2 pool is E2B's; held out: 26B A4B on V1 (0.39 planned, 0.40 logged) and 31B on V1 (0.74,
# 0.67 on an H200: results/plan_gpu_h200_2026-12-06; its V2 pool was 0.97 planned, 0.86 logged). The gap is
# close to V1's own first-capture figure (138 MiB E2B, 100 MiB 26B A4B), as if V2 held one more set of the
# largest capture's activations; which line holds it is not traced.
GRAPH_V1_SHARE_OF_V2 = 0.45 / 0.59
# V1 sizes with its own estimate, not its pool: per mode, the first capture plus (n - 1) times the second
# (gpu_model_runner.py:6657-6686 in 0.26.0). One graph's cost, read off cudaMemGetInfo in 2 MiB steps, stands
# for every smaller one, so the estimate strays from the pool by a step or so a graph: 0.43 against 0.45 GiB
# for E2B, 0.49 against 0.40 for 26B A4B, 0.76 against 0.67 for 31B (under 1 MiB a graph each). The low end of
# a V1 row takes 2 MiB a graph more off.
GRAPH_V1_SAMPLE_STEP_GIB = 2 / 1024

# What the model leaves out and a real engine holds anyway (non-torch memory and workspaces that vary by
# GPU, driver and library): over every real start and published log in docs/plan.md's table (H200 and
# L4), the plan's KV budget exceeded the engine's by at most 0.174 GiB (E4B qat-w4a16 on an L4), and the
# L4's remainders (0.05-0.17 GiB) lie in the H200's range (-0.02-0.17 GiB). Each row shows the pool with
# this much less as its low end; tests/unit/plan/test_plan_uncertainty.py keeps it above every remainder.
UNEXPLAINED_GIB = 0.18
GPUS_WITH_REAL_STARTS = ("h200", "l4")

Runner = Literal["v1", "v2"]


class EngineMemory(BaseModel):
    """The terms of one start, in GiB, as vLLM 0.26's own breakdown names them."""

    vllm_series: str
    runner: Runner
    max_num_seqs: int
    max_num_batched_tokens: int
    batched_tokens_raised_for_video: bool
    requested_gib: float
    weights_gib: float
    weights_source: Literal["published", "parts"]
    non_torch_gib: float
    forward_peak_gib: float
    moe_workspace_gib: float
    sampler_peak_gib: float
    encoder_peak_gib: float
    compile_peak_gib: float
    peak_activation_gib: float
    peak_activation_warm_gib: float
    cudagraph_gib: float
    cudagraph_counted: bool
    cudagraph_estimate_spread_gib: float = 0.0  # V1: how far the estimate it sizes with may stand from its pool
    headroom_withheld_gib: float = 0.0  # 0.34: what its free-memory margin keeps back beyond the request
    kv_budget_gib: float
    kv_budget_warm_gib: float
    estimated_terms: list[str]
    tensor_parallel_size: int = 1  # every term above is one rank's


def runner_for(geometry: Geometry, release: VllmRelease) -> Runner:
    """Model Runner V2 for dense models in every supported release, and for MoE from 0.29."""
    return "v1" if geometry.num_experts and not release.v2_runner_for_moe else "v2"


def default_batch(gpu: Gpu, release: VllmRelease) -> tuple[int, int]:
    """vLLM's ``max_num_batched_tokens`` and ``max_num_seqs`` defaults for ``vllm serve`` on ``gpu``."""
    device_gib = gpu.memory_mib / 1024
    if release.huge_gpu_gib is not None and device_gib >= release.huge_gpu_gib:
        return HUGE_GPU_BATCHED, LARGE_GPU_SEQS
    if device_gib >= LARGE_GPU_MIN_GIB and "a100" not in gpu.name.lower():
        return release.large_gpu_batched_tokens, LARGE_GPU_SEQS
    return SMALL_GPU_BATCHED, SMALL_GPU_SEQS


def resolve_batch(
    geometry: Geometry,
    gpu: Gpu,
    release: VllmRelease,
    settings: ServingSettings,
) -> tuple[int, int, bool]:
    """``(max_num_batched_tokens, max_num_seqs, raised)`` as ``_set_default_max_num_seqs_and_batched_tokens_args`` sets them."""
    default_batched, default_seqs = default_batch(gpu, release)
    seqs = settings.max_num_seqs or default_seqs
    raised = False
    if settings.max_num_batched_tokens is None:
        batched = default_batched
        if (
            (not settings.language_model_only or not release.language_model_only_clears_prefix_lm)
            and geometry.use_bidirectional_attention == "vision"
            and VIDEO_TOKENS_PER_ITEM > batched
        ):
            batched, raised = VIDEO_TOKENS_PER_ITEM, True
        batched = min(seqs * settings.max_model_len, batched)
    else:
        batched = settings.max_num_batched_tokens
    if settings.max_num_seqs is None:
        seqs = min(seqs, batched)
    return batched, seqs, raised


def tower_bytes(checkpoint: Checkpoint) -> int:
    return sum(size for name, size in checkpoint.parts_bytes.items() if name in TOWER_PARTS)


def is_multimodal(checkpoint: Checkpoint) -> bool:
    """Whether the checkpoint loads as one of Google's multimodal classes (towers or embedders)."""
    return any(part in checkpoint.parts_bytes for part in MULTIMODAL_PARTS)


def rotary_cache_bytes(geometry: Geometry, dtype_bytes: int = BF16) -> int:
    """cos/sin caches for every position (rotary_embedding/base.py:59-63, in the model dtype);
    Gemma 4's full layers rotate over the whole head (gemma4_rope.py:44-50)."""
    return geometry.max_position_embeddings * (geometry.sliding_head_dim + geometry.full_head_dim) * dtype_bytes


def weights_gib(
    checkpoint: Checkpoint, geometry: Geometry, *, language_model_only: bool
) -> tuple[float, Literal["published", "parts"]]:
    """What vLLM logs as ``Model loading took``."""
    towers = tower_bytes(checkpoint) if language_model_only else 0
    if checkpoint.calibration:
        return checkpoint.calibration[0].weights_gib - towers / GIB, "published"
    loaded = (
        sum(
            size
            for name, size in checkpoint.parts_bytes.items()
            if name != LM_HEAD_PART  # tied: models/gemma4.py skips lm_head when tie_word_embeddings
        )
        - towers
    )
    return (loaded + rotary_cache_bytes(geometry)) / GIB, "parts"


def forward_peak_bytes(geometry: Geometry, tokens: int) -> int:
    """Transient tensors of the profiling forward pass at ``tokens`` (bf16): the widest dense
    MLP's gate/up output and its activation, the per-layer inputs (looked up and projected,
    kept for every layer) and a few hidden-size buffers."""
    mlp = geometry.intermediate_size * (2 if geometry.use_double_wide_mlp else 1)
    per_layer = 2 * geometry.num_hidden_layers * geometry.per_layer_input_size
    return tokens * BF16 * (3 * mlp + per_layer + 4 * geometry.hidden_size)


def moe_workspace_bytes(geometry: Geometry, tokens: int) -> int:
    """The fused-MoE workspace for ``tokens`` × top-k (gate/up, activation and expert outputs,
    bf16). It lives in vLLM's persistent workspace manager (``v1/worker/workspace.py``, used by
    ``fused_moe/modular_kernel.py``), so it is still held while the sampler runs."""
    return tokens * geometry.experts_per_token * (3 * geometry.moe_intermediate_size + geometry.hidden_size) * BF16


def sampler_peak_bytes(geometry: Geometry, rows: int, runner: Runner) -> int:
    """The dummy sampler batch of ``rows`` × vocabulary logits. Gemma 4's final-logit soft-capping
    holds two bf16 copies (``layers/logits_processor.py``: ``logits / cap``, ``tanh``); V2 then
    samples in place with Triton (``v1/worker/gpu/sample``). V1 keeps the bf16 logits, makes a
    float32 copy (``v1/sample/sampler.py:96``), applies top-k/top-p in place (Triton, 8 rows or
    more), then a float32 softmax and float32 exponential noise (``topk_topp_sampler.py``)."""
    per_logit = 2 * BF16 if runner == "v2" else BF16 + 4 + 4 + 4
    return rows * geometry.vocab_size * per_logit


def encoder_peak_bytes(geometry: Geometry, max_num_batched_tokens: int) -> int:
    """The encoder profile on the largest item (a 32-frame video).

    Through a vision tower, every patch of every item is in flight at once. 12B's encoder-free
    embedder runs one frame at a time (``gemma4_unified.py`` ``_process_video_input``), so what the
    profile holds is the items' pixels (one projected patch per soft token) and their embeddings,
    kept per frame and then concatenated."""
    items = max(1, max_num_batched_tokens // VIDEO_TOKENS_PER_ITEM)
    soft_tokens = VIDEO_FRAMES * VIDEO_SOFT_TOKENS_PER_FRAME
    if geometry.vision_hidden_size:
        per_patch = 5 * geometry.vision_hidden_size + 2 * geometry.vision_intermediate_size
        return items * soft_tokens * VISION_POOLING**2 * per_patch * BF16
    if geometry.vision_patch_dim:
        return items * soft_tokens * (geometry.vision_patch_dim + 2 * geometry.hidden_size) * BF16
    return 0


def embeddings_in_compiled_graph(checkpoint: Checkpoint, *, language_model_only: bool) -> bool:
    """Whether the compiled ``Gemma4Model`` looks up the token and per-layer embeddings itself: yes for
    ``Gemma4ForCausalLM`` (text-only exports: no towers) and under ``--language-model-only``; no for
    Google's multimodal ``Gemma4ForConditionalGeneration``, whose ``embed_input_ids`` runs them eagerly
    before the graph (rule ``embeddings_outside_graph`` in :mod:`gemmaserve.vllm_releases`), nor for
    12B's ``Gemma4UnifiedForConditionalGeneration``, which inherits that path."""
    return language_model_only or not is_multimodal(checkpoint)


def compile_peak_bytes(geometry: Geometry, tokens: int, release: VllmRelease, tensor_parallel_size: int = 1) -> int:
    """The peak a start that compiles counts in vLLM 0.26 (measured on an H200): a copy of the
    largest embedding table the compiled graph reads (E2B/E4B: the per-layer-embedding table;
    26B A4B/31B: the token embedding) and the outputs of its lookups at ``tokens``. Measured:
    E2B 4.55 GiB at 2,048 tokens and 4.75 at 8,192 (0.23 warm), E4B 5.46, 31B 2.79.
    The published 0.28 (T4) and 0.30 (L4) first starts leave no room for it: 0.26 only. Under tensor
    parallelism a rank's table is its vocabulary-parallel shard (an estimate: measured on one GPU only)."""
    if release.series != "0.26":
        return 0
    per_layer_width = geometry.num_hidden_layers * geometry.per_layer_input_size
    table = geometry.vocab_size * max(geometry.hidden_size, per_layer_width) * BF16 // tensor_parallel_size
    lookups = tokens * BF16 * (geometry.hidden_size + 2 * per_layer_width)
    return table + lookups


CUDAGRAPH_MAX_CAPTURE = 512  # the cap on every GPU in the catalog (1,024 only on SM100 from 0.28)


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, release: VllmRelease) -> list[int]:
    """The batch sizes vLLM captures CUDA graphs for when none are set (``config/vllm.py``
    ``_set_cudagraph_sizes``, rule ``capture_sizes``): 1, 2, 4, then every 8 up to 248 and every 16
    from 256, up to ``min(2 × max_num_seqs, 512, max_num_batched_tokens)``; plus the batched-token
    count when it is within that, and from 0.31 ``max_num_seqs`` itself when it falls between steps."""
    largest = min(max_num_seqs * 2, CUDAGRAPH_MAX_CAPTURE, max_num_batched_tokens)
    sizes = [size for size in (1, 2, 4) if size <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    if release.capture_max_num_seqs and max_num_seqs <= sizes[-1] and max_num_seqs not in sizes:
        sizes.append(max_num_seqs)
    return sorted(sizes)


def full_graph_count(sizes: list[int], max_num_seqs: int) -> int:
    """The full decode graphs of FULL_AND_PIECEWISE (the default mode): one per size up to ``max_num_seqs``."""
    return sum(1 for size in sizes if size <= max_num_seqs)


def cudagraph_bytes(geometry: Geometry, sizes: list[int], max_num_seqs: int, runner: Runner) -> int:
    """The CUDA-graph pool for the capture ``sizes``: a fixed part, one piecewise graph set per size and
    one full decode graph per size up to ``max_num_seqs``, the per-size parts scaled by layer count (one
    piece per attention layer); on Model Runner V1, its measured share of that."""
    per_size = GRAPH_PER_PIECEWISE_SIZE_GIB * len(sizes) + GRAPH_PER_FULL_SIZE_GIB * full_graph_count(
        sizes, max_num_seqs
    )
    pool = GRAPH_POOL_FIXED_GIB + per_size * geometry.num_hidden_layers / E2B_LAYERS
    return int(pool * (GRAPH_V1_SHARE_OF_V2 if runner == "v1" else 1.0) * GIB)


def cudagraph_estimate_spread_gib(sizes: list[int], max_num_seqs: int, runner: Runner) -> float:
    """How far V1's own estimate, which it sizes with, may stand from its pool: 2 MiB for each graph after the
    first of each mode. Model Runner V2 counts nothing up to 0.28; from 0.29 it captures its piecewise graphs
    whole and samples only the full ones (``cudagraph_utils.py:712-830`` in 0.29.0, 2 MiB a graph in every
    start here), which this leaves out."""
    if runner != "v1":
        return 0.0
    return GRAPH_V1_SAMPLE_STEP_GIB * (len(sizes) - 1 + max(full_graph_count(sizes, max_num_seqs) - 1, 0))


EXTENSIBLE_MARGIN_FLOOR_GIB = 1.0  # v1/worker/extensible_kv_cache.py:64 (KV_CACHE_MARGIN_FLOOR_BYTES on CUDA)
EXTENSIBLE_MARGIN_FRACTION = 0.75  # :65 (KV_CACHE_MARGIN_FRACTION)


def withheld_by_headroom_margin(gpu: Gpu, release: VllmRelease, requested_gib: float, peak_gib: float) -> float:
    """vLLM 0.34's extensible KV cache takes the smaller of the request and the free memory less a margin
    of ``max(1 GiB, 0.75 × transient peak)`` (``extensible_kv_cache.py:613-617``), before it takes the peak
    itself: near a utilisation of 1 (and when left unset, which means all of it) the margin binds. Returns
    how much the margin keeps back beyond the request (0 where the request binds). The CUDA context, which
    also stands outside the free memory, is not counted."""
    if release.sizing != "after-warmup":
        return 0.0
    margin = max(EXTENSIBLE_MARGIN_FLOOR_GIB, EXTENSIBLE_MARGIN_FRACTION * peak_gib)
    return max(0.0, requested_gib - (gpu.visible_memory_gib - margin))


@dataclass(frozen=True, slots=True)
class Placement:
    """What one start puts where: ``checkpoint`` of the model of ``geometry`` on ``gpu`` (or split over
    ``tensor_parallel_size`` of them), following ``release``'s memory arithmetic."""

    geometry: Geometry
    checkpoint: Checkpoint
    gpu: Gpu
    release: VllmRelease
    tensor_parallel_size: int = 1


def engine_memory(
    placement: Placement,
    settings: ServingSettings,
    *,
    first_start: bool = True,
) -> EngineMemory:
    """Every term vLLM subtracts before the KV pool, for one start of ``checkpoint`` on ``gpu`` (on one of
    ``tensor_parallel_size`` ranks: :mod:`gemmaserve.tensor_parallel` says what each rank holds)."""
    whole, checkpoint, gpu, release = placement.geometry, placement.checkpoint, placement.gpu, placement.release
    tensor_parallel_size, language_model_only = placement.tensor_parallel_size, settings.language_model_only
    estimated: list[str] = []
    geometry = rank_geometry(whole, tensor_parallel_size)
    runner = runner_for(geometry, release)
    batched, seqs, raised = resolve_batch(geometry, gpu, release, settings)
    weights, weights_source = weights_gib(checkpoint, whole, language_model_only=language_model_only)
    weights -= bytes_removed_per_rank(whole, checkpoint, tensor_parallel_size) / GIB
    if weights_source == "parts" and "derived" in checkpoint.source:
        estimated.append("weights (checkpoint parts derived from the geometry)")
    workspace = moe_workspace_bytes(geometry, batched) / GIB
    forward = forward_peak_bytes(geometry, batched) / GIB
    sampler = sampler_peak_bytes(geometry, min(seqs, batched), runner) / GIB
    profiles_encoder = runner == "v1" or release.v2_profiles_encoder
    encoder = 0.0 if language_model_only or not profiles_encoder else encoder_peak_bytes(geometry, batched) / GIB
    if encoder:
        estimated.append(
            "encoder profile (vision tower activations on a 32-frame video)"
            if geometry.vision_hidden_size
            else "encoder profile (the embedder's pixels and embeddings for a 32-frame video)"
        )
    warm_peak = workspace + max(forward, sampler, encoder)
    compile_peak = 0.0
    if embeddings_in_compiled_graph(checkpoint, language_model_only=language_model_only):
        compile_peak = compile_peak_bytes(whole, batched, release, tensor_parallel_size) / GIB
    cold_peak = max(warm_peak, compile_peak)
    peak = cold_peak if first_start else warm_peak
    if first_start and compile_peak:
        estimated.append("compile peak (measured on an H200 only)")
    counted = release.sizing == "after-warmup" or (release.v2_profiles_cudagraphs if runner == "v2" else True)
    sizes = cudagraph_capture_sizes(seqs, batched, release)
    graphs = cudagraph_bytes(geometry, sizes, seqs, runner) / GIB
    graph_spread = cudagraph_estimate_spread_gib(sizes, seqs, runner) if counted else 0.0
    if counted and geometry.num_hidden_layers != E2B_LAYERS:
        estimated.append("CUDA-graph memory (E2B's measured pool per captured size, scaled by layer count)")
    if graph_spread:
        estimated.append(
            f"CUDA-graph memory (Model Runner V1 sizes with one sampled graph times the count: up to "
            f"{graph_spread:.2f} GiB from its pool)"
        )
    if gpu.key not in GPUS_WITH_REAL_STARTS:
        estimated.append(
            f"non-torch memory and workspaces (no real start on a {gpu.key.upper()}; H200 and L4 starts agree)"
        )
    if tensor_parallel_size > 1:
        estimated.append(
            "per rank: CUDA graphs, non-torch memory and the compile peak's table shard as on one GPU "
            "(no multi-GPU start measured)"
        )
    requested = gpu.visible_memory_gib * settings.gpu_memory_utilization
    fixed = weights + NON_TORCH_GIB + (graphs if counted else 0.0)
    withheld = withheld_by_headroom_margin(gpu, release, requested, peak)
    withheld_warm = withheld_by_headroom_margin(gpu, release, requested, warm_peak)
    return EngineMemory(
        vllm_series=release.series,
        runner=runner,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        batched_tokens_raised_for_video=raised,
        requested_gib=requested,
        weights_gib=weights,
        weights_source=weights_source,
        non_torch_gib=NON_TORCH_GIB,
        forward_peak_gib=forward,
        moe_workspace_gib=workspace,
        sampler_peak_gib=sampler,
        encoder_peak_gib=encoder,
        compile_peak_gib=compile_peak if first_start else 0.0,
        peak_activation_gib=peak,
        peak_activation_warm_gib=warm_peak,
        cudagraph_gib=graphs,
        cudagraph_counted=counted,
        cudagraph_estimate_spread_gib=graph_spread,
        headroom_withheld_gib=withheld,
        kv_budget_gib=requested - fixed - peak - withheld,
        kv_budget_warm_gib=requested - fixed - warm_peak - withheld_warm,
        estimated_terms=estimated,
        tensor_parallel_size=tensor_parallel_size,
    )
