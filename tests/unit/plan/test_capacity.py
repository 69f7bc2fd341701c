"""vLLM's KV allocator, release by release, against the rules read from each release's source."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.capacity import (
    GIB,
    blocks_per_request,
    group_layers,
    kv_capacity,
    kv_layout,
    kv_specs,
    longest_context_that_fits,
    unify_page_size,
)
from gemmaserve.catalog import Geometry, load_catalog
from gemmaserve.vllm_releases import RELEASES, resolve_release

V026 = RELEASES["0.26"]
V030 = RELEASES["0.30"]
V034 = RELEASES["0.34"]


def _geometry(**overrides: object) -> Geometry:
    base: dict[str, object] = {
        "num_hidden_layers": 35,
        "layer_pattern": "SSSSF",
        "sliding_window": 512,
        "num_attention_heads": 8,
        "sliding_kv_heads": 1,
        "full_kv_heads": 1,
        "sliding_head_dim": 256,
        "full_head_dim": 512,
        "num_kv_shared_layers": 20,
        "hidden_size": 1536,
        "intermediate_size": 6144,
        "vocab_size": 262144,
        "per_layer_input_size": 256,
        "max_position_embeddings": 131072,
        "source": "test",
    }
    base.update(overrides)
    return Geometry(**base)  # type: ignore[arg-type]


def test_the_real_026_engine_run_comes_out_of_its_own_available_memory() -> None:
    # vLLM 0.26.0, H200, E2B text-only bf16, max_model_len 8192, 2,048 batched tokens:
    # "Available KV cache memory: 112.19 GiB" -> "GPU KV cache size: 9,192,646 tokens", 1122.15x
    # (../shared/gpu-vllm-kit/README.md; /metrics num_gpu_blocks=1225387).
    e2b = load_catalog().models["gemma-4-e2b"].geometry
    capacity = kv_capacity(112.19 * GIB, e2b, max_model_len=8192, max_num_batched_tokens=2048, release=V026)
    assert capacity.kv_cache_tokens == pytest.approx(9_192_646, rel=1e-4)
    assert capacity.max_concurrency == pytest.approx(1122.15, abs=0.05)
    assert capacity.num_blocks == pytest.approx(1_225_387, rel=1e-4)
    assert capacity.blocks_per_request == 1092


def test_kv_shared_layers_own_no_cache() -> None:
    specs = kv_specs(_geometry(), V026)
    assert {s.layer_type: s.num_layers for s in specs} == {"sliding": 12, "full": 3}
    no_sharing = kv_specs(_geometry(num_kv_shared_layers=0), V026)
    assert {s.layer_type: s.num_layers for s in no_sharing} == {"sliding": 28, "full": 7}


def test_page_sizes_are_unified_by_scaling_the_smaller_block() -> None:
    unified = unify_page_size(kv_specs(_geometry(), V026), dtype_bytes=2)
    by_type = {s.layer_type: s for s in unified}
    assert by_type["full"].block_size == 16
    assert by_type["sliding"].block_size == 32  # head 256 pages are half a head-512 page
    assert len({s.page_bytes(2) for s in unified}) == 1
    assert by_type["full"].page_bytes(2) == 16 * 2 * 1 * 512 * 2


def test_034_uses_64_token_blocks_and_sliding_layers_choose_the_primary_block() -> None:
    by_type = {s.layer_type: s for s in kv_specs(_geometry(), V034)}
    assert by_type["full"].block_size == 64 and by_type["sliding"].block_size == 64
    unified = {s.layer_type: s for s in unify_page_size(list(by_type.values()), 2)}
    assert unified["sliding"].block_size == 128
    # Bigger blocks: fewer, larger blocks per request.
    layout = kv_layout(_geometry(), V034)
    assert blocks_per_request(layout, 8192, 2 * 2048) == 8192 // 64 + 4 * ((511 + 4096 + 127) // 128 + 1)


def test_k_eq_v_layers_still_cache_k_and_v_in_vllm() -> None:
    geometry = _geometry(full_attention_k_eq_v=True, num_kv_shared_layers=0, sliding_kv_heads=8, full_kv_heads=2)
    by_type = {s.layer_type: s for s in kv_specs(geometry, V026)}
    assert by_type["full"].page_bytes(2) == 16 * 2 * 2 * 512 * 2
    assert by_type["sliding"].page_bytes(2) == 16 * 2 * 8 * 256 * 2
    # The sliding page is the larger one here: the full layers' block grows instead.
    unified = {s.layer_type: s for s in unify_page_size(list(by_type.values()), 2)}
    assert unified["full"].block_size == 32 and unified["sliding"].block_size == 16


@pytest.mark.parametrize(
    ("counts", "expected_group_size", "expected_groups"),
    [
        ((12, 3), 3, (4, 1)),
        ((28, 7), 7, (4, 1)),
        ((6, 5), 6, (1, 1)),
        ((5, 4), 5, (1, 1)),
        ((7, 5), 7, (1, 1)),
        ((8, 5), 5, (2, 1)),
        ((25, 5), 5, (5, 1)),
        ((20, 4), 4, (5, 1)),
    ],
)
def test_groups_pad_to_the_larger_count_below_one_and_a_half(
    counts: tuple[int, int], expected_group_size: int, expected_groups: tuple[int, int]
) -> None:
    layers = counts[0] + counts[1]
    pattern = "".join("F" if i < counts[1] else "S" for i in range(layers))[::-1]
    geometry = _geometry(num_hidden_layers=layers, layer_pattern=pattern, num_kv_shared_layers=0)
    layout = group_layers(kv_specs(geometry, V026), 2, V026)
    assert layout.group_size == expected_group_size
    assert layout.groups_per_spec == expected_groups


def test_sliding_layers_reserve_the_window_plus_two_batches_in_flight() -> None:
    layout = kv_layout(_geometry(), V026)
    # full: 8192/16 = 512 blocks; each of 4 sliding groups: ceil((511 + 2 × 2048)/32) + 1 = 145.
    assert blocks_per_request(layout, 8192, 2 * 2048) == 512 + 4 * 145
    # A context shorter than the window and the batches costs sliding layers only the context.
    assert blocks_per_request(layout, 256, 2 * 2048) == 16 + 4 * (8 + 1)
    capacity = kv_capacity(8 * GIB, _geometry(), max_model_len=8192, max_num_batched_tokens=2048, release=V026)
    assert capacity.blocks_per_request == 512 + 4 * 145


def test_reported_tokens_are_concurrency_times_context() -> None:
    capacity = kv_capacity(6.76 * GIB, _geometry(), max_model_len=8192, max_num_batched_tokens=2048, release=V030)
    assert capacity.kv_cache_tokens == int(capacity.max_concurrency * 8192)


def test_from_029_the_fit_check_keeps_back_the_null_block() -> None:
    layout = kv_layout(_geometry(), V030)
    exactly_one = layout.row_bytes * 1092
    assert kv_capacity(
        exactly_one, _geometry(), max_model_len=8192, max_num_batched_tokens=2048, release=V026
    ).fits_one_request
    assert not kv_capacity(
        exactly_one, _geometry(), max_model_len=8192, max_num_batched_tokens=2048, release=V030
    ).fits_one_request


@pytest.mark.parametrize("series", sorted(RELEASES))
def test_the_longest_context_that_fits_does_fit_and_one_more_token_does_not(series: str) -> None:
    release = RELEASES[series]
    geometry = load_catalog().models["gemma-4-e4b"].geometry
    budget = 1.3 * GIB
    longest = longest_context_that_fits(budget, geometry, max_num_batched_tokens=2048, release=release)
    assert 16 < longest < geometry.max_position_embeddings
    assert kv_capacity(
        budget, geometry, max_model_len=longest, max_num_batched_tokens=2048, release=release
    ).fits_one_request
    assert not kv_capacity(
        budget, geometry, max_model_len=longest + 1, max_num_batched_tokens=2048, release=release
    ).fits_one_request


@pytest.mark.parametrize(
    ("model_key", "series"), list(itertools.product(sorted(load_catalog().models), ["0.26", "0.34"]))
)
def test_more_memory_never_means_fewer_tokens(model_key: str, series: str) -> None:
    geometry = load_catalog().models[model_key].geometry
    previous = -1
    for budget_gib in [0, 0.5, 1, 2, 4, 8, 16, 32, 64]:
        capacity = kv_capacity(
            budget_gib * GIB, geometry, max_model_len=8192, max_num_batched_tokens=2048, release=RELEASES[series]
        )
        assert capacity.kv_cache_tokens >= previous
        previous = capacity.kv_cache_tokens
    zero = kv_capacity(0, geometry, max_model_len=8192, max_num_batched_tokens=2048, release=RELEASES[series])
    assert zero.num_blocks == 0 and zero.max_concurrency == 0


@pytest.mark.parametrize(("context", "batched"), list(itertools.product([512, 4096, 8192, 32768], [512, 2048, 8192])))
def test_longer_context_never_raises_concurrency(context: int, batched: int) -> None:
    geometry = _geometry()
    short = kv_capacity(8 * GIB, geometry, max_model_len=context, max_num_batched_tokens=batched, release=V026)
    long = kv_capacity(8 * GIB, geometry, max_model_len=context * 2, max_num_batched_tokens=batched, release=V026)
    assert long.max_concurrency <= short.max_concurrency


def test_versions_resolve_to_their_series_and_others_are_refused() -> None:
    from gemmaserve.errors import UsageError

    assert resolve_release("0.30.0").series == "0.30"
    assert resolve_release("v0.34.1").block_size == 64
    assert resolve_release(None).series == "0.34"
    for bad in ("0.25.1", "1.0", "latest", "0"):
        with pytest.raises(UsageError):
            resolve_release(bad)


def test_every_rule_names_the_source_it_was_read_from() -> None:
    for release in RELEASES.values():
        for key in (
            "sliding_reservation",
            "in_flight",
            "grouping",
            "page_unification",
            "tokens",
            "block_size",
            "sliding_block",
            "budget",
            "batch_defaults",
        ):
            assert release.sources[key].startswith(f"vllm {release.version}: "), (release.series, key)
            assert ".py:" in release.sources[key], (release.series, key)


@pytest.mark.parametrize(
    ("seqs", "batched", "series", "count", "largest"),
    [
        (1024, 8192, "0.26", 51, 512),  # H100/H200 defaults
        (256, 2048, "0.30", 51, 512),
        (128, 2048, "0.30", 35, 256),
        (100, 2048, "0.30", 28, 200),
        (100, 2048, "0.31", 29, 200),  # 0.31 adds max_num_seqs between steps
        (4, 2048, "0.30", 4, 8),
        (64, 100, "0.30", 16, 100),  # the batched tokens cap it and join the list
    ],
)
def test_cuda_graph_capture_sizes_follow_vllms_rule(
    seqs: int, batched: int, series: str, count: int, largest: int
) -> None:
    from gemmaserve.engine_memory import cudagraph_capture_sizes
    from gemmaserve.vllm_releases import RELEASES

    sizes = cudagraph_capture_sizes(seqs, batched, RELEASES[series])
    assert len(sizes) == count and sizes[-1] == largest and sizes == sorted(set(sizes))
