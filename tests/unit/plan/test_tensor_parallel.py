"""One rank of a model split over N GPUs, replayed from vLLM's own sharding rules (read in every supported
release's wheel, 0.26.0 – 0.34.0; file:line in ``gemmaserve.tensor_parallel.SOURCES``).

The expected figures are worked out here from the rules as the source states them, not from the module:
``config/model.py`` ``get_num_kv_heads`` = ``max(1, total_kv_heads // tp)`` (0.26.0:1339, 0.34.0:1703);
``gemma4.py`` splits attention heads and the MLP by tp (0.26.0:391-398, 228-235) and replicates the
per-layer-input gate and projection (0.26.0:674-683); ``VocabParallelEmbedding`` pads the vocabulary to 64
and divides it (``vocab_parallel_embedding.py`` 0.26.0:32,261,302); the logits are all-gathered to every
rank (``logits_processor.py`` 0.26.0:57,93); the engine keeps the smallest rank's block count and logs that
config's tokens (``kv_cache_utils.py`` 0.26.0:2152-2177; ``kv_cache_planning.py`` 0.34.0:1683-1697).
"""

from __future__ import annotations

import pytest

from gemmaserve.capacity import GIB, kv_capacity
from gemmaserve.catalog import load_catalog
from gemmaserve.engine_memory import Placement, engine_memory, rotary_cache_bytes, weights_gib
from gemmaserve.errors import UsageError
from gemmaserve.plan import PlanRequest, next_command, plan, plan_deployment
from gemmaserve.request_model import ServingSettings
from gemmaserve.sagemaker.spec.requests import PreflightRequest
from gemmaserve.serve.requests import StartRequest
from gemmaserve.speed import body_parameters
from gemmaserve.tensor_parallel import (
    SOURCES,
    custom_all_reduce_mib,
    kv_bytes_per_token_per_rank,
    rank_geometry,
    unsupported_reason,
    vocab_rows_per_rank,
)
from gemmaserve.vllm_releases import RELEASES, resolve_release

SIZES = (1, 2, 4, 8)
TEXT_ONLY = ServingSettings(language_model_only=True)
# (sliding, full) KV heads a rank caches at N = 1, 2, 4, 8: max(1, total // N) on the catalog's heads
# (E2B 1 / 1, 26B A4B 8 / 2, 31B 16 / 4).
KV_HEADS = {
    "gemma-4-e2b": [(1, 1), (1, 1), (1, 1), (1, 1)],
    "gemma-4-26b-a4b": [(8, 2), (4, 1), (2, 1), (1, 1)],
    "gemma-4-31b": [(16, 4), (8, 2), (4, 1), (2, 1)],
}
MODELS = tuple(KV_HEADS)


def _geometry(model: str):  # type: ignore[no-untyped-def]
    return load_catalog().models[model].geometry


@pytest.mark.parametrize("series", list(RELEASES))
def test_every_supported_release_cites_every_rule_the_first_one_does(series: str) -> None:
    version = RELEASES[series].version
    assert version in SOURCES, f"vLLM {version}: its sharding rules were not read"
    assert set(SOURCES[version]) == set(SOURCES["0.26.0"])
    for rule, citation in SOURCES[version].items():
        path, _, rest = citation.partition(":")
        assert path.endswith(".py") and rest[:1].isdigit(), f"{version} {rule}: no file:line in {citation!r}"


@pytest.mark.parametrize(
    ("version", "mib"),
    # 0.26.0 custom_all_reduce.py:178 sizes the IPC buffer max_size (8 MiB); from 0.27.0 (:66,215) it is the
    # largest of the all-reduce, all-gather and reduce-scatter defaults (8, 2, 16 MiB). Plus the 8 MiB
    # metadata block and 8 MiB of rank data either way.
    [("0.26.0", 24), ("0.27.0", 32), ("0.27.1", 32), ("0.29.0", 32), ("0.33.0", 32), ("0.34.0", 32)],
)
def test_the_custom_all_reduce_holds_a_16_mib_ipc_buffer_from_0_27(version: str, mib: int) -> None:
    assert custom_all_reduce_mib(version, 2, fully_connected=False) == mib
    assert custom_all_reduce_mib(version, 8, fully_connected=True) == mib
    assert custom_all_reduce_mib(version, 4, fully_connected=False) == 0
    assert custom_all_reduce_mib(version, 1, fully_connected=True) == 0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("index", range(len(SIZES)))
def test_kv_heads_and_kv_bytes_per_token_on_one_rank(model: str, index: int) -> None:
    n = SIZES[index]
    geometry = _geometry(model)
    assert unsupported_reason(geometry, n) is None  # every catalog model splits over 1, 2, 4 and 8
    rank = rank_geometry(geometry, n)
    sliding, full = KV_HEADS[model][index]
    assert (rank.sliding_kv_heads, rank.full_kv_heads) == (sliding, full)
    assert rank.num_attention_heads * n == geometry.num_attention_heads
    owning = geometry.layer_types()[: geometry.num_hidden_layers - geometry.num_kv_shared_layers]
    expected = owning.count("sliding") * 2 * sliding * 256 * 2 + owning.count("full") * 2 * full * 512 * 2
    assert kv_bytes_per_token_per_rank(geometry, n) == expected


def test_e2b_replicates_its_one_kv_head_so_a_rank_holds_what_one_gpu_does() -> None:
    geometry = _geometry("gemma-4-e2b")
    budget = 6 * GIB
    one = kv_capacity(budget, geometry, max_model_len=8192, max_num_batched_tokens=2048)
    for n in SIZES[1:]:
        split = kv_capacity(budget, rank_geometry(geometry, n), max_model_len=8192, max_num_batched_tokens=2048)
        assert split.kv_cache_tokens == one.kv_cache_tokens


@pytest.mark.parametrize("version", ["0.26", "0.34"])
def test_31b_halves_its_kv_heads_at_two_so_a_rank_logs_twice_the_tokens_for_the_same_budget(version: str) -> None:
    release = resolve_release(version)
    geometry = _geometry("gemma-4-31b")
    one = kv_capacity(10 * GIB, geometry, max_model_len=8192, max_num_batched_tokens=2048, release=release)
    two = kv_capacity(10 * GIB, rank_geometry(geometry, 2), max_model_len=8192, max_num_batched_tokens=2048,
                      release=release)  # fmt: skip
    assert two.row_bytes * 2 == one.row_bytes
    assert two.blocks_per_request == one.blocks_per_request  # the scheduler's blocks are token counts
    assert two.num_blocks in (2 * one.num_blocks, 2 * one.num_blocks + 1)
    assert two.kv_cache_tokens == int(two.num_blocks / two.blocks_per_request * 8192)


def test_the_logged_pool_is_one_ranks_not_n_times_it() -> None:
    row = plan_deployment("31b", "bf16", "l40s", tensor_parallel_size=2, vllm="0.26")
    assert row.memory is not None
    rank_pool = kv_capacity(row.memory.kv_budget_gib * GIB, rank_geometry(_geometry("gemma-4-31b"), 2),
                            max_model_len=8192, max_num_batched_tokens=row.max_num_batched_tokens,
                            release=resolve_release("0.26"))  # fmt: skip
    assert row.kv_cache_tokens == rank_pool.kv_cache_tokens


def test_a_ranks_weights_are_its_shards_plus_what_every_rank_holds_whole() -> None:
    model = load_catalog().models["gemma-4-31b"]
    geometry, checkpoint = model.geometry, model.encodings["bf16"]
    body = checkpoint.parts_bytes["transformer_body"]
    vocab = checkpoint.parts_bytes["vocab_embedding"]
    rotary = rotary_cache_bytes(geometry)
    assert weights_gib(checkpoint, geometry, language_model_only=True)[0] * GIB == pytest.approx(body + vocab + rotary)
    gpu = load_catalog().gpus["l40s"]
    release = resolve_release("0.26")

    def rank_weights(n: int) -> float:
        memory = engine_memory(Placement(geometry, checkpoint, gpu, release, n), TEXT_ONLY)
        return memory.weights_gib * GIB

    # N = 2 and 4: every head count divides, nothing in 31B's body is replicated; the rotary caches are whole.
    for n in (2, 4):
        assert vocab_rows_per_rank(geometry.vocab_size, n) * n == geometry.vocab_size  # 262,144 pads to itself
        assert rank_weights(n) == pytest.approx((body + vocab) / n + rotary, rel=1e-12)
    # N = 8: each rank keeps one of the 4 full-attention KV heads where an even split would give it half of one:
    # the K (= V) projection of 10 full layers, hidden × 512 each, is half again per rank.
    full_layers = geometry.layer_types().count("full")
    excess = body * full_layers * geometry.hidden_size * 512 * (1 - 4 / 8) / body_parameters(geometry)
    assert rank_weights(8) == pytest.approx((body + vocab) / 8 + rotary + excess, rel=1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_the_gathered_logits_keep_the_sampler_peak_whole_and_the_mlp_activation_splits(model: str) -> None:
    catalog = load_catalog()
    geometry = catalog.models[model].geometry
    checkpoint = catalog.models[model].encodings["bf16"]
    terms = [
        engine_memory(Placement(geometry, checkpoint, catalog.gpus["l40s"], resolve_release("0.34"), n), TEXT_ONLY)
        for n in SIZES
    ]
    assert len({memory.sampler_peak_gib for memory in terms}) == 1
    forward = [memory.forward_peak_gib for memory in terms]
    assert forward == sorted(forward, reverse=True) and forward[-1] < forward[0]


def test_31b_bf16_offers_a_split_row_with_its_next_command() -> None:
    table = plan(PlanRequest(model=["31b"], encoding=["bf16"]))
    split = [row for row in table.rows if row.tensor_parallel_size > 1]
    assert split
    for row in split:
        n = row.tensor_parallel_size
        assert row.vllm_args[-2:] == ["--tensor-parallel-size", str(n)]
        assert row.instance is not None and load_catalog().instances[row.instance].gpu_count >= n
        command = next_command(row)
        assert command.startswith("gemmaserve serve start ") or command.startswith("gemmaserve sagemaker preflight ")
        assert f"--tensor-parallel-size {n}" in command
        # The command the plan names is one the CLI takes: its request model accepts every flag.
        verb = StartRequest if " serve start " in command else PreflightRequest
        options = dict(pair.split(" ", 1) for pair in command.split(" --")[1:])
        settings = verb.model_validate({key.replace("-", "_"): value for key, value in options.items()})
        assert settings.tensor_parallel_size == n
        assert row.speed is not None and any("split over" in term for term in row.speed.unmeasured)
        one = next(r for r in table.rows if r.gpu == row.gpu and r.tensor_parallel_size == 1)
        assert one.verdict == "does-not-fit"
        # The smallest split that fits: half as many GPUs do not (or no instance carries them).
        if n > 2:
            assert plan_deployment("31b", "bf16", row.gpu, tensor_parallel_size=n // 2).verdict == "does-not-fit"
    assert table.next_command is not None and table.cheapest_fit is not None
    cheapest = table.rows[table.cheapest_fit]
    ranked = [r.usd_per_million_output_tokens for r in table.rows if r.fits and r.usd_per_million_output_tokens]
    assert cheapest.usd_per_million_output_tokens == min(ranked)


def test_a_split_reads_less_per_gpu_and_pays_for_its_collectives() -> None:
    table = plan(PlanRequest(model=["31b"], encoding=["bf16"], gpu=["h200"], tensor_parallel_size=2))
    whole = plan(PlanRequest(model=["31b"], encoding=["bf16"], gpu=["h200"]))
    split_row, one_row = table.rows[0], whole.rows[0]
    assert split_row.speed is not None and one_row.speed is not None
    assert split_row.speed.bytes_per_step_gb < one_row.speed.bytes_per_step_gb
    assert split_row.speed.decode_low < split_row.speed.decode_tokens_per_s < split_row.speed.decode_high


def test_a_split_needs_an_instance_with_the_gpus_and_every_planning_command_takes_it() -> None:
    instance = load_catalog().instances["g6.xlarge"]
    with pytest.raises(UsageError, match="cannot hold --tensor-parallel-size 4"):
        plan_deployment("31b", "bf16", instance=instance, tensor_parallel_size=4)
    from gemmaserve.host.doctor import DoctorRequest

    assert DoctorRequest.parse({"tensor_parallel_size": 2}).tensor_parallel_size == 2
    assert PlanRequest.parse({"tensor_parallel_size": "4"}).tensor_parallel_size == 4
    with pytest.raises(UsageError):
        PlanRequest.parse({"tensor_parallel_size": 3})
