"""How vLLM splits a Gemma 4 model over the GPUs of one host (``--tensor-parallel-size N``), per rank (pure).

Every rank holds the same shard shape, so one rank's memory decides the KV pool. What is split by ``N``
and what every rank holds whole, as vLLM's own source does it (file:line per release in :data:`SOURCES`,
read in the wheel of every supported release, 0.26.0 – 0.34.0):

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
# metadata block plus ``max_size`` (8 MiB), the IPC buffer, and 8 MiB of rank data. From 0.27.0 the IPC
# buffer is the largest of the all-reduce, all-gather and reduce-scatter sizes (16 MiB: 0.27.0
# custom_all_reduce.py:66,215; 0.26.0:178 sized it ``max_size``). Outside the KV budget.
CUSTOM_ALL_REDUCE_MIB = {"0.26.0": 8 + 8 + 8, "0.27.0": 8 + 16 + 8}

# file:line of each rule in each release's wheel (``vllm/…``), every supported release read; the 0.27 series
# is served as 0.27.1, whose members read here are byte-identical to 0.27.0's (one entry under both names).
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
    "0.27.1": {
        "kv_heads_per_rank": "config/model.py:1430 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:397-404 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1313-1319 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:234-241 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1333 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:290 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:680-689 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:986,999 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1015 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:32,269,310 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:56,92 all-gather (platforms/interface.py:1106)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1060,1076 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2210-2213 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2231-2235 GPU KV cache size from that config's concurrency",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:372-396 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:415 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:74,66,215 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); 208,229 meta and 8 MiB rank data; "
        "179 off on more than two PCIe-only GPUs",
    },
    "0.28.0": {
        "kv_heads_per_rank": "config/model.py:1491 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:396-403 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1365-1371 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:235-242 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1344 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:291 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:660-669 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:966,979 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:995 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:32,269,310 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:90,126 all-gather (platforms/interface.py:1106)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1068,1084 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2213-2216 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:1861-1875 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:383-407 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:450 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:74,66,215 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); 208,229 meta and 8 MiB rank data; "
        "179 off on more than two PCIe-only GPUs",
    },
    "0.29.0": {
        "kv_heads_per_rank": "config/model.py:1537 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:400-407 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1411-1417 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:235-242 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1350 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:291 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:672-681 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:986,1002 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1018 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:33,272,314 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1113)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1087,1104 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2351-2354 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2024-2038 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:416-440 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:522 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:125,117,272 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); "
        "265,286 meta and 8 MiB rank data; "
        "236 off on more than two PCIe-only GPUs",
    },
    "0.30.0": {
        "kv_heads_per_rank": "config/model.py:1550 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:400-407 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1424-1430 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:235-242 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1351 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:291 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:688-697 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:1002,1018 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1034 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:35,284,326 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1128)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1113,1130 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2757-2760 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2386-2402 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:428-452 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:540 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:125,117,272 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); "
        "265,286 meta and 8 MiB rank data; "
        "236 off on more than two PCIe-only GPUs",
    },
    "0.31.0": {
        "kv_heads_per_rank": "config/model.py:1628 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:387-394 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1502-1508 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:267-274 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1323 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:326 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:685-694 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:1010,1026 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1042 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:35,285,300 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1167)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1098,1115 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2815-2818 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2455-2471 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:466-490 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:544 requested = total × utilisation (used memory not subtracted)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:140,130,300 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); "
        "293,314 meta and 8 MiB rank data; "
        "264 off on more than two PCIe-only GPUs",
    },
    "0.32.0": {
        "kv_heads_per_rank": "config/model.py:1670 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:386-393 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1544-1550 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:266-273 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1342 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:325 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:682-691 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:1007,1023 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1039 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:36,289,304 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1269)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1096,1113 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_utils.py:2662-2665 num_blocks = the smallest over ranks",
        "logged_tokens": "v1/core/kv_cache_utils.py:2316-2334 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:505-535 distributed init before the memory snapshot",
        "requested": "v1/worker/utils.py:725 requested = total × utilisation (used memory not subtracted); "
        "728 externally held weights only checked against it",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:141,131,306 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); "
        "299,320 meta and 8 MiB rank data; "
        "270 off on more than two PCIe-only GPUs",
    },
    "0.33.0": {
        "kv_heads_per_rank": "config/model.py:1683 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "attention_heads": "model_executor/models/gemma4.py:386-393 heads % tp == 0; kv heads replicated below tp",
        "heads_divisible": "config/model.py:1557-1563 verify_with_parallel_config: heads % tp == 0",
        "mlp": "model_executor/models/gemma4.py:266-273 MergedColumnParallelLinear gate/up, RowParallelLinear down",
        "experts": "model_executor/layers/fused_moe/config.py:1353 intermediate_size_per_partition = size // tp",
        "router": "model_executor/models/gemma4.py:325 GateLinear, replicated for consistent routing",
        "per_layer_inputs": "model_executor/models/gemma4.py:682-691 per-layer gate and projection ReplicatedLinear",
        "embeddings": "model_executor/models/gemma4.py:1007,1023 VocabParallelEmbedding (token and per-layer)",
        "per_layer_projection": "model_executor/models/gemma4.py:1039 ColumnParallelLinear(gather_output=True)",
        "vocab_padding": "model_executor/layers/vocab_parallel_embedding.py:36,289,304 pad to 64, then / tp",
        "logits_gathered": "model_executor/layers/logits_processor.py:91,130 all-gather (platforms/interface.py:1281)",
        "towers_whole": "model_executor/models/gemma4_mm.py:1102,1122 AutoModel.from_config (not sharded)",
        "min_over_ranks": "v1/core/kv_cache_planning.py:1580-1594 every rank re-planned at the smallest count",
        "logged_tokens": "v1/core/kv_cache_utils.py:1136-1154 update_kv_cache_capacity logs that count's tokens",
        "snapshot_after_nccl": "v1/worker/gpu_worker.py:500-542 distributed init before the memory snapshot; "
        "519-528 cuBLAS handles now also made before it (baseline, like NCCL)",
        "requested": "v1/worker/utils.py:725 requested = total × utilisation (used memory not subtracted); "
        "728 externally held weights only checked against it",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:138,128,303 8 MiB all-reduce, "
        "16 MiB IPC buffer (the largest of the three sizes); "
        "296,317 meta and 8 MiB rank data; "
        "267 off on more than two PCIe-only GPUs",
    },
    "0.34.0": {
        "kv_heads_per_rank": "config/model.py:1703 get_num_kv_heads: max(1, total_kv_heads // tp)",
        "heads_divisible": "config/model.py:1577-1583 verify_with_parallel_config: heads % tp == 0",
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
        "requested": "v1/worker/utils.py:742-743 requested = total × resolved utilisation (1.0 when unset, "
        "with the extensible KV cache)",
        "custom_all_reduce": "distributed/device_communicators/custom_all_reduce.py:138,268,296-318 "
        "8 MiB all-reduce, 16 MiB IPC buffer, 8 MiB rank data; off on more than two PCIe-only GPUs",
    },
}
SOURCES["0.27.0"] = SOURCES["0.27.1"]


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
    major, minor = (int(part) for part in release_version.split(".")[:2])
    return CUSTOM_ALL_REDUCE_MIB["0.27.0" if (major, minor) >= (0, 27) else "0.26.0"]
