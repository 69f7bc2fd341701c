"""The KV allocator model against vLLM's arithmetic and the published engine logs."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.capacity import (
    GIB,
    blocks_per_request,
    group_layers,
    kv_capacity,
    kv_specs,
    unify_page_size,
)
from gemmaserve.catalog import Geometry, load_catalog


def _geometry(**overrides: object) -> Geometry:
    base: dict[str, object] = dict(
        num_hidden_layers=35, layer_pattern="SSSSF", sliding_window=512, num_attention_heads=8,
        sliding_kv_heads=1, full_kv_heads=1, sliding_head_dim=256, full_head_dim=512,
        num_kv_shared_layers=20, hidden_size=1536, intermediate_size=6144, vocab_size=262144,
        per_layer_input_size=256, max_position_embeddings=131072, source="test",
    )
    base.update(overrides)
    return Geometry(**base)  # type: ignore[arg-type]


def test_kv_shared_layers_own_no_cache() -> None:
    specs = kv_specs(_geometry())
    assert {s.layer_type: s.num_layers for s in specs} == {"sliding": 12, "full": 3}
    no_sharing = kv_specs(_geometry(num_kv_shared_layers=0))
    assert {s.layer_type: s.num_layers for s in no_sharing} == {"sliding": 28, "full": 7}


def test_page_sizes_are_unified_by_scaling_the_smaller_block() -> None:
    unified = unify_page_size(kv_specs(_geometry()), dtype_bytes=2)
    by_type = {s.layer_type: s for s in unified}
    assert by_type["full"].block_size == 16
    assert by_type["sliding"].block_size == 32  # head 256 pages are half a head-512 page
    assert len({s.page_bytes(2) for s in unified}) == 1
    assert by_type["full"].page_bytes(2) == 16 * 2 * 1 * 512 * 2


def test_k_eq_v_layers_still_cache_k_and_v_in_vllm() -> None:
    geometry = _geometry(full_attention_k_eq_v=True, num_kv_shared_layers=0, sliding_kv_heads=8, full_kv_heads=2)
    by_type = {s.layer_type: s for s in kv_specs(geometry)}
    assert by_type["full"].tensors_per_layer == 2
    assert by_type["full"].page_bytes(2) == 16 * 2 * 2 * 512 * 2
    assert by_type["sliding"].page_bytes(2) == 16 * 2 * 8 * 256 * 2


@pytest.mark.parametrize(
    ("counts", "expected_group_size", "expected_groups"),
    [((12, 3), 3, (4, 1)), ((28, 7), 7, (4, 1)), ((6, 5), 6, (1, 1)), ((5, 4), 4, (2, 1)), ((25, 5), 5, (5, 1)), ((20, 4), 4, (5, 1))],
)
def test_group_size_follows_vllm(counts: tuple[int, int], expected_group_size: int,
                                 expected_groups: tuple[int, int]) -> None:
    layers = counts[0] + counts[1]
    # Build a pattern with exactly counts[1] full layers among `layers`.
    pattern = "".join("F" if i < counts[1] else "S" for i in range(layers))[::-1]
    layout = group_layers(kv_specs(_geometry(num_hidden_layers=layers, layer_pattern=pattern, num_kv_shared_layers=0)), 2)
    assert layout.group_size == expected_group_size
    assert layout.groups_per_spec == expected_groups


def test_sliding_layers_need_only_the_window_per_request() -> None:
    layout = group_layers(kv_specs(_geometry()), 2)
    # full: 8192/16 = 512 blocks; each of 4 sliding groups: ceil((511+2048)/32)+1 = 81.
    assert blocks_per_request(layout, 8192, 2048) == 512 + 4 * 81
    # A context shorter than the window costs sliding layers only the context.
    assert blocks_per_request(layout, 256, 2048) == 16 + 4 * (8 + 1)


@pytest.mark.parametrize(
    ("encoding", "weights_gib", "tokens", "concurrency"),
    [("bf16", 9.75, 723_484, 88.32), ("qat-w4a16", 8.01, 867_999, 105.96)],
)
def test_plan_reproduces_the_published_l4_engine_logs(encoding: str, weights_gib: float, tokens: int,
                                                      concurrency: float) -> None:
    from gemmaserve.plan import plan_deployment

    row = plan_deployment("gemma-4-e2b", encoding, "l4", max_model_len=8192, gpu_memory_utilization=0.9)
    assert row.weights_gib == weights_gib
    assert row.kv_cache_tokens == pytest.approx(tokens, rel=1e-3)
    assert row.max_concurrency == pytest.approx(concurrency, abs=0.02)


def test_reported_tokens_are_concurrency_times_context() -> None:
    capacity = kv_capacity(6.76 * GIB, _geometry(), dtype_bytes=2, max_model_len=8192, max_num_batched_tokens=2048)
    assert capacity.kv_cache_tokens == int(capacity.max_concurrency * 8192)
    # The old log line undercounts hybrid models: it spreads blocks over every group.
    assert capacity.legacy_reported_tokens < capacity.kv_cache_tokens


@pytest.mark.parametrize("model_key", sorted(load_catalog().models))
def test_more_memory_never_means_fewer_tokens(model_key: str) -> None:
    geometry = load_catalog().models[model_key].geometry
    previous = -1
    for budget_gib in [0, 0.5, 1, 2, 4, 8, 16, 32, 64]:
        capacity = kv_capacity(budget_gib * GIB, geometry, dtype_bytes=2, max_model_len=8192,
                               max_num_batched_tokens=2048)
        assert capacity.kv_cache_tokens >= previous
        previous = capacity.kv_cache_tokens
    zero = kv_capacity(0, geometry, dtype_bytes=2, max_model_len=8192, max_num_batched_tokens=2048)
    assert zero.num_blocks == 0 and zero.max_concurrency == 0


@pytest.mark.parametrize(("context", "batched"), list(itertools.product([512, 4096, 8192, 32768], [512, 2048, 8192])))
def test_longer_context_never_raises_concurrency(context: int, batched: int) -> None:
    geometry = _geometry()
    short = kv_capacity(8 * GIB, geometry, dtype_bytes=2, max_model_len=context, max_num_batched_tokens=batched)
    long = kv_capacity(8 * GIB, geometry, dtype_bytes=2, max_model_len=context * 2, max_num_batched_tokens=batched)
    assert long.max_concurrency <= short.max_concurrency
