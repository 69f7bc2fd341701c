"""What the plan table says around its rows: token counts as vLLM spells them, hints only where they help,
"nothing fits" only when nothing does, and why vLLM's own defaults change a row."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from gemmaserve.cli import app
from gemmaserve.errors import UsageError
from gemmaserve.plan import PlanRequest, PlanRow, PlanTable, plan, plan_deployment
from gemmaserve.request_model import parse_token_count
from gemmaserve.views import page_for
from gemmaserve.views.page import plain_lines
from tests.support.engine.fixtures import engine_python
from tests.support.mcp.fixtures import call_tool

# vLLM's own spellings (utils/argparse_utils.py human_readable_int): lower case decimal, upper case binary.
TOKEN_SPELLINGS = {
    "8192": 8192,
    "32k": 32_000,
    "32K": 32_768,
    "25.6k": 25_600,
    "1m": 1_000_000,
    "2M": 2_097_152,
    " 4k ": 4000,
}


@pytest.mark.parametrize(("text", "value"), TOKEN_SPELLINGS.items())
def test_token_counts_read_as_vllm_reads_them(text: str, value: int) -> None:
    assert parse_token_count(text) == value


def test_a_decimal_with_a_binary_suffix_is_refused_as_vllm_refuses_it() -> None:
    with pytest.raises(ValueError, match=r"did you mean 32\.5k"):
        parse_token_count("32.5K")


@pytest.mark.engine
def test_our_reading_matches_the_real_vllm_parser() -> None:
    python = engine_python()
    if python is None:
        pytest.skip("needs the engine venv (GEMMASERVE_ENGINE_PYTHON): vLLM's own human_readable_int")
    code = (
        "import json, sys\n"
        "from vllm.utils.argparse_utils import human_readable_int\n"
        "print(json.dumps({t: human_readable_int(t) for t in json.loads(sys.argv[1])}))"
    )
    done = subprocess.run(
        [python, "-c", code, json.dumps(list(TOKEN_SPELLINGS))], capture_output=True, text=True, timeout=300, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == TOKEN_SPELLINGS


def test_cli_plan_takes_32k_and_the_json_says_the_number() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--max-model-len", "32K", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert {row["max_model_len"] for row in rows} == {32_768}
    batched = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--max-num-batched-tokens", "4k", "--json"])
    assert {row["max_num_batched_tokens"] for row in json.loads(batched.output)["rows"]} == {4000}


@pytest.mark.parametrize("bad", ["32.5K", "lots", "8", "-1k"])
def test_cli_refuses_a_bad_token_count_with_exit_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from gemmaserve.cli.errors import run_with_error_mapping

    assert run_with_error_mapping(app, ["plan", "--model", "e2b", "--max-model-len", bad], debug=False) == 2
    err = capsys.readouterr().err
    assert "max-model-len" in err and "Traceback" not in err


def test_mcp_plan_takes_32k_and_refuses_junk() -> None:
    from gemmaserve.mcp_server import build_server

    server = build_server()
    result = call_tool(server, "plan", {"model": ["e2b"], "gpu": ["l4"], "max_model_len": "32k"})
    assert not result.is_error, result
    assert result.structured_content is not None
    assert {row["max_model_len"] for row in result.structured_content["rows"]} == {32_000}
    bad = call_tool(server, "plan", {"model": ["e2b"], "gpu": ["l4"], "max_model_len": "32 thousand"})
    assert bad.is_error


def test_every_token_count_field_takes_the_short_spelling() -> None:
    from gemmaserve.bench.requests import MeasureRequest
    from gemmaserve.sagemaker.spec.requests import InvokeRequest

    assert (
        MeasureRequest.parse({"targets": ["http://127.0.0.1:1"], "out": "x", "output_tokens": "1k"}).output_tokens
        == 1000
    )
    assert InvokeRequest.parse({"endpoint_name": "e", "prompt": "p", "max_tokens": "2K"}).max_tokens == 2048
    with pytest.raises(UsageError):
        InvokeRequest.parse({"endpoint_name": "e", "prompt": "p", "max_tokens": "64K"})  # over its 32,768 limit
    assert PlanRequest.parse({"max_num_batched_tokens": "2K"}).max_num_batched_tokens == 2048
    assert PlanRequest.parse({}).max_num_batched_tokens is None


@pytest.mark.parametrize(("vllm", "max_model_len"), [("0.30", 65536), ("0.34", 131072), ("0.26", 8192)])
def test_the_text_only_hint_appears_exactly_where_it_rescues_the_row(vllm: str, max_model_len: int) -> None:
    table = plan(PlanRequest.parse({"vllm": vllm, "max_model_len": max_model_len}))
    hinted = 0
    for row in table.rows:
        if row.fits or row.verdict == "not-servable":
            continue
        rescued = plan_deployment(
            row.model, row.encoding, row.gpu, max_model_len=max_model_len, vllm=vllm, language_model_only=True
        ).fits
        has_hint = "--language-model-only" in (row.binding_term or "")
        assert has_hint == rescued, (row.model, row.encoding, row.gpu, row.binding_term)
        hinted += has_hint
    if vllm != "0.26":
        assert hinted, "these settings have rows that only text-only serving saves"


def _render(table: PlanTable) -> str:
    return "\n".join(plain_lines(page_for(table)))


def _row(**changes: object) -> PlanRow:
    return plan_deployment("e2b", "qat-w4a16", "l4").model_copy(update=changes)


def test_nothing_fits_is_said_only_when_nothing_fits() -> None:
    unpriced = _row(instance=None, price_usd_per_hour=None, price_source=None, usd_per_million_output_tokens=None)
    text = _render(PlanTable(rows=[unpriced], price_date="2025-06-01"))
    assert "Nothing listed fits" not in text
    assert "fits, but has no listed price" in text
    misfit = _row(verdict="does-not-fit", fits=False, binding_term="GPU memory: too small")
    text = _render(PlanTable(rows=[misfit], price_date="2025-06-01"))
    assert "Nothing listed fits" in text


def test_large_gpu_defaults_are_named_on_the_row_they_change() -> None:
    h200 = plan_deployment("31b", "bf16", "h200", max_model_len=32768)
    note = next(note for note in h200.notes if note.startswith("vLLM's defaults for a GPU of 70 GiB"))
    assert "1,024 sequences and 8,192 batched tokens" in note and "16,384 in-flight tokens" in note
    smaller = int(note.rsplit("gives about ", 1)[1].split()[0].replace(",", ""))
    assert smaller > h200.kv_cache_tokens  # the smaller batch reserves less per request
    for small in (
        plan_deployment("31b", "bf16", "a100-80gb", max_model_len=32768),
        plan_deployment("e2b", "bf16", "l4"),
    ):
        assert not any(note.startswith("vLLM's defaults for a GPU") for note in small.notes)
    explicit = plan_deployment("31b", "bf16", "h200", max_model_len=32768, max_num_batched_tokens=8192)
    assert not any(note.startswith("vLLM's defaults for a GPU") for note in explicit.notes)


def test_the_compile_peak_follows_the_model_class_not_only_the_release() -> None:
    # Google's multimodal checkpoints look their embeddings up outside the compiled graph (gemma4_mm.py
    # embed_input_ids); text-only exports and --language-model-only inside it, where 0.26 counts the copy.
    multimodal = plan_deployment("e2b", "bf16", "l4", vllm="0.26")
    text_only = plan_deployment("e2b", "bf16", "l4", vllm="0.26", language_model_only=True)
    assert multimodal.memory is not None and text_only.memory is not None
    assert multimodal.memory.compile_peak_gib == 0 and text_only.memory.compile_peak_gib > 4
    later = plan_deployment("e2b", "bf16", "l4", vllm="0.30", language_model_only=True)
    assert later.memory is not None and later.memory.compile_peak_gib == 0


def test_text_only_keeps_the_video_floor_in_026_and_drops_it_after() -> None:
    assert (
        plan_deployment("26b-a4b", "bf16", "l40s", vllm="0.26", language_model_only=True).max_num_batched_tokens == 2496
    )
    assert (
        plan_deployment("26b-a4b", "bf16", "l40s", vllm="0.27", language_model_only=True).max_num_batched_tokens == 2048
    )


def test_the_encoder_is_profiled_where_the_runner_does_it() -> None:
    dense_026 = plan_deployment("e2b", "bf16", "l4", vllm="0.26")
    dense_027 = plan_deployment("e2b", "bf16", "l4", vllm="0.27")
    moe_026 = plan_deployment("26b-a4b", "bf16", "l40s", vllm="0.26")  # Model Runner V1 profiles it
    assert dense_026.memory is not None and dense_027.memory is not None and moe_026.memory is not None
    assert dense_026.memory.encoder_peak_gib == 0 < dense_027.memory.encoder_peak_gib
    assert moe_026.memory.runner == "v1" and moe_026.memory.encoder_peak_gib > 0


def test_vllm_034_keeps_its_free_memory_margin_near_full_utilisation() -> None:
    # extensible_kv_cache.py: min(request, free − max(1 GiB, 0.75 × peak)) − peak
    near_full = plan_deployment("e2b", "qat-w4a16", "l4", vllm="0.34", gpu_memory_utilization=0.99)
    usual = plan_deployment("e2b", "qat-w4a16", "l4", vllm="0.34", gpu_memory_utilization=0.9)
    older = plan_deployment("e2b", "qat-w4a16", "l4", vllm="0.33", gpu_memory_utilization=0.99)
    assert near_full.memory is not None and usual.memory is not None and older.memory is not None
    assert usual.memory.headroom_withheld_gib == 0 and older.memory.headroom_withheld_gib == 0
    margin = max(1.0, 0.75 * near_full.memory.peak_activation_gib)
    assert near_full.memory.headroom_withheld_gib == pytest.approx(0.99 * 22.05 - (22.05 - margin))


def test_the_default_table_keeps_to_100_columns_on_a_terminal_of_100_without_folding_a_cell() -> None:
    import io

    from rich.console import Console

    from gemmaserve.views.terminal import draw

    table = plan(PlanRequest.parse({}))
    shown = page_for(table)
    out = io.StringIO()
    draw(shown, Console(file=out, width=100, force_terminal=True, color_system=None))
    drawn = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in drawn) <= 100
    # A folded cell would add a line: the drawing has the page's lines, the header, its rule, each row once
    # and a blank line after the table.
    assert len(drawn) == len(plain_lines(shown)) + 2
    assert sum("qat-q4_0-unquantized" in line for line in drawn) == sum(
        row.encoding == "qat-q4_0-unquantized" for row in table.rows
    )


def test_off_a_terminal_the_table_is_plain_aligned_columns_under_their_heads() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4"])
    assert result.exit_code == 0, result.output
    title, head, *rest = result.output.splitlines()
    assert title.startswith("gemmaserve plan — vLLM") and head.split() == [
        "model", "encoding", "gpu", "KV", "tokens", "conc.", "tok/s", "$/h", "$/M", "fits"
    ]  # fmt: skip
    rows = rest[
        : len(
            json.loads(runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4", "--json"]).output)[
                "rows"
            ]
        )
    ]
    fits_at, price_end = head.index("fits"), head.index("$/h") + len("$/h")
    for row in rows:
        assert row.startswith("e2b ") and "─" not in row and "│" not in row
        assert row[fits_at - 2 : fits_at] == "  " and row[fits_at] != " "  # the verdict under its head
        assert row[price_end - 1] != " " and row[price_end : price_end + 2] == "  "  # numbers right-aligned


def test_wide_changes_the_columns_not_the_data() -> None:
    runner = CliRunner()
    narrow = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--json"])
    wide = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--wide", "--json"])
    assert json.loads(wide.output) == json.loads(narrow.output)
    text = runner.invoke(app, ["plan", "--model", "e2b", "--gpu", "l4", "--wide"]).output.splitlines()
    assert text[1].split()[:5] == ["model", "encoding", "gpu", "instance", "dtype"]


def test_when_nothing_fits_the_page_and_the_agents_summary_say_what_to_try() -> None:
    from gemmaserve.views import summary_for

    misfit = _row(verdict="does-not-fit", fits=False, binding_term="GPU memory: too small")
    table = PlanTable(rows=[misfit], price_date="2025-06-01")
    assert table.ok  # a plan that finds nothing is still the plan asked for: exit 0
    text = _render(table)
    assert text.splitlines()[-2:] == [
        "Nothing listed fits: try a 4-bit encoding, a larger GPU, a shorter --max-model-len or, for text",
        "    alone, --language-model-only.",
    ]
    assert "[1] GPU memory: too small" in text
    assert "Nothing listed fits" in summary_for(table) and "--language-model-only" in summary_for(table)


def test_an_empty_plan_draws_and_says_nothing_fits() -> None:
    table = PlanTable(rows=[], price_date="2025-06-01")
    text = _render(table)
    assert "(no rows)" in text and "Nothing listed fits" in text
