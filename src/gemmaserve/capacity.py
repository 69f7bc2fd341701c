"""vLLM's KV allocator for Gemma 4, release by release, as its V1 engine does it (pure: no I/O).

Given the bytes vLLM reports as ``Available KV cache memory``, it returns what the log
prints next (``GPU KV cache size: N tokens``, ``Maximum concurrency …: X``). The rules
and the file and line each was read from are in :mod:`gemmaserve.vllm_releases`:

1. Layers that own a KV cache (the last ``num_kv_shared_layers`` own none) get one spec
   per attention type. Full layers take the cache block size (16 up to 0.33, 64 in
   0.34); sliding layers choose their own (the smallest Triton kernel block, 16, up to
   0.33; in 0.34 the largest that divides the primary block, i.e. the same 64).
2. Page sizes are unified to the largest page by scaling the block size of the
   smaller specs (``unify_kv_cache_spec_page_size``).
3. Layers are split into groups of one size: the largest type's layer count when it is
   below 1.5 × the smallest, else the smallest (``_get_kv_cache_groups_uniform_page_size``);
   each of ``group_size`` pools is shared by one layer of every group, so
   ``num_blocks = available // page // group_size``.
4. One request of ``max_model_len`` needs, in every group, ``ceil(len / block)`` blocks
   for full layers and ``ceil(min(window − 1 + in-flight, len) / block) + 1`` for sliding
   layers, where in-flight = concurrent batches (2 with async scheduling, the default) ×
   ``max_num_batched_tokens``. Concurrency = ``num_blocks`` / the sum over groups; the
   logged token count is ``int(concurrency × max_model_len)``.
5. From 0.29 the check that one request fits keeps back BlockPool's null block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemmaserve.catalog import Geometry
from gemmaserve.vllm_releases import RELEASES, VllmRelease

GIB = 1024**3
TRITON_KERNEL_BLOCK = 16  # TRITON_ATTN get_supported_kernel_block_sizes: [MultipleOf(16)]


@dataclass(frozen=True, slots=True)
class KvSpec:
    """One attention type's KV cache layout in vLLM's terms."""

    layer_type: str
    num_layers: int
    kv_heads: int
    head_dim: int
    block_size: int
    window: int | None

    def bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.kv_heads * self.head_dim * dtype_bytes  # K and V

    def page_bytes(self, dtype_bytes: int) -> int:
        return self.block_size * self.bytes_per_token(dtype_bytes)


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
    def row_bytes(self) -> int:
        """Memory one block index costs across all ``group_size`` pools."""
        return self.page_bytes * self.group_size


@dataclass(frozen=True, slots=True)
class KvCapacity:
    num_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    blocks_per_request: int
    fits_one_request: bool
    row_bytes: int


def kv_specs(geometry: Geometry, release: VllmRelease, dtype_bytes: int = 2) -> list[KvSpec]:
    """Per-type KV specs of the layers that own a cache, with each type's own block size."""
    owning = geometry.layer_types()[: geometry.num_hidden_layers - geometry.num_kv_shared_layers]
    specs: list[KvSpec] = []
    sliding = owning.count("sliding")
    full = owning.count("full")
    if sliding:
        # 0.34 picks the largest kernel block within the sliding page budget (its per-token
        # bytes × the primary block) that divides the primary block: the primary block itself.
        block = release.block_size if release.sliding_block == "primary-block" else TRITON_KERNEL_BLOCK
        specs.append(
            KvSpec(
                "sliding", sliding, geometry.sliding_kv_heads, geometry.sliding_head_dim, block, geometry.sliding_window
            )
        )
    if full:
        # K=V full layers still cache both tensors: vLLM's gemma4.py loads the K weights
        # into the V slot too, so their spec (and memory) is an ordinary K+V one.
        specs.append(KvSpec("full", full, geometry.full_kv_heads, geometry.full_head_dim, release.block_size, None))
    return specs


def unify_page_size(specs: list[KvSpec], dtype_bytes: int) -> list[KvSpec]:
    """Scale smaller specs' block size so every spec has the largest page size, as vLLM does."""
    largest = max(spec.page_bytes(dtype_bytes) for spec in specs)
    unified: list[KvSpec] = []
    for spec in specs:
        page = spec.page_bytes(dtype_bytes)
        if largest % page:
            raise ValueError(f"page size {page} does not divide {largest}; this planner does not pad pages")
        unified.append(
            KvSpec(
                spec.layer_type,
                spec.num_layers,
                spec.kv_heads,
                spec.head_dim,
                spec.block_size * (largest // page),
                spec.window,
            )
        )
    return unified


def group_layers(specs: list[KvSpec], dtype_bytes: int, release: VllmRelease) -> KvLayout:
    """Split each type's layers into groups of one common size (vLLM's uniform-page-size path)."""
    unified = unify_page_size(specs, dtype_bytes)
    counts = [spec.num_layers for spec in unified]
    min_layers, max_layers = min(counts), max(counts)
    group_size = max_layers if max_layers < min_layers * release.group_padding_threshold else min_layers
    groups = tuple(math.ceil(count / group_size) for count in counts)
    return KvLayout(tuple(unified), group_size, groups, unified[0].page_bytes(dtype_bytes))


def in_flight_tokens(release: VllmRelease, max_num_batched_tokens: int) -> int:
    return release.concurrent_batches * max_num_batched_tokens


def blocks_per_request(layout: KvLayout, max_model_len: int, in_flight: int) -> int:
    """Blocks one request of ``max_model_len`` tokens needs, summed over groups."""
    total = 0
    for spec, groups in zip(layout.specs, layout.groups_per_spec, strict=True):
        if spec.window is None:
            per_group = math.ceil(max_model_len / spec.block_size)
        else:
            tokens = min(spec.window - 1 + in_flight, max_model_len)
            per_group = math.ceil(tokens / spec.block_size) + 1
        total += per_group * groups
    return total


def kv_layout(geometry: Geometry, release: VllmRelease, dtype_bytes: int = 2) -> KvLayout:
    return group_layers(kv_specs(geometry, release, dtype_bytes), dtype_bytes, release)


def kv_capacity(
    budget_bytes: float,
    geometry: Geometry,
    *,
    max_model_len: int,
    max_num_batched_tokens: int,
    release: VllmRelease | None = None,
    dtype_bytes: int = 2,
) -> KvCapacity:
    """What vLLM's log reports for a KV budget: tokens and maximum concurrency."""
    rules = release or RELEASES["0.26"]
    layout = kv_layout(geometry, rules, dtype_bytes)
    num_blocks = max(0, int(budget_bytes // layout.row_bytes))
    per_request = blocks_per_request(layout, max_model_len, in_flight_tokens(rules, max_num_batched_tokens))
    concurrency = num_blocks / per_request
    usable = num_blocks - (1 if rules.null_block_in_fit_check else 0)
    return KvCapacity(
        num_blocks=num_blocks,
        kv_cache_tokens=int(concurrency * max_model_len),
        max_concurrency=concurrency,
        blocks_per_request=per_request,
        fits_one_request=usable >= per_request,
        row_bytes=layout.row_bytes,
    )


def longest_context_that_fits(
    budget_bytes: float,
    geometry: Geometry,
    *,
    max_num_batched_tokens: int,
    release: VllmRelease,
    dtype_bytes: int = 2,
    upper: int | None = None,
) -> int:
    """The largest ``max_model_len`` one request of which fits the pool (0 if none), as
    vLLM's ``estimate_max_model_len`` searches it."""
    high = upper or geometry.max_position_embeddings
    low, best = 1, 0
    while low <= high:
        mid = (low + high) // 2
        capacity = kv_capacity(
            budget_bytes,
            geometry,
            max_model_len=mid,
            max_num_batched_tokens=max_num_batched_tokens,
            release=release,
            dtype_bytes=dtype_bytes,
        )
        if capacity.fits_one_request:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best
