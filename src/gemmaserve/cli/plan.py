"""``gemmaserve plan``: the capacity and cost table, offline on the built-in catalog."""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import console, emit, json_option
from gemmaserve.plan import PlanRequest, PlanRow, PlanTable, plan

_VERDICT_STYLE = {"fits": "green", "fits-with-swap": "yellow", "does-not-fit": "red", "not-servable": "dim"}
_VERDICT_SHORT = {"fits": "fits", "fits-with-swap": "swap", "does-not-fit": "no", "not-servable": "n/a"}
TABLE_WIDTH = 100


@click.command(name="plan")
@request_options(PlanRequest)
@click.option("--wide", is_flag=True, help="Every column (instance, dtype, weights, host RAM, swap, disk, clamp, …).")
@json_option
def cli(request: PlanRequest, wide: bool, as_json: bool) -> None:
    """Which Gemma 4 model, encoding and GPU fit, with KV pool, host RAM, swap, disk and cost.

    With no options: every model × encoding × GPU in the built-in catalog, for the first
    start of the newest supported vLLM.

    \b
    Examples:
      gemmaserve plan --model e2b --gpu t4
      gemmaserve plan --instance ml.g4dn.xlarge --max-model-len 4096 --wide
      gemmaserve plan --model e4b --concurrency 16 --sort cost
      gemmaserve plan --model e2b --encoding qat-w4a16 --gpu t4 --decode-rate 38.5 --json
      gemmaserve plan --sort cost --from-bench results/
      gemmaserve plan --model 31b --encoding bf16 --gpu l4 --tensor-parallel-size 4
    """
    table = plan(request)
    emit(table, as_json=as_json, render=lambda result: _render(result, wide=wide))


def _money(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cells(row: PlanRow, marker: str, wide: bool) -> list[str]:
    style = _VERDICT_STYLE[row.verdict]
    verdict = row.verdict if wide else _VERDICT_SHORT[row.verdict]
    kv = f"{row.kv_cache_tokens:,}" if row.fits else "—"
    conc = f"{row.max_concurrency:.1f}" if row.fits else "—"
    gpu = row.gpu if row.tensor_parallel_size == 1 else f"{row.tensor_parallel_size}×{row.gpu}"
    cells = [row.model.removeprefix("gemma-4-"), row.encoding, gpu]
    if wide:
        weights = f"{row.weights_gib:.2f}" + ("" if row.weights_source == "published" else "*")
        warm = f"{row.kv_cache_tokens_warm:,}" if row.fits and row.kv_cache_tokens_warm != row.kv_cache_tokens else ""
        kv_low = f"{row.kv_cache_tokens_low:,}" if row.fits else ""
        cells += [
            row.instance or "—",
            "fp16" if row.dtype == "float16" else "bf16",
            weights,
            f"{row.engine_overhead_gib:.2f}",
            kv,
            kv_low,
            warm,
            conc,
            f"{row.host_ram_needed_gib:.1f}",
            "—" if row.swap_needed_gib is None else f"{row.swap_needed_gib:.1f}",
            f"{row.disk_gib:.0f}",
            "yes" if row.needs_turing_clamp else "",
        ]
    else:
        cells += [kv, conc]
    predicted = "~" if row.speed_source == "predicted" else ""
    rate = "—" if row.output_tokens_per_s is None else f"{predicted}{row.output_tokens_per_s:,.0f}"
    per_million = _money(row.usd_per_million_output_tokens, 2)
    if wide:
        cells.append("—" if row.decode_tokens_per_s is None else f"{predicted}{row.decode_tokens_per_s:,.1f}")
    cells += [
        rate,
        _money(row.price_usd_per_hour, 3),
        per_million,
    ]
    if wide:
        low, high = row.usd_per_million_low, row.usd_per_million_high
        cells.append("" if low is None or high is None or low == high else f"{low:.2f}–{high:.2f}")
    cells.append(f"[{style}]{verdict}[/{style}]{marker}")
    return cells


def _say(out: object, text: str, *, style: str | None = None, width: int | None = TABLE_WIDTH) -> None:
    import textwrap

    lines = textwrap.wrap(text, width=width, subsequent_indent="    ", break_on_hyphens=False) if width else [text]
    for line in lines:
        out.print(line, style=style, highlight=False, soft_wrap=True, markup=False)  # type: ignore[attr-defined]


def _render(table: PlanTable, *, wide: bool = False) -> None:
    from rich import box
    from rich.table import Table

    out = console(min_width=320 if wide else 200)
    columns = [("model", "left"), ("encoding", "left"), ("gpu", "left")]
    if wide:
        columns += [
            ("instance", "left"),
            ("dtype", "left"),
            ("weights GiB", "right"),
            ("engine GiB", "right"),
            ("KV tokens", "right"),
            ("KV low", "right"),
            ("KV warm", "right"),
            ("conc.", "right"),
            ("host RAM", "right"),
            ("swap", "right"),
            ("disk", "right"),
            ("clamp", "center"),
        ]
    else:
        columns += [("KV tokens", "right"), ("conc.", "right")]
    if wide:
        columns.append(("decode", "right"))
    columns += [("tok/s", "right"), ("$/h", "right"), ("$/M", "right")]
    if wide:
        columns.append(("$/M range", "right"))
    columns.append(("fits", "left"))
    grid = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True, header_style="bold")
    for name, justify in columns:
        grid.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    footnotes: list[str] = []
    for row in table.rows:
        marker = ""
        if row.binding_term:
            if row.binding_term not in footnotes:
                footnotes.append(row.binding_term)
            marker = f" [{footnotes.index(row.binding_term) + 1}]"
        grid.add_row(*_cells(row, marker, wide))
    first = "a first start (compiles)" if all(row.first_start for row in table.rows) else "a warm restart"
    out.print(f"gemmaserve plan — vLLM {table.vllm_version}, {first}; sorted by {table.sort}", highlight=False)
    out.print(grid)
    width = None if wide else TABLE_WIDTH
    for number, text in enumerate(footnotes, start=1):
        _say(out, f"[{number}] {text}", width=width)
    notes = sorted({note for row in table.rows for note in row.notes if note.startswith(("a first start", "vLLM"))})
    for note in notes[:2]:
        _say(out, f"note: {note}", style="dim", width=width)
    for unused in table.bench_files_unused:
        _say(out, f"not used from --from-bench: {unused}", style="yellow", width=width)
    _say(
        out,
        f"KV tokens and conc. are what vLLM logs (GPU KV cache size, Maximum concurrency). tok/s: output "
        f"tokens/s with {table.concurrency} streams of {table.input_tokens:,}→"
        f"{table.output_tokens:,}-token requests; ~ predicted (docs/plan.md: how, and how far off it has been), "
        f"else measured. $/M: per million output tokens at that rate, list prices of {table.price_date}, us-east-1. --wide: every "
        "column, KV low (with the most memory real starts held beyond the plan) and the $/M range; --json: every term.",
        style="dim",
        width=width,
    )
    if table.cheapest_fit is not None and table.next_command:
        best = table.rows[table.cheapest_fit]
        cost = (
            f"{'~' if best.speed_source == 'predicted' else ''}${best.usd_per_million_output_tokens:.2f}/M out at "
            f"{table.concurrency} streams"
            if best.usd_per_million_output_tokens is not None
            else f"{best.kv_cache_tokens:,} KV tokens"
        )
        _say(
            out,
            f"Cheapest that fits: {best.model.removeprefix('gemma-4-')} {best.encoding} on "
            f"{best.gpu if best.tensor_parallel_size == 1 else f'{best.tensor_parallel_size}× {best.gpu}'} "
            f"({best.instance} ${best.price_usd_per_hour:.3f}/h: {cost}). Next:",
            width=None,
        )
        _say(out, f"  {table.next_command}", width=None)
    elif any(row.fits for row in table.rows):
        unpriced = sorted({row.gpu for row in table.rows if row.fits})
        _say(
            out,
            f"{', '.join(unpriced)} fits, but has no listed price here: name an --instance or --platform "
            "that carries it to rank by cost.",
            width=width,
        )
    else:
        _say(
            out,
            "Nothing listed fits: try a 4-bit encoding, a larger GPU, a shorter --max-model-len or, for "
            "text alone, --language-model-only.",
            width=width,
        )
