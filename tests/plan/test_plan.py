"""The plan: verdicts, binding terms, host RAM and swap, prices, and bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gemmaserve.catalog import load_catalog, resolve_instance
from gemmaserve.cli import app
from gemmaserve.errors import UnknownName, UsageError
from gemmaserve.plan import plan_all, plan_deployment


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


def test_price_per_million_tokens_needs_a_measured_rate() -> None:
    instance = resolve_instance("ml.g4dn.xlarge")
    unpriced = plan_deployment("e2b", "qat-w4a16", instance=instance)
    assert unpriced.usd_per_million_output_tokens is None
    priced = plan_deployment("e2b", "qat-w4a16", instance=instance, decode_tokens_per_s=50.0)
    assert instance.price_usd_per_hour is not None
    expected = instance.price_usd_per_hour / (50.0 * 3600) * 1e6
    assert priced.usd_per_million_output_tokens == pytest.approx(expected, abs=1e-3)


def test_the_full_table_covers_every_model_encoding_and_gpu() -> None:
    catalog = load_catalog()
    table = plan_all()
    expected = sum(len(m.encodings) for m in catalog.models.values()) * len(catalog.gpus)
    assert len(table.rows) == expected
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
    [(["plan", "--model", "nope"], "Valid models"), (["plan", "--gpu", "v100"], "Valid GPUs"),
     (["plan", "--instance", "p3.2xlarge"], "Valid instance types"),
     (["plan", "--model", "e2b", "--encoding", "fp4"], "Valid encoding")],
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
    text = plan_deployment("e2b", "bf16", "l4", language_model_only=True, vllm_version="0.30.0")
    assert text.language_model_only and not full.language_model_only
    assert text.vllm_version == "0.30"
    assert text.weights_gib < full.weights_gib
    assert "--language-model-only" in text.vllm_args and "--language-model-only" not in full.vllm_args
    with pytest.raises(UsageError) as excinfo:
        plan_deployment("e2b", "bf16", "l4", vllm_version="0.12.0")
    assert excinfo.value.hint is not None and "--vllm" in excinfo.value.hint
    rows = plan_all(models=["e2b"], encodings=["bf16"], gpus=["l4"], language_model_only=True).rows
    assert rows and all(row.language_model_only for row in rows)
