"""The plan: verdicts, binding terms, host RAM and swap, prices, and bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gemmaserve.catalog import load_catalog, resolve_instance
from gemmaserve.cli import app
from gemmaserve.errors import UnknownName, UsageError
from gemmaserve.plan import PlanRequest, plan, plan_deployment


def test_turing_serves_fp16_and_needs_the_clamp() -> None:
    row = plan_deployment("e2b", "qat-w4a16", "t4")
    assert row.dtype == "float16"
    assert row.needs_turing_clamp
    assert "--dtype" in row.vllm_args and row.vllm_args[row.vllm_args.index("--dtype") + 1] == "float16"
    l4 = plan_deployment("e2b", "qat-w4a16", "l4")
    assert l4.dtype == "bfloat16" and not l4.needs_turing_clamp


def test_a_small_host_needs_swap_and_says_how_much() -> None:
    # The published failure: a 7.8 GB host with no swap was OOM-killed loading E2B.
    small = resolve_instance("g4dn.xlarge").model_copy(update={"memory_gib": 7.8})
    row = plan_deployment("e2b", "bf16", instance=small)
    assert row.verdict == "fits-with-swap" or row.verdict == "does-not-fit"
    assert row.swap_needed_gib is not None and row.swap_needed_gib > 4
    qat = plan_deployment("e2b", "qat-w4a16", instance=small)
    assert qat.verdict == "fits-with-swap"
    assert qat.binding_term is not None and "swapfile" in qat.binding_term
    assert qat.swap_needed_gib is not None and 0 < qat.swap_needed_gib < row.swap_needed_gib


def test_weights_that_do_not_fit_bind_on_gpu_memory() -> None:
    row = plan_deployment("31b", "bf16", "l4")
    assert row.verdict == "does-not-fit" and not row.fits
    assert row.binding_term is not None and row.binding_term.startswith("GPU memory")
    assert row.kv_cache_tokens == 0


def test_a_context_the_pool_cannot_hold_binds_on_kv_and_names_one_that_fits() -> None:
    row = plan_deployment("31b", "qat-w4a16", "l40s", max_model_len=262144, gpu_memory_utilization=0.9)
    assert row.verdict == "does-not-fit"
    assert row.binding_term is not None and row.binding_term.startswith("KV cache")
    assert row.max_model_len_that_fits is not None
    assert f"lower --max-model-len to {row.max_model_len_that_fits:,}" in row.binding_term
    # The advice is consistent with the plan's own numbers: that context fits, one more token does not.
    advised = plan_deployment("31b", "qat-w4a16", "l40s", max_model_len=row.max_model_len_that_fits)
    assert advised.fits and advised.max_concurrency >= 1
    over = plan_deployment("31b", "qat-w4a16", "l40s", max_model_len=row.max_model_len_that_fits + 1)
    assert not over.fits


def test_a_measured_decode_rate_prices_its_own_row_and_needs_exactly_one() -> None:
    one = {"model": ["e2b"], "encoding": ["qat-w4a16"], "instance": "ml.g4dn.xlarge"}
    predicted = plan(PlanRequest.parse(one)).rows[0]
    assert predicted.speed_source == "predicted" and predicted.usd_per_million_output_tokens is not None
    measured = plan(PlanRequest.parse({**one, "decode_rate": 50.0})).rows[0]
    assert measured.speed_source == "measured: --decode-rate" and measured.decode_tokens_per_s == 50.0
    instance = resolve_instance("ml.g4dn.xlarge")
    assert instance.price_usd_per_hour is not None and measured.output_tokens_per_s is not None
    expected = instance.price_usd_per_hour / (measured.output_tokens_per_s * 3600) * 1e6
    assert measured.usd_per_million_output_tokens == pytest.approx(expected, abs=1e-3)
    with pytest.raises(UsageError, match="one model, encoding and GPU"):
        PlanRequest.parse({"model": ["e2b"], "decode_rate": 50.0})  # one rate for every GPU was the old mistake


def test_the_full_table_covers_every_model_encoding_and_gpu() -> None:
    catalog = load_catalog()
    table = plan(PlanRequest())
    expected = sum(len(m.encodings) for m in catalog.models.values()) * len(catalog.gpus)
    single = [row for row in table.rows if row.tensor_parallel_size == 1]
    assert len(single) == expected
    # Beyond one row per GPU: a split over several, only where that GPU alone does not fit, and only one.
    by_key = {(row.model, row.encoding, row.gpu): row for row in single}
    split = [row for row in table.rows if row.tensor_parallel_size > 1]
    assert split and len({(row.model, row.encoding, row.gpu) for row in split}) == len(split)
    for row in split:
        assert row.fits and by_key[(row.model, row.encoding, row.gpu)].verdict == "does-not-fit"
    for row in table.rows:
        assert row.fits == (row.verdict in ("fits", "fits-with-swap"))
        assert (row.binding_term is None) == (row.verdict == "fits")
        assert row.needs_turing_clamp == (catalog.gpus[row.gpu].sm < 80)


def test_bad_numbers_and_names_are_usage_errors() -> None:
    with pytest.raises(UnknownName) as excinfo:
        plan_deployment("gemma-5", "bf16", "t4")
    assert "gemma-4-e2b" in str(excinfo.value) and excinfo.value.exit_code == 2
    with pytest.raises(UnknownName):
        plan_deployment("e2b", "int3", "t4")
    with pytest.raises(UnknownName):
        plan_deployment("e2b", "bf16", "v100")
    with pytest.raises(UsageError):
        plan_deployment("e2b", "bf16", "t4", gpu_memory_utilization=1.5)
    with pytest.raises(UsageError):
        plan_deployment("e2b", "bf16", "t4", max_model_len=10_000_000)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--model", "nope"], "Valid models"),
        (["plan", "--gpu", "v100"], "Valid GPUs"),
        (["plan", "--instance", "p3.2xlarge"], "Valid instance types"),
        (["plan", "--model", "e2b", "--encoding", "fp4"], "Valid encoding"),
    ],
)
def test_cli_unknown_names_exit_2_without_traceback(argv: list[str], needle: str) -> None:
    from gemmaserve.cli.errors import run_with_error_mapping

    runner = CliRunner()
    result = runner.invoke(app, argv, standalone_mode=False)
    assert isinstance(result.exception, UnknownName)
    # Through the real entry point: exit 2, a message, no traceback.
    code = run_with_error_mapping(app, argv, debug=False)
    assert code == 2
    assert needle in str(result.exception)


def test_cli_json_and_table_render_the_same_rows() -> None:
    runner = CliRunner()
    as_json = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4", "--json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.output)
    assert {(r["encoding"], r["gpu"]) for r in document["rows"]} >= {("bf16", "t4"), ("qat-w4a16", "l4")}
    table = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4"])
    assert table.exit_code == 0
    for row in document["rows"]:
        assert row["encoding"] in table.output
    qat_l4 = next(r for r in document["rows"] if (r["encoding"], r["gpu"]) == ("qat-w4a16", "l4"))
    assert f"{qat_l4['kv_cache_tokens']:,}" in table.output


def test_cli_rejects_out_of_range_numbers_with_exit_2() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "--gpu-memory-utilization", "1.2"])
    assert result.exit_code == 2


def test_language_model_only_and_vllm_version_are_keyword_options() -> None:
    full = plan_deployment("e2b", "bf16", "l4")
    text = plan_deployment("e2b", "bf16", "l4", language_model_only=True, vllm="0.30.0")
    assert text.language_model_only and not full.language_model_only
    assert text.vllm_version == "0.30"
    assert text.weights_gib < full.weights_gib
    assert "--language-model-only" in text.vllm_args and "--language-model-only" not in full.vllm_args
    with pytest.raises(UsageError) as excinfo:
        plan_deployment("e2b", "bf16", "l4", vllm="0.12.0")
    assert excinfo.value.hint is not None and "--vllm" in excinfo.value.hint
    rows = plan(
        PlanRequest.parse({"model": ["e2b"], "encoding": ["bf16"], "gpu": ["l4"], "language_model_only": True})
    ).rows
    assert rows and all(row.language_model_only for row in rows)


def _table_lines(output: str) -> list[str]:
    lines = output.splitlines()
    return [line for line in lines if not line.startswith("  gemmaserve ")]


def test_the_default_table_fits_100_columns_and_wide_shows_everything() -> None:
    runner = CliRunner()
    narrow = runner.invoke(app, ["plan"])
    assert narrow.exit_code == 0, narrow.output
    assert max(len(line.rstrip()) for line in _table_lines(narrow.output)) <= 100
    wide = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--wide"])
    assert wide.exit_code == 0
    for column in ("instance", "weights GiB", "host RAM", "swap", "disk", "clamp"):
        assert column in wide.output and column not in narrow.output.splitlines()[1]  # the header


def test_the_last_line_names_the_cheapest_fitting_row_and_the_next_command() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4", "--json"])
    table = json.loads(result.output)
    best = table["rows"][table["cheapest_fit"]]
    assert best["fits"]
    fitting_prices = [
        r["usd_per_million_output_tokens"] for r in table["rows"] if r["fits"] and r["usd_per_million_output_tokens"]
    ]
    assert best["usd_per_million_output_tokens"] == min(fitting_prices)
    text = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4"]).output.splitlines()
    assert text[-2].startswith(f"Cheapest that fits: e2b {best['encoding']} on {best['gpu']}")
    assert text[-1].strip() == table["next_command"]
    assert table["next_command"].startswith("gemmaserve serve start --model e2b")
    sagemaker = json.loads(runner.invoke(app, ["plan", "--model", "e2b", "--platform", "sagemaker", "--json"]).output)
    assert sagemaker["next_command"].startswith("gemmaserve sagemaker preflight")
    from gemmaserve.sagemaker.spec.container import PINNED_IMAGE

    assert PINNED_IMAGE.vllm_version.startswith(sagemaker["vllm_version"] + ".")  # the deployed image's release


def test_rows_sort_by_fit_or_by_cost() -> None:
    by_fit = plan(PlanRequest.parse({"model": ["e2b", "31b"], "gpu": ["t4", "l4", "h100"]})).rows
    ranks = [0 if row.verdict == "fits" else 1 if row.verdict == "fits-with-swap" else 2 for row in by_fit]
    assert ranks == sorted(ranks)
    by_cost = plan(PlanRequest.parse({"model": ["e2b"], "gpu": ["t4", "l4", "l40s"], "sort": "cost"})).rows
    prices = [row.usd_per_million_output_tokens for row in by_cost if row.usd_per_million_output_tokens is not None]
    assert len(prices) >= 3 and prices == sorted(prices)
    assert all(row.usd_per_million_output_tokens is None for row in by_cost if not row.fits)


def test_cli_vllm_and_text_only_options() -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["plan", "--model", "e2b", "--gpu", "l4", "--vllm", "0.30.0", "--language-model-only", "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert all(row["vllm_version"] == "0.30" and "--language-model-only" in row["vllm_args"] for row in rows)
    bad = runner.invoke(app, ["plan", "--vllm", "0.12"], standalone_mode=False)
    assert isinstance(bad.exception, UsageError) and bad.exception.exit_code == 2


def test_json_keeps_the_old_field_names() -> None:
    row = plan_deployment("e2b", "qat-w4a16", "l4").model_dump(mode="json")
    for name in (
        "model",
        "encoding",
        "repo_id",
        "gpu",
        "instance",
        "verdict",
        "fits",
        "binding_term",
        "notes",
        "dtype",
        "needs_turing_clamp",
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "weights_gib",
        "weights_source",
        "engine_overhead_gib",
        "kv_budget_gib",
        "kv_cache_tokens",
        "max_concurrency",
        "checkpoint_gib",
        "host_ram_needed_gib",
        "host_ram_gib",
        "swap_needed_gib",
        "disk_gib",
        "price_usd_per_hour",
        "price_source",
        "decode_tokens_per_s",
        "usd_per_million_output_tokens",
        "vllm_args",
    ):
        assert name in row
    memory = row["memory"]
    assert memory["weights_gib"] + memory["non_torch_gib"] + memory["peak_activation_gib"] + (
        memory["cudagraph_gib"] if memory["cudagraph_counted"] else 0
    ) + memory["headroom_withheld_gib"] + memory["kv_budget_gib"] == pytest.approx(memory["requested_gib"])


def test_text_only_leaves_the_towers_out_of_weights_and_profiling() -> None:
    full = plan_deployment("e2b", "bf16", "l4", vllm="0.30")
    text = plan_deployment("e2b", "bf16", "l4", vllm="0.30", language_model_only=True)
    assert full.memory is not None and text.memory is not None
    assert full.weights_gib - text.weights_gib == pytest.approx((614_000_000 + 337_000_000) / 1024**3, abs=0.01)
    assert full.memory.encoder_peak_gib > 0 and text.memory.encoder_peak_gib == 0
    assert text.kv_cache_tokens > full.kv_cache_tokens


def test_prefix_lm_models_raise_the_default_batch_to_one_video_unless_text_only() -> None:
    row = plan_deployment("26b-a4b", "bf16", "l40s")
    assert row.max_num_batched_tokens == 2496
    assert any("2,496" in note for note in row.notes)
    text = plan_deployment("26b-a4b", "bf16", "l40s", language_model_only=True)
    assert text.max_num_batched_tokens == 2048
    explicit = plan_deployment("26b-a4b", "bf16", "l40s", max_num_batched_tokens=1024)
    assert explicit.max_num_batched_tokens == 1024


def test_large_gpus_get_vllms_large_defaults_and_a100s_do_not() -> None:
    assert plan_deployment("e2b", "bf16", "h100").max_num_seqs == 1024
    assert plan_deployment("e2b", "bf16", "h100").max_num_batched_tokens == 8192
    assert plan_deployment("e2b", "bf16", "a100-80gb").max_num_batched_tokens == 2048
    assert plan_deployment("e2b", "bf16", "l4").max_num_seqs == 256


def test_a_first_start_on_026_counts_the_compile_peak_and_shows_the_warm_figure() -> None:
    row = plan_deployment("e2b", "bf16", "l4", vllm="0.26", language_model_only=True)
    assert row.first_start and row.kv_cache_tokens_warm > row.kv_cache_tokens
    assert any("compile cache is warm" in note for note in row.notes)
    warm = plan_deployment("e2b", "bf16", "l4", vllm="0.26", language_model_only=True, first_start=False)
    assert warm.kv_cache_tokens == row.kv_cache_tokens_warm


def test_an_unknown_name_lists_the_valid_ones_once_and_suggests_the_nearest() -> None:
    from gemmaserve.catalog import resolve_gpu
    from gemmaserve.errors import UnknownName

    with pytest.raises(UnknownName) as near:
        resolve_gpu("l40")
    assert near.value.hint == "Did you mean 'l40s'?"
    assert str(near.value).count("l40s") == 1 and "l40s" not in (near.value.hint or "").replace("'l40s'", "")
    with pytest.raises(UnknownName) as far:
        resolve_gpu("quadro")
    assert far.value.hint == "Pick one of the names listed." and far.value.fields["suggestion"] is None


def test_every_encoding_resolves_by_its_own_key_and_by_other_spellings() -> None:
    from gemmaserve.catalog import resolve_encoding, resolve_model

    for model in load_catalog().models.values():
        for key in model.encodings:
            assert resolve_encoding(model, key).key == key
            assert resolve_encoding(model, key.upper().replace("-", "_")).key == key
    with pytest.raises(UnknownName) as excinfo:
        resolve_encoding(resolve_model("e2b"), "fp8")
    assert str(excinfo.value).startswith("Unknown encoding of gemma-4-e2b 'fp8'. Valid encodings of gemma-4-e2b: ")


def test_12b_has_no_towers_only_embedders_that_stay_loaded_without_the_towers() -> None:
    """12B is ``Gemma4UnifiedForConditionalGeneration``: no vision or audio tower, linear embedders
    built whatever ``--language-model-only`` says (``gemma4_unified.py`` builds them outside any
    ``_mark_tower_model``), so text-only drops the encoder profile but no weights."""
    catalog = load_catalog()
    for key, checkpoint in catalog.models["gemma-4-12b"].encodings.items():
        assert not {"vision_tower", "audio_tower"} & set(checkpoint.parts_bytes), key
        assert {"vision_embedder", "audio_embedder"} <= set(checkpoint.parts_bytes), key
    full = plan_deployment("12b", "bf16", "l40s", vllm="0.30")
    text = plan_deployment("12b", "bf16", "l40s", vllm="0.30", language_model_only=True)
    assert full.memory is not None and text.memory is not None
    assert full.weights_gib == pytest.approx(text.weights_gib)
    assert full.memory.encoder_peak_gib > 0 and text.memory.encoder_peak_gib == 0
    assert any("embedder" in term for term in full.memory.estimated_terms)


def test_12b_parts_add_up_to_the_published_total_and_the_body_matches_the_geometry() -> None:
    checkpoint = load_catalog().models["gemma-4-12b"].encodings["bf16"]
    geometry = load_catalog().models["gemma-4-12b"].geometry
    assert sum(checkpoint.parts_bytes.values()) == 23_919_460_448
    hidden, width = geometry.hidden_size, geometry.intermediate_size
    sliding = sum(t == "sliding" for t in geometry.layer_types())
    full = geometry.num_hidden_layers - sliding
    heads = geometry.num_attention_heads
    per_sliding = hidden * geometry.sliding_head_dim * (2 * heads + 2 * geometry.sliding_kv_heads)
    per_full = hidden * geometry.full_head_dim * (2 * heads + geometry.full_kv_heads)  # k = v
    body = 2 * (geometry.num_hidden_layers * 3 * hidden * width + sliding * per_sliding + full * per_full)
    assert checkpoint.parts_bytes["transformer_body"] == pytest.approx(body, rel=0.002)


def test_the_encoder_free_profile_is_smaller_than_a_towers_on_the_same_batch() -> None:
    from gemmaserve.engine_memory import encoder_peak_bytes

    models = load_catalog().models
    unified = encoder_peak_bytes(models["gemma-4-12b"].geometry, 8192)
    tower = encoder_peak_bytes(models["gemma-4-26b-a4b"].geometry, 8192)
    assert 0 < unified < tower / 4
    # three 2,496-token videos of 32 × 70 soft tokens, each a 6,912-pixel patch and two 3,840-wide rows
    assert unified == 3 * 32 * 70 * (6912 + 2 * 3840) * 2


def test_12b_multimodal_looks_its_embeddings_up_outside_the_compiled_graph() -> None:
    from gemmaserve.engine_memory import embeddings_in_compiled_graph

    checkpoint = load_catalog().models["gemma-4-12b"].encodings["bf16"]
    assert not embeddings_in_compiled_graph(checkpoint, language_model_only=False)
    assert embeddings_in_compiled_graph(checkpoint, language_model_only=True)


@pytest.mark.parametrize(
    ("model", "encoding", "published"),
    [
        ("gemma-4-12b", "bf16", 23_919_549_408 - 8 - 88_952),  # model.safetensors less its header
        ("gemma-4-12b", "qat-w4a16", 10_264_229_896),  # the file, header included
        ("gemma-4-26b-a4b", "bf16", 51_611_872_412),  # index total_size
        ("gemma-4-31b", "bf16", 62_546_177_752),
        ("gemma-4-31b", "qat-q4_0-unquantized", 49_784_788_364 + 12_761_549_884 - 160_496),  # shards less headers
        ("gemma-4-31b", "qat-w4a16", 23_265_352_448),
    ],
)
def test_checkpoint_parts_add_up_to_the_published_bytes(model: str, encoding: str, published: int) -> None:
    checkpoint = load_catalog().models[model].encodings[encoding]
    assert sum(checkpoint.parts_bytes.values()) == published
    assert f"{published:,}" in checkpoint.source or "less" in checkpoint.source or "shards" in checkpoint.source


def test_plan_deployment_keywords_are_exactly_the_serving_settings() -> None:
    """SettingsByName types ``plan_deployment``'s keywords; a ServingSettings field added or renamed must show there."""
    from gemmaserve.plan import SettingsByName
    from gemmaserve.request_model import ServingSettings

    assert set(SettingsByName.__annotations__) == set(ServingSettings.model_fields)


def test_plan_deployment_keywords_reach_the_row() -> None:
    row = plan_deployment("e2b", "bf16", "l4", max_model_len=4096, vllm="0.30", language_model_only=True)
    assert row.max_model_len == 4096 and row.vllm_version.startswith("0.30") and row.language_model_only
    assert (
        "--language-model-only" in row.vllm_args and row.vllm_args[row.vllm_args.index("--max-model-len") + 1] == "4096"
    )
