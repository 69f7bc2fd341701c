"""Views of ``checkpoint`` results: inspect, grid-check, repack, validate."""

from __future__ import annotations

from gemmaserve.checkpoint.gridcheck import GridCheckReport, TensorGridResult
from gemmaserve.checkpoint.inspect import InspectReport
from gemmaserve.checkpoint.repack import RepackReport
from gemmaserve.checkpoint.validate import ValidateReport
from gemmaserve.views import summary, view
from gemmaserve.views.page import Line, Page, Row, Style, Table, page, table

#: How many names of the quantization ignore list ``inspect`` shows (``--json`` has them all).
IGNORE_SHOWN = 8


def size(n: int) -> str:
    """A byte count as people read it: ``97.817 kB``, ``4.912 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3f} {unit}"
    return f"{n} B"


@view(InspectReport)
def inspect_page(report: InspectReport) -> Page:
    rows = [
        (
            part.part,
            size(part.bytes),
            f"{part.share:.1%}",
            ", ".join(f"{label} {size(n)}" for label, n in sorted(part.storage.items(), key=lambda kv: -kv[1])),
            f"{part.parameters:,}",
        )
        for part in report.parts
    ]
    title = f"{report.source}: {report.shards} shard(s), {report.tensors} tensors, {size(report.total_bytes)}"
    q = report.quantization
    quantization = None
    if q is not None:
        more = " …" if len(q.ignore) > IGNORE_SHOWN else ""
        quantization = (
            f"quantization: {q.quant_method} {q.format} {q.scheme or ''} group {q.group_size}; "
            f"ignore ({len(q.ignore)}): {', '.join(q.ignore[:IGNORE_SHOWN])}{more}"
        )
    return page(
        title,
        table(["part", "bytes>", "share>", "stored as", "parameters>"], rows),
        quantization,
        f"bytes read: {report.bytes_fetched:,}",
        *(Line(f"note: {finding}", "warn") for finding in report.findings),
    )


@view(GridCheckReport)
def grid_check_page(report: GridCheckReport) -> Page:
    """The title (both sources, the reference grid), a row per tensor, and the verdict with both measures.

    Tensor names are written whole: a narrow terminal folds them (never cuts them to ``model.l…``), so the
    layer and module stay readable; plain output keeps each row on one line for ``grep``.
    """
    size_ = report.reference_group_size
    grouping = f"groups of {size_}" if size_ else "group sizes per tensor"
    widened = sorted(
        {
            f"; {t.reference_grid_dtype.lower()} values stored as {t.reference_dtype}"
            for t in report.tensors
            if t.reference_dtype != t.reference_grid_dtype
        }
    )
    title = (
        f"{report.build} vs {report.reference} (reference grid: {grouping}, {report.reference_group_size_source}"
        f"{''.join(widened)})"
    )
    columns = [
        "tensor",
        "format",
        "groups>",
        "values>",
        "bit-identical (groups)>",
        "off >= 1 level>",
        "nearest level differs>",
        "|diff| max / mean>",
    ]
    if report.values_not_finite:
        columns.append("NaN/inf>")
    rows = [_tensor_row(t, report.values_not_finite > 0) for t in report.tensors]
    return page(title, table(columns, rows), _verdict(report))


def _tensor_row(t: TensorGridResult, with_not_finite: bool) -> Row:
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
    if with_not_finite:
        cells.append(f"{t.values_not_finite:,}")
    bad = t.values_not_finite > 0 or t.values_off_by_a_level_or_more > 0
    return Row(tuple(cells), "bad" if bad else None)


def _verdict(report: GridCheckReport) -> Line:
    if report.verdict == "invalid":
        bad = ", ".join(f"{t.tensor} ({t.values_not_finite:,})" for t in report.tensors if t.values_not_finite)
        return Line(
            f"verdict: invalid: {report.values_not_finite:,} of {report.values:,} values are NaN or infinite in the "
            f"build or the reference, in {bad}; nothing is measured on them",
            "bad",
        )
    return Line(f"verdict: {report.verdict}: {report.measures()}", "good" if report.ok else "bad")


def _diff(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


@summary(GridCheckReport)
def grid_check_summary(report: GridCheckReport) -> str:
    """The verdict with both measures (the structured content has every tensor)."""
    text = f"{report.verdict}: {report.measures()}"
    if report.values_not_finite:
        text += f"; {report.values_not_finite:,} values NaN or infinite (nothing measured on them)"
    return text


@view(RepackReport)
def repack_page(report: RepackReport) -> Page:
    return page(
        f"wrote {report.output} ({size(report.output_bytes)}): {report.tensors_quantized} tensors packed, "
        f"{report.tensors_kept} kept, {report.tensors_dropped} dropped; "
        f"{report.shards_written} shard(s) written, {report.shards_linked} hard-linked",
        f"bit-exact: {report.values_bit_exact:,} of {report.values_quantized:,} values; "
        f"{report.groups_peak_not_at_8:,} of {report.groups:,} groups have their peak off level -8",
        f"ignore ({len(report.ignore)}): {', '.join(report.ignore)}",
        f"manifest: {report.manifest}",
    )


@view(ValidateReport)
def validate_page(report: ValidateReport) -> Page:
    blocks: list[Line | Table] = [
        Line(
            f"{report.source}: {report.tensors} tensors, {'ok' if report.ok else 'problems found'}",
            "good" if report.ok else "bad",
        )
    ]
    for finding in report.findings:
        style: Style = "bad" if finding.blocks else "warn"
        blocks.append(Line(f"{finding.status.value}: [{finding.check}] {finding.detail}", style))
        if finding.fix:
            blocks.append(Line(f"  fix: {finding.fix}"))
    return page(*blocks)
