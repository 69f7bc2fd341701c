"""vLLM's GPU memory arithmetic for Gemma 4, as its V1 engine does it (pure: no I/O).

The model follows vLLM's own steps rather than a per-token product:

1. KV budget = visible memory × ``gpu_memory_utilization`` − weights − peak
   activation of the profiling run − non-torch memory
   (``Worker.determine_available_memory``).
2. Layers that own a KV cache (KV-shared layers own none) are specified per
   attention type; page sizes are unified to the largest one by scaling the
   block size of the smaller specs (``unify_kv_cache_spec_page_size``).
3. Layers are split into groups of equal size; each of ``group_size`` memory
   pools is shared by one layer of every group, so
   ``num_blocks = budget // page_bytes // group_size``
   (``get_kv_cache_config_from_groups``).
4. ``Maximum concurrency`` divides ``num_blocks`` by the blocks one request of
   ``max_model_len`` needs in every group: full layers hold the whole context,
   sliding layers only ``window − 1 + max_num_batched_tokens`` tokens. The
   log's ``GPU KV cache size: N tokens`` is ``int(concurrency × max_model_len)``
   (``_report_kv_cache_config``; older releases printed
   ``num_blocks // num_groups × min_block_size``, which undercounts hybrid
   models — both are returned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemmaserve.catalog import Geometry

GIB = 1024**3
DEFAULT_BLOCK_SIZE = 16


@dataclass(frozen=True, slots=True)
class KvSpec:
    """One attention type's KV cache layout in vLLM's terms."""

    layer_type: str
    num_layers: int
    kv_heads: int
    head_dim: int
    tensors_per_layer: int  # K and V
    block_size: int
    window: int | None

    def page_bytes(self, dtype_bytes: int) -> int:
        return self.block_size * self.tensors_per_layer * self.kv_heads * self.head_dim * dtype_bytes


@dataclass(frozen=True, slots=True)
class KvLayout:
    specs: tuple[KvSpec, ...]
    group_size: int
    groups_per_spec: tuple[int, ...]
    page_bytes: int

    @property
    def num_groups(self) -> int:
        return sum(self.groups_per_spec)

    @property
    def min_block_size(self) -> int:
        return min(spec.block_size for spec in self.specs)


@dataclass(frozen=True, slots=True)
class KvCapacity:
    num_blocks: int
    kv_cache_tokens: int
    legacy_reported_tokens: int
    max_concurrency: float
    bytes_per_block_row: int  # memory one block index costs across all pools


def kv_specs(geometry: Geometry, *, block_size: int = DEFAULT_BLOCK_SIZE) -> list[KvSpec]:
    """Per-type KV specs of the layers that own a cache (the last ``num_kv_shared_layers`` do not)."""
    owning = geometry.layer_types()[: geometry.num_hidden_layers - geometry.num_kv_shared_layers]
    specs: list[KvSpec] = []
    sliding = owning.count("sliding")
    full = owning.count("full")
    if sliding:
        specs.append(
            KvSpec("sliding", sliding, geometry.sliding_kv_heads, geometry.sliding_head_dim, 2, block_size,
                   geometry.sliding_window)
        )
    if full:
        # K=V full layers still cache both: vLLM's gemma4.py loads the K weights into the
        # V slot too, so the spec (and its memory) is an ordinary K+V one.
        specs.append(KvSpec("full", full, geometry.full_kv_heads, geometry.full_head_dim, 2, block_size, None))
    return specs


def unify_page_size(specs: list[KvSpec], dtype_bytes: int) -> list[KvSpec]:
    """Scale smaller specs' block size so every spec has the largest page size, as vLLM does."""
    largest = max(spec.page_bytes(dtype_bytes) for spec in specs)
    unified: list[KvSpec] = []
    for spec in specs:
        page = spec.page_bytes(dtype_bytes)
        if largest % page:
            raise ValueError(f"page size {page} does not divide {largest}; vLLM cannot unify these layers")
        ratio = largest // page
        unified.append(
            KvSpec(spec.layer_type, spec.num_layers, spec.kv_heads, spec.head_dim, spec.tensors_per_layer,
                   spec.block_size * ratio, spec.window)
        )
    return unified


def group_layers(specs: list[KvSpec], dtype_bytes: int) -> KvLayout:
    """Split each type's layers into groups of one common size (vLLM's uniform-page-size path).

    vLLM takes the smallest layer count as the group size, unless every type's
    count fits in groups of the largest count with less than 25% padding, in
    which case it pads to one group per type.
    """
    unified = unify_page_size(specs, dtype_bytes)
    counts = [spec.num_layers for spec in unified]
    min_layers, max_layers = min(counts), max(counts)
    group_size = max_layers if max_layers < min_layers * 1.25 else min_layers
    groups = tuple(math.ceil(count / group_size) for count in counts)
    return KvLayout(tuple(unified), group_size, groups, unified[0].page_bytes(dtype_bytes))


def blocks_per_request(layout: KvLayout, max_model_len: int, max_num_batched_tokens: int) -> int:
    """Blocks one request of ``max_model_len`` tokens needs, summed over groups."""
    total = 0
    for spec, groups in zip(layout.specs, layout.groups_per_spec, strict=True):
        if spec.window is None:
            per_group = math.ceil(max_model_len / spec.block_size)
        else:
            tokens = min(spec.window - 1 + max_num_batched_tokens, max_model_len)
            per_group = math.ceil(tokens / spec.block_size) + 1
        total += per_group * groups
    return total


def kv_capacity(
    budget_bytes: float,
    geometry: Geometry,
    *,
    dtype_bytes: int,
    max_model_len: int,
    max_num_batched_tokens: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> KvCapacity:
    """What vLLM's log reports for a KV budget: tokens and maximum concurrency."""
    layout = group_layers(kv_specs(geometry, block_size=block_size), dtype_bytes)
    row = layout.page_bytes * layout.group_size
    num_blocks = max(0, int(budget_bytes // row))
    legacy_tokens = num_blocks // layout.num_groups * layout.min_block_size
    per_request = blocks_per_request(layout, max_model_len, max_num_batched_tokens)
    concurrency = num_blocks / per_request
    return KvCapacity(num_blocks, int(concurrency * max_model_len), legacy_tokens, concurrency, row)
