"""``gemmaserve checkpoint inspect|grid-check|repack|validate``: argument parsing and rendering only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import click

from gemmaserve.checkpoint.requests import GridCheckRequest, InspectRequest, RepackRequest, ValidateRequest
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import console, emit, err_console, json_option
from gemmaserve.progress import ProgressCallback, ProgressEvent


@click.group(name="checkpoint")
def cli() -> None:
    """Inspect, grid-check, repack and validate Gemma 4 checkpoints."""


@contextmanager
def _progress() -> Iterator[ProgressCallback | None]:
    """A rich progress bar per tensor on stderr when it is a terminal; no callback otherwise."""
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

        def update(event: ProgressEvent) -> None:
            # One bar per tensor: the message names it ("packing model.…q_proj.weight").
            if event.message not in tasks:
                tasks[event.message] = bar.add_task(event.message, total=event.total)
            bar.update(tasks[event.message], completed=event.done)

        yield update


def _gb(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3f} {unit}"
    return f"{n} B"


@cli.command(name="inspect")
@request_options(InspectRequest)
@json_option
def inspect_cmd(request: InspectRequest, as_json: bool) -> None:
    """What SOURCE holds, by part, from safetensors headers alone (a directory, a file, or a hub repo id).

    \b
    Examples:
      gemmaserve checkpoint inspect google/gemma-4-E2B-it-qat-w4a16-ct
      gemmaserve checkpoint inspect ./e2b-w4a16 --json
      gemmaserve checkpoint inspect google/gemma-4-E2B-it --revision main
    """
    from gemmaserve.checkpoint import checkpoint_inspect

    emit(checkpoint_inspect(request), as_json=as_json, render=_render_inspect)


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


@cli.command(name="grid-check")
@request_options(GridCheckRequest)
@json_option
def grid_check_cmd(request: GridCheckRequest, as_json: bool) -> None:
    """Whether BUILD's 4-bit weights are Google's QAT values; exits 1 when any is off by a level of the reference's grid.

    Also exits 1, with no verdict, when the reference sits on no 4-bit grid.

    \b
    Examples:
      gemmaserve checkpoint grid-check ./w4a16 --reference google/gemma-4-E2B-it-qat-q4_0-unquantized
      gemmaserve checkpoint grid-check ./e2b-awq --reference ./e2b-qat-q4_0-unquantized --layers 0,3-5
      gemmaserve checkpoint grid-check ./e2b-awq --reference ./e2b-qat-q4_0-unquantized --json \\
        --tensor model.language_model.layers.0.self_attn.q_proj --reference-group-size 32
    """
    from gemmaserve.checkpoint import checkpoint_grid_check

    with _progress() as progress:
        report = checkpoint_grid_check(request, progress=progress)
    emit(report, as_json=as_json, render=_render_grid)
    if report.values_off_by_a_level_or_more or report.verdict == "invalid":
        raise click.exceptions.Exit(1)


def _render_grid(report: Any) -> None:
    from rich.table import Table

    size = report.reference_group_size
    grouping = f"groups of {size}" if size else "group sizes per tensor"
    widened = sorted(
        {
            f"; {t.reference_grid_dtype.lower()} values stored as {t.reference_dtype}"
            for t in report.tensors
            if t.reference_dtype != t.reference_grid_dtype
        }
    )
    table = Table(
        title=f"{report.build} vs {report.reference} (reference grid: {grouping}, {report.reference_group_size_source}"
        f"{''.join(widened)})"
    )
    columns: tuple[str, ...] = (
        "tensor",
        "format",
        "groups",
        "values",
        "bit-identical (groups)",
        "off >= 1 level",
        "nearest level differs",
        "|diff| max / mean",
    )
    if report.values_not_finite:
        columns = (*columns, "NaN/inf")
    rows = []
    for t in report.tensors:
        build_groups = "-" if t.build_group_size is None else str(t.build_group_size)
        cells = [
            t.tensor,
            t.build_format,
            f"{build_groups} / {t.reference_group_size}",
            f"{t.values:,}",
            f"{t.values_bit_identical:,} ({t.groups_bit_identical:,}/{t.groups:,})",
            f"{t.values_off_by_a_level_or_more:,} ({t.share_off_by_a_level_or_more:.1%})",
            f"{t.values_nearest_level_differs:,} ({t.share_nearest_level_differs:.1%})",
            f"{_diff(t.max_abs_diff)} / {_diff(t.mean_abs_diff)}",
        ]
        if report.values_not_finite:
            cells.append(f"{t.values_not_finite:,}")
        rows.append(cells)
    tensor_width = _first_column_width(columns, rows, console().width)
    for column in columns:
        # A narrow terminal wraps the other columns at their spaces and folds the tensor name in what is left,
        # instead of cutting it to "model.l…": the layer and module stay readable, and no count is lost.
        justify: Literal["left", "right"] = "left" if column in ("tensor", "format") else "right"
        width = tensor_width if column == "tensor" else None
        table.add_column(column, justify=justify, overflow="fold", width=width)
    for cells in rows:
        table.add_row(*cells)
    out = console()
    out.print(table)
    if report.verdict == "invalid":
        bad = [t for t in report.tensors if t.values_not_finite]
        out.print(
            f"verdict: invalid: {report.values_not_finite:,} of {report.values:,} values are NaN or infinite in the "
            f"build or the reference, in {', '.join(f'{t.tensor} ({t.values_not_finite:,})' for t in bad)}; "
            "nothing is measured on them"
        )
        return
    out.print(f"verdict: {report.verdict}: {report.measures()}")


def _first_column_width(columns: tuple[str, ...], rows: list[list[str]], console_width: int) -> int | None:
    """The first column's width when the table is wider than the console: what the others leave when their cells
    wrap at spaces (headers may fold), at least 16; None (natural widths) when it fits."""
    texts = [list(column) for column in zip(columns, *rows, strict=True)]
    borders = 3 * len(columns) + 1
    if not rows or sum(max(len(text) for text in column) for column in texts) + borders <= console_width:
        return None
    others = sum(max(len(word) for text in column[1:] for word in text.split()) for column in texts[1:])
    longest = max(len(text) for text in texts[0])
    return min(longest, max(16, console_width - borders - others))


def _diff(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


@cli.command(name="repack")
@request_options(RepackRequest)
@json_option
def repack_cmd(request: RepackRequest, as_json: bool) -> None:
    """Repack a -qat-q4_0-unquantized SRC into compressed-tensors W4A16 at OUT, losslessly, or write nothing.

    OUT must not exist: the repack is written beside it and moved into place only when complete.

    \b
    Examples:
      gemmaserve checkpoint repack ./e2b-qat-q4_0-unquantized ./e2b-w4a16
      gemmaserve checkpoint repack ./e2b-qat-q4_0-unquantized ./e2b-text-w4a16 --text-only --json
    """
    from gemmaserve.checkpoint import checkpoint_repack

    with _progress() as progress:
        report = checkpoint_repack(request, progress=progress)
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
@request_options(ValidateRequest)
@json_option
def validate_cmd(request: ValidateRequest, as_json: bool) -> None:
    """Check SOURCE's config against its shards before a deploy; exits 1 on any failed finding.

    \b
    Examples:
      gemmaserve checkpoint validate ./e2b-w4a16
      gemmaserve checkpoint validate google/gemma-4-E2B-it-qat-w4a16-ct --json
    """
    from gemmaserve.checkpoint import checkpoint_validate

    report = checkpoint_validate(request)
    emit(report, as_json=as_json, render=_render_validate)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _render_validate(report: Any) -> None:
    # Plain echo, not rich: findings quote names and brackets that rich would read as markup.
    click.echo(f"{report.source}: {report.tensors} tensors, {'ok' if report.ok else 'problems found'}")
    for f in report.findings:
        click.echo(f"{f.status.value}: [{f.check}] {f.detail}\n  fix: {f.fix}")
