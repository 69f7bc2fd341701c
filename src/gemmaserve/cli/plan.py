"""``gemmaserve plan``: the capacity and cost table, offline on the built-in catalog."""

from __future__ import annotations

import click

from gemmaserve.cli.output import (
    console,
    emit,
    gpu_memory_utilization_option,
    json_option,
    max_model_len_option,
)
from gemmaserve.plan import PlanTable, plan_all

_VERDICT_STYLE = {"fits": "green", "fits-with-swap": "yellow", "does-not-fit": "red", "not-servable": "dim"}


@click.command(name="plan")
@click.option("--model", "models", multiple=True, help="Model (e.g. gemma-4-e2b, e2b, 26b-a4b). Repeatable. Default: all.")
@click.option("--encoding", "encodings", multiple=True,
              help="Checkpoint encoding: bf16, qat-w4a16, qat-q4_0-unquantized, gguf-q4_0. Repeatable. Default: all.")
@click.option("--gpu", "gpus", multiple=True, help="GPU (t4, l4, l40s, a10g, a100-40gb, a100-80gb, h100). Repeatable.")
@click.option("--instance", help="An instance type (ml.g4dn.xlarge, g6.xlarge, …): its GPU, host RAM and price.")
@click.option("--platform", type=click.Choice(["ec2", "sagemaker"]), default="ec2", show_default=True,
              help="Which instances price a GPU when --instance is not given.")
@max_model_len_option
@gpu_memory_utilization_option
@click.option("--max-num-seqs", type=click.IntRange(min=1), help="vLLM's --max-num-seqs (default 256).")
@click.option("--max-num-batched-tokens", type=click.IntRange(min=16),
              help="vLLM's --max-num-batched-tokens (default 2048 on GPUs under 70 GiB, else 8192).")
@click.option("--decode-rate", "decode_tokens_per_s", type=click.FloatRange(min=0, min_open=True),
              help="A measured decode rate (output tokens/s) to price $/M output tokens with.")
@json_option
def cli(
    models: tuple[str, ...],
    encodings: tuple[str, ...],
    gpus: tuple[str, ...],
    instance: str | None,
    platform: str,
    max_model_len: int,
    gpu_memory_utilization: float,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    decode_tokens_per_s: float | None,
    as_json: bool,
) -> None:
    """Which Gemma 4 model, encoding and GPU fit, with KV pool, host RAM, swap, disk and cost.

    With no options: every model × encoding × GPU in the built-in catalog.
    """
    table = plan_all(
        models=list(models) or None,
        encodings=list(encodings) or None,
        gpus=list(gpus) or None,
        instance=instance,
        platform=platform,  # type: ignore[arg-type]
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        decode_tokens_per_s=decode_tokens_per_s,
    )
    emit(table, as_json=as_json, render=_render)


def _render(table: PlanTable) -> None:
    from rich.table import Table

    out = console()
    grid = Table(title="gemmaserve plan", show_lines=False, header_style="bold")
    for column, justify in [
        ("model", "left"), ("encoding", "left"), ("gpu", "left"), ("instance", "left"), ("dtype", "left"),
        ("weights GiB", "right"), ("KV tokens", "right"), ("max conc.", "right"), ("host RAM GiB", "right"),
        ("swap GiB", "right"), ("disk GiB", "right"), ("clamp", "center"), ("$/h", "right"), ("$/M out", "right"),
        ("verdict", "left"),
    ]:
        grid.add_column(column, justify=justify)  # type: ignore[arg-type]
    footnotes: list[str] = []
    for row in table.rows:
        style = _VERDICT_STYLE[row.verdict]
        marker = ""
        if row.binding_term:
            if row.binding_term not in footnotes:
                footnotes.append(row.binding_term)
            marker = f" [{footnotes.index(row.binding_term) + 1}]"
        grid.add_row(
            row.model.removeprefix("gemma-4-"),
            row.encoding,
            row.gpu,
            row.instance or "—",
            "fp16" if row.dtype == "float16" else "bf16",
            f"{row.weights_gib:.2f}" + ("" if row.weights_source == "published" else "*"),
            f"{row.kv_cache_tokens:,}" if row.fits else "—",
            f"{row.max_concurrency:.1f}" if row.fits else "—",
            f"{row.host_ram_needed_gib:.1f}",
            "—" if row.swap_needed_gib is None else f"{row.swap_needed_gib:.1f}",
            f"{row.disk_gib:.0f}",
            "yes" if row.needs_turing_clamp else "",
            "—" if row.price_usd_per_hour is None else f"{row.price_usd_per_hour:.3f}",
            "—" if row.usd_per_million_output_tokens is None else f"{row.usd_per_million_output_tokens:.2f}",
            f"[{style}]{row.verdict}[/{style}]{marker}",
        )
    out.print(grid)
    for number, text in enumerate(footnotes, start=1):
        out.print(f"[{number}] {text}", highlight=False)
    out.print(
        f"* estimated from the checkpoint's parts (others: published engine logs). Prices: list prices of "
        f"{table.price_date}, us-east-1. $/M output tokens needs a measured rate: --decode-rate or "
        "`gemmaserve bench`.",
        style="dim",
    )
