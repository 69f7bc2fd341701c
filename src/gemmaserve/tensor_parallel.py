"""How vLLM splits a Gemma 4 model over the GPUs of one host (``--tensor-parallel-size N``), per rank (pure).

Every rank holds the same shard shape, so one rank's memory decides the KV pool. What is split by ``N``
and what every rank holds whole, as vLLM's own source does it (file:line per release in :data:`SOURCES`,
read in the 0.26.0 and 0.34.0 wheels):

- **attention heads** ``heads / N`` (``N`` must divide them); **KV heads** ``max(1, kv_heads // N)``: replicated
  when ``N`` exceeds them, so each rank still caches (and stores the K/V weights of) one head;
- **dense MLP and experts**: the intermediate width ``/ N`` (column- then row-parallel; ``FusedMoE``
  shards each expert's intermediate the same way); the router and the per-layer-input gate and
  projection are replicated;
- **token and per-layer embeddings**: vocabulary-parallel, the vocabulary padded to a multiple of 64
  then ``/ N``; the tied head reads the same shard;
- **logits**: all-gathered, so every rank holds the full vocabulary for each sampled row (the
  sampler's peak is one GPU's); the vision and audio towers are transformers modules, whole on every rank;
- **communicator buffers** (NCCL, the custom all-reduce) are allocated before vLLM's memory snapshot,
  so they come out of the ``1 − utilisation`` headroom, never out of the KV pool.

The KV pool each rank reports is planned exactly as on one GPU with the rank's KV heads; the engine
takes the smallest block count over ranks (all equal here) and logs ``int(concurrency × max_model_len)``
from it: a rank's tokens, not ``N`` times them.
"""

from __future__ import annotations

import math

from gemmaserve.catalog import Checkpoint, Geometry

TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
VOCAB_PADDING = 64  # model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
MIB = 1024**2
# The custom all-reduce's buffers per rank where it runs (NVLink, or two PCIe GPUs with P2P): the
# metadata block plus ``max_size`` (8 MiB), the IPC buffer, and 8 MiB of rank data; 0.34's IPC buffer
# is the largest of all-reduce, all-gather and reduce-scatter sizes (16 MiB). Outside the KV budget.
CUSTOM_ALL_REDUCE_MIB = {"0.26.0": 8 + 8 + 8, "0.34.0": 8 + 16 + 8}

# file:line of each rule in the two wheels read (``vllm/…``); 0.27 – 0.33 were not re-read for these.
SOURCES: dict[str, dict[str, str]] = {
    "0.26.0": {
        "kv_heads_per_rank": "config/model.py:1339 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:391-398 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1228-1234 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:228-235 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1329 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:284 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:674-683 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:980,993 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1009 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:32,261,302 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:57,93 all-gather (platforms/interface.py:1100)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1047,1063 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2152-2155 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2173-2177 GPU KV cache size from that config's concurrency",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:365-389 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:431 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:59,150,173-185 8 MiB buffers; "
        "off on more than two PCIe-only GPUs",
    },
    "0.34.0": {
        "kv_heads_per_rank": "config/model.py:1703 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:405-412 heads % tp == 0; kv heads replicated below tp",
        "mlp": "model_executor/models/gemma4.py:282 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1398 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:341 GateLinear, replicated",
        "per_layer_inputs": "model_executor/models/gemma4.py:704-713 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:1029,1045 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1061 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:39,294,309 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1293)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1120,1141 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_planning.py:1683-1697 every rank re-planned at the smallest count",
        "logged_tokens": "v1/core/kv_cache_utils.py:1157-1175 update_kv_cache_capacity on the scheduler's config",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:502-549 distributed init before the memory snapshot",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:138,268,296-318 "
        "8 MiB all-reduce, 16 MiB IPC buffer, 8 MiB rank data; off on more than two PCIe-only GPUs",
    },
}


def kv_heads_per_rank(total_kv_heads: int, tensor_parallel_size: int) -> int:
    """KV heads one rank caches: ``max(1, total // N)`` (``get_num_kv_heads``)."""
    return max(1, total_kv_heads // tensor_parallel_size)


def unsupported_reason(geometry: Geometry, tensor_parallel_size: int) -> str | None:
    """Why vLLM refuses ``N`` for this geometry, or None: the attention heads must divide by ``N``, and the
    KV heads must divide by ``N`` or ``N`` by them (``Gemma4Attention`` asserts both)."""
    n = tensor_parallel_size
    if n not in TENSOR_PARALLEL_SIZES:
        return f"--tensor-parallel-size must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))}"
    if geometry.num_attention_heads % n:
        return f"vLLM needs the {geometry.num_attention_heads} attention heads to divide by --tensor-parallel-size {n}"
    for kv in {geometry.sliding_kv_heads, geometry.full_kv_heads}:
        if (kv >= n and kv % n) or (kv < n and n % kv):
            return f"vLLM needs {kv} KV heads and --tensor-parallel-size {n} to divide one another"
    return None


def rank_geometry(geometry: Geometry, tensor_parallel_size: int) -> Geometry:
    """The shape one rank holds: its attention and KV heads and its share of every intermediate width.
    Hidden size, vocabulary (the logits are gathered whole) and per-layer inputs stay whole."""
    n = tensor_parallel_size
    if n == 1:
        return geometry
    return geometry.model_copy(
        update={
            "num_attention_heads": geometry.num_attention_heads // n,
            "sliding_kv_heads": kv_heads_per_rank(geometry.sliding_kv_heads, n),
            "full_kv_heads": kv_heads_per_rank(geometry.full_kv_heads, n),
            "intermediate_size": geometry.intermediate_size // n,
            "moe_intermediate_size": geometry.moe_intermediate_size // n,
        }
    )


def padded_vocab(vocab_size: int) -> int:
    return math.ceil(vocab_size / VOCAB_PADDING) * VOCAB_PADDING


def vocab_rows_per_rank(vocab_size: int, tensor_parallel_size: int) -> int:
    """Rows of a vocabulary-parallel table on one rank: the padded vocabulary over ``N``."""
    return padded_vocab(vocab_size) // tensor_parallel_size


def _attention_parameters(geometry: Geometry, layer: str, tensor_parallel_size: int) -> int:
    """One layer's q/k/v/o parameters on one rank (K only on K = V full layers)."""
    n = tensor_parallel_size
    hidden = geometry.hidden_size
    if layer == "sliding":
        head, kv, k_and_v = geometry.sliding_head_dim, geometry.sliding_kv_heads, 2
    else:
        head, kv = geometry.full_head_dim, geometry.full_kv_heads
        k_and_v = 1 if geometry.full_attention_k_eq_v else 2
    q_and_o = 2 * hidden * (geometry.num_attention_heads // n) * head
    return q_and_o + k_and_v * hidden * kv_heads_per_rank(kv, n) * head


def body_parameters_per_rank(geometry: Geometry, tensor_parallel_size: int) -> int:
    """Transformer-body parameters one rank holds (the same terms as :func:`gemmaserve.speed.body_parameters`,
    which this equals at ``N = 1``)."""
    n = tensor_parallel_size
    total = 0
    shared_from = geometry.num_hidden_layers - geometry.num_kv_shared_layers
    for index, layer in enumerate(geometry.layer_types()):
        wide = 2 if geometry.use_double_wide_mlp and index >= shared_from else 1
        total += _attention_parameters(geometry, layer, n)
        total += 3 * geometry.hidden_size * (geometry.intermediate_size * wide // n)
        total += 2 * geometry.hidden_size * geometry.per_layer_input_size  # replicated
    experts = geometry.num_hidden_layers * geometry.num_experts * 3 * geometry.hidden_size
    experts *= geometry.moe_intermediate_size // n
    router = geometry.num_hidden_layers * geometry.hidden_size * geometry.num_experts  # replicated
    return total + experts + router


VOCAB_PARTS = ("vocab_embedding", "per_layer_embedding")
BODY_PART = "transformer_body"


def bytes_removed_per_rank(geometry: Geometry, checkpoint: Checkpoint, tensor_parallel_size: int) -> float:
    """How many fewer weight bytes a rank holds than one GPU holding the whole model: the body by the
    share of its parameters the rank keeps, the vocabulary-parallel tables by their rows. 0 at ``N = 1``."""
    n = tensor_parallel_size
    if n == 1:
        return 0.0
    body = checkpoint.parts_bytes.get(BODY_PART, 0)
    kept = body_parameters_per_rank(geometry, n) / body_parameters_per_rank(geometry, 1)
    vocab = sum(checkpoint.parts_bytes.get(part, 0) for part in VOCAB_PARTS)
    rows = vocab_rows_per_rank(geometry.vocab_size, n) / geometry.vocab_size
    return body * (1 - kept) + vocab * (1 - rows)


def kv_bytes_per_token_per_rank(geometry: Geometry, tensor_parallel_size: int, dtype_bytes: int = 2) -> int:
    """K and V bytes one token costs on one rank, over the layers that own a cache."""
    owning = geometry.layer_types()[: geometry.num_hidden_layers - geometry.num_kv_shared_layers]
    total = 0
    for layer in owning:
        kv, head = (
            (geometry.sliding_kv_heads, geometry.sliding_head_dim)
            if layer == "sliding"
            else (geometry.full_kv_heads, geometry.full_head_dim)
        )
        total += 2 * kv_heads_per_rank(kv, tensor_parallel_size) * head * dtype_bytes
    return total


def custom_all_reduce_mib(release_version: str, tensor_parallel_size: int, *, fully_connected: bool) -> int:
    """The custom all-reduce's buffers on one rank, or 0 where vLLM turns it off (one GPU; more than two
    GPUs without NVLink between them all)."""
    if tensor_parallel_size == 1 or (tensor_parallel_size > 2 and not fully_connected):
        return 0
    return CUSTOM_ALL_REDUCE_MIB["0.34.0" if release_version >= "0.34" else "0.26.0"]
