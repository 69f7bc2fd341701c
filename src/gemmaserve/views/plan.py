"""Views of the plan: the capacity and cost table (``gemmaserve plan``, the MCP ``plan`` tool).

The default table fits 100 columns (the README and docs/plan.md show it so); :class:`WidePlanTable` is
the same table seen with every column (``plan --wide``). The lines under the table (footnotes, notes,
the legend, the cheapest fit and the next command, or why nothing is listed) are part of the page.
"""

from __future__ import annotations

import textwrap
from collections import Counter

from gemmaserve.plan import PlanRow, PlanTable
from gemmaserve.views import summary, view
from gemmaserve.views.page import Block, Line, Page, Row, Style, page, table

#: The width the default table and its notes keep to (docs/plan.md shows them at 100 columns).
TABLE_WIDTH = 100

VERDICT_STYLE: dict[str, Style] = {
    "fits": "good",
    "fits-with-swap": "warn",
    "does-not-fit": "bad",
    "not-servable": "dim",
}
VERDICT_SHORT = {"fits": "fits", "fits-with-swap": "swap", "does-not-fit": "no", "not-servable": "n/a"}
NARROW_COLUMNS = ["model", "encoding", "gpu", "KV tokens>", "conc.>", "tok/s>", "$/h>", "$/M>", "fits"]
WIDE_COLUMNS = [
    "model",
    "encoding",
    "gpu",
    "instance",
    "dtype",
    "weights GiB>",
    "engine GiB>",
    "KV tokens>",
    "KV low>",
    "KV warm>",
    "conc.>",
    "host RAM>",
    "swap>",
    "disk>",
    "clamp",
    "decode>",
    "tok/s>",
    "$/h>",
    "$/M>",
    "$/M range>",
    "fits",
]


class WidePlanTable(PlanTable):
    """A :class:`PlanTable` shown with every column (``gemmaserve plan --wide``): the same data and JSON."""


@view(PlanTable)
def plan_page(plan: PlanTable) -> Page:
    return _page(plan, wide=False)


@view(WidePlanTable)
def wide_plan_page(plan: PlanTable) -> Page:
    return _page(plan, wide=True)


def _page(plan: PlanTable, *, wide: bool) -> Page:
    width = None if wide else TABLE_WIDTH
    footnotes: list[str] = []
    rows: list[Row] = []
    for row in plan.rows:
        marker = ""
        if row.binding_term:
            if row.binding_term not in footnotes:
                footnotes.append(row.binding_term)
            marker = f" [{footnotes.index(row.binding_term) + 1}]"
        rows.append(Row(tuple(_cells(row, marker, wide)), VERDICT_STYLE[row.verdict]))
    first = "a first start (compiles)" if all(row.first_start for row in plan.rows) else "a warm restart"
    blocks: list[Block] = [
        Line(f"gemmaserve plan — vLLM {plan.vllm_version}, {first}; sorted by {plan.sort}"),
        table(WIDE_COLUMNS if wide else NARROW_COLUMNS, rows),
    ]
    for number, text in enumerate(footnotes, start=1):
        blocks += _wrapped(f"[{number}] {text}", None, width)
    notes = sorted({note for row in plan.rows for note in row.notes if note.startswith(("a first start", "vLLM"))})
    for note in notes[:2]:
        blocks += _wrapped(f"note: {note}", "dim", width)
    for unused in plan.bench_files_unused:
        blocks += _wrapped(f"not used from --from-bench: {unused}", "warn", width)
    blocks += _wrapped(
        f"KV tokens and conc. are what vLLM logs (GPU KV cache size, Maximum concurrency). tok/s: output "
        f"tokens/s with {plan.concurrency} streams of {plan.input_tokens:,}→"
        f"{plan.output_tokens:,}-token requests; ~ predicted (docs/plan.md: how, and how far off it has been), "
        f"else measured. $/M: per million output tokens at that rate, list prices of {plan.price_date}, "
        "us-east-1. --wide: every column, KV low (with the most memory real starts held beyond the plan) and "
        "the $/M range; --json: every term.",
        "dim",
        width,
    )
    blocks += _closing(plan, width)
    return page(*blocks)


def _closing(plan: PlanTable, width: int | None) -> list[Line]:
    """The last lines: the cheapest row that fits and the command that starts it, else why none is named."""
    index = plan.cheapest_fit
    if index is not None and 0 <= index < len(plan.rows) and plan.next_command:
        best = plan.rows[index]
        cost = (
            f"{'~' if best.speed_source == 'predicted' else ''}${best.usd_per_million_output_tokens:.2f}/M out at "
            f"{plan.concurrency} streams"
            if best.usd_per_million_output_tokens is not None
            else f"{best.kv_cache_tokens:,} KV tokens"
        )
        price = "—" if best.price_usd_per_hour is None else f"${best.price_usd_per_hour:.3f}/h"
        # Never wrapped: the command is pasted whole.
        return [
            Line(
                f"Cheapest that fits: {best.model.removeprefix('gemma-4-')} {best.encoding} on {_gpu(best, ' ')} "
                f"({best.instance} {price}: {cost}). Next:"
            ),
            Line(f"  {plan.next_command}", "bold"),
        ]
    if any(row.fits for row in plan.rows):
        unpriced = sorted({row.gpu for row in plan.rows if row.fits})
        return _wrapped(
            f"{', '.join(unpriced)} fits, but has no listed price here: name an --instance or --platform "
            "that carries it to rank by cost.",
            None,
            width,
        )
    return _wrapped(
        "Nothing listed fits: try a 4-bit encoding, a larger GPU, a shorter --max-model-len or, for "
        "text alone, --language-model-only.",
        "warn",
        width,
    )


def _wrapped(text: str, style: Style | None, width: int | None) -> list[Line]:
    """``text`` as lines of at most ``width`` columns, each after the first indented (``None``: one line)."""
    if width is None:
        return [Line(text, style)]
    lines = textwrap.wrap(text, width=width, subsequent_indent="    ", break_on_hyphens=False)
    return [Line(line, style) for line in lines]


def _gpu(row: PlanRow, between: str = "") -> str:
    return row.gpu if row.tensor_parallel_size == 1 else f"{row.tensor_parallel_size}×{between}{row.gpu}"


def _money(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cells(row: PlanRow, marker: str, wide: bool) -> list[str]:
    verdict = row.verdict if wide else VERDICT_SHORT[row.verdict]
    kv = f"{row.kv_cache_tokens:,}" if row.fits else "—"
    conc = f"{row.max_concurrency:.1f}" if row.fits else "—"
    cells = [row.model.removeprefix("gemma-4-"), row.encoding, _gpu(row)]
    if wide:
        weights = f"{row.weights_gib:.2f}" + ("" if row.weights_source == "published" else "*")
        warm = f"{row.kv_cache_tokens_warm:,}" if row.fits and row.kv_cache_tokens_warm != row.kv_cache_tokens else ""
        cells += [
            row.instance or "—",
            "fp16" if row.dtype == "float16" else "bf16",
            weights,
            f"{row.engine_overhead_gib:.2f}",
            kv,
            f"{row.kv_cache_tokens_low:,}" if row.fits else "",
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
    if wide:
        cells.append("—" if row.decode_tokens_per_s is None else f"{predicted}{row.decode_tokens_per_s:,.1f}")
    rate = "—" if row.output_tokens_per_s is None else f"{predicted}{row.output_tokens_per_s:,.0f}"
    cells += [rate, _money(row.price_usd_per_hour, 3), _money(row.usd_per_million_output_tokens, 2)]
    if wide:
        low, high = row.usd_per_million_low, row.usd_per_million_high
        cells.append("" if low is None or high is None or low == high else f"{low:.2f}–{high:.2f}")
    cells.append(f"{verdict}{marker}")
    return cells


@summary(PlanTable)
def plan_summary(plan: PlanTable) -> str:
    """For an agent: the verdict counts, the five cheapest rows that fit, and the next command."""
    verdicts = Counter(row.verdict for row in plan.rows)
    counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
    lines = [f"{len(plan.rows)} rows ({counts or 'none'}); list prices of {plan.price_date}."]
    fitting = sorted(
        (row for row in plan.rows if row.fits and row.price_usd_per_hour is not None),
        key=lambda row: row.price_usd_per_hour or 0.0,
    )
    for row in fitting[:5]:
        lines.append(
            f"- {row.model} {row.encoding} on {row.gpu} ({row.instance}, ${row.price_usd_per_hour:.3f}/h): "
            f"{row.verdict}, {row.kv_cache_tokens:,} KV tokens, {row.max_concurrency:.1f}x at {row.max_model_len}"
        )
    lines.append(
        f"vLLM {plan.vllm_version} memory rules, "
        + ("a first start (compiles)." if all(row.first_start for row in plan.rows) else "a warm restart.")
    )
    if plan.next_command:
        lines.append(f"Next: {plan.next_command}")
    elif not any(row.fits for row in plan.rows):
        lines.append(_closing(plan, None)[0].text)
    return "\n".join(lines)
