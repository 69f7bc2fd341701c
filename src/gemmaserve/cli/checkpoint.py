"""``gemmaserve checkpoint inspect|grid-check|repack|validate``: argument parsing and rendering only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from gemmaserve.cli.output import console, emit, err_console, json_option


@click.group(name="checkpoint")
def cli() -> None:
    """Inspect, grid-check, repack and validate Gemma 4 checkpoints."""


@contextmanager
def _progress(label: str) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal; no callback otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TransferSpeedColumn,
    )

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        console=err_console(), transient=True,
    ) as bar:  # fmt: skip
        tasks: dict[str, Any] = {}

        def update(tensor: str, done: int, total: int) -> None:
            if tensor not in tasks:
                tasks[tensor] = bar.add_task(f"{label} {tensor}", total=total)
            bar.update(tasks[tensor], completed=done)

        yield update


def _gb(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3f} {unit}"
    return f"{n} B"


@cli.command(name="inspect")
@click.argument("source")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@json_option
def inspect_cmd(source: str, revision: str | None, as_json: bool) -> None:
    """What SOURCE holds, by part, from safetensors headers alone (a directory, a file, or a hub repo id)."""
    from gemmaserve.checkpoint import inspect_checkpoint

    emit(inspect_checkpoint(source, revision=revision), as_json=as_json, render=_render_inspect)


def _render_inspect(report: Any) -> None:
    from rich.table import Table

    table = Table(
        title=f"{report.source}: {report.shards} shard(s), {report.tensors} tensors, {_gb(report.total_bytes)}"
    )
    for column in ("part", "bytes", "share", "stored as", "parameters"):
        table.add_column(column, justify="left" if column in ("part", "stored as") else "right")
    for part in report.parts:
        stored = ", ".join(f"{k} {_gb(v)}" for k, v in sorted(part.storage.items(), key=lambda kv: -kv[1]))
        table.add_row(part.part, _gb(part.bytes), f"{part.share:.1%}", stored, f"{part.parameters:,}")
    out = console()
    out.print(table)
    q = report.quantization
    if q is not None:
        out.print(f"quantization: {q.quant_method} {q.format} {q.scheme or ''} group {q.group_size}; "
                  f"ignore ({len(q.ignore)}): {', '.join(q.ignore[:8])}{' …' if len(q.ignore) > 8 else ''}")  # fmt: skip
    out.print(f"bytes read: {report.bytes_fetched:,}")
    for finding in report.findings:
        out.print(f"note: {finding}")


def _group_size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    if value is None or value == "channel":
        return value
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter("expected a positive number of weights per group, or 'channel'.")
    return int(value)


@cli.command(name="grid-check")
@click.argument("build")
@click.option("--reference", required=True, help="The bf16 -qat-q4_0-unquantized checkpoint (path or hub repo id).")
@click.option(
    "--tensor", default=None, help="One module or tensor name, e.g. model.language_model.layers.0.self_attn.q_proj."
)
@click.option("--layers", default=None, help="Decoder layers to check, e.g. 0,3-5 (default: every 4-bit tensor).")
@click.option(
    "--reference-group-size", default=None, callback=_group_size_option, metavar="N|channel",
    help="The reference grid's group size (default: detected from its values; 32 for Google's q4_0 exports).",
)  # fmt: skip
@json_option
def grid_check_cmd(
    build: str,
    reference: str,
    tensor: str | None,
    layers: str | None,
    reference_group_size: int | str | None,
    as_json: bool,
) -> None:
    """Whether BUILD's 4-bit weights are Google's QAT values; exits 1 when any is off by a level of the reference's grid.

    Also exits 1, with no verdict, when the reference sits on no 4-bit grid.
    """
    from gemmaserve.checkpoint import grid_check

    with _progress("checking") as progress:
        report = grid_check(
            build, reference, tensor=tensor, layers=layers, reference_group_size=reference_group_size, progress=progress
        )
    emit(report, as_json=as_json, render=_render_grid)
    if report.values_off_by_a_level_or_more:
        sys.exit(1)


def _render_grid(report: Any) -> None:
    from rich.table import Table

    size = report.reference_group_size
    grouping = f"groups of {size}" if size else "group sizes per tensor"
    table = Table(
        title=f"{report.build} vs {report.reference} (reference grid: {grouping}, {report.reference_group_size_source})"
    )
    columns = (
        "tensor",
        "format",
        "groups",
        "values",
        "bit-identical",
        "groups identical",
        "off >= 1 level",
        "max |diff|",
        "mean |diff|",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("tensor", "format") else "right")
    for t in report.tensors:
        build_groups = "-" if t.build_group_size is None else str(t.build_group_size)
        table.add_row(t.tensor, t.build_format, f"{build_groups} / {t.reference_group_size}", f"{t.values:,}", f"{t.values_bit_identical:,}",
                      f"{t.groups_bit_identical:,}/{t.groups:,}",
                      f"{t.values_off_by_a_level_or_more:,} ({t.share_off_by_a_level_or_more:.1%})",
                      f"{t.max_abs_diff:.3g}", f"{t.mean_abs_diff:.3g}")  # fmt: skip
    out = console()
    out.print(table)
    out.print(f"verdict: {report.verdict}: {report.values_off_by_a_level_or_more:,} of {report.values:,} values "
              f"({report.share_off_by_a_level_or_more:.1%}) off by one reference-grid level or more; "
              f"{report.values_bit_identical:,} bit-identical")  # fmt: skip


@cli.command(name="repack")
@click.argument("src")
@click.argument("out")
@click.option("--text-only", is_flag=True, help="Drop the vision and audio towers; write a text-only causal LM config.")
@click.option("--int4-embeddings", is_flag=True, help="Also pack the per-layer-embedding table on the same grid.")
@json_option
def repack_cmd(src: str, out: str, text_only: bool, int4_embeddings: bool, as_json: bool) -> None:
    """Repack a -qat-q4_0-unquantized SRC into compressed-tensors W4A16 at OUT, losslessly, or write nothing."""
    from gemmaserve.checkpoint import repack_checkpoint

    with _progress("packing") as progress:
        report = repack_checkpoint(src, out, text_only=text_only, int4_embeddings=int4_embeddings, progress=progress)
    emit(report, as_json=as_json, render=_render_repack)


def _render_repack(report: Any) -> None:
    out = console()
    out.print(f"wrote {report.output} ({_gb(report.output_bytes)}): {report.tensors_quantized} tensors packed, "
              f"{report.tensors_kept} kept, {report.tensors_dropped} dropped; "
              f"{report.shards_written} shard(s) written, {report.shards_linked} hard-linked")  # fmt: skip
    out.print(f"bit-exact: {report.values_bit_exact:,} of {report.values_quantized:,} values; "
              f"{report.groups_peak_not_at_8:,} of {report.groups:,} groups have their peak off level -8")  # fmt: skip
    out.print(f"ignore ({len(report.ignore)}): {', '.join(report.ignore)}")
    out.print(f"manifest: {report.manifest}")


@cli.command(name="validate")
@click.argument("source")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@json_option
def validate_cmd(source: str, revision: str | None, as_json: bool) -> None:
    """Check SOURCE's config against its shards before a deploy; exits 1 on any error finding."""
    from gemmaserve.checkpoint import validate_checkpoint

    report = validate_checkpoint(source, revision=revision)
    emit(report, as_json=as_json, render=_render_validate)
    if not report.ok:
        sys.exit(1)


def _render_validate(report: Any) -> None:
    # Plain echo, not rich: findings quote names and brackets that rich would read as markup.
    click.echo(f"{report.source}: {report.tensors} tensors, {'ok' if report.ok else 'problems found'}")
    for f in report.findings:
        click.echo(f"{f.level}: [{f.check}] {f.message}\n  fix: {f.fix}")
