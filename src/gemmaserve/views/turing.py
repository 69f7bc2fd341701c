"""Views of ``turing`` results: status, apply/revert, verify, smem (the compile report and the launch search)."""

from __future__ import annotations

from gemmaserve.turing.filepatch import PatchResult, VerifyResult
from gemmaserve.turing.smem import LaunchSearch, SearchPick, SearchRow, SmemReport, SmemResult, SmemRow
from gemmaserve.turing.status import TuringStatus
from gemmaserve.views import summary, view
from gemmaserve.views.page import Line, Page, Row, Style, page, table


def _yes(flag: bool, no: str = "NO") -> str:
    return "yes" if flag else no


@view(TuringStatus)
def status_page(result: TuringStatus) -> Page:
    vllm = (
        f"{result.vllm_version or 'not found'} in {result.python} "
        f"({'supported' if result.vllm_supported else 'NOT supported'}: {result.supported_range})"
    )
    plugin = result.plugin_registered and result.plugin_importable
    facts: list[tuple[str, str, Style | None]] = [
        (
            "GPU",
            f"{result.gpu_name or '?'} (compute {result.capability or 'unknown'}, {result.capability_source})",
            None,
        ),
        ("clamp needed", {True: "yes", False: "no", None: "unknown"}[result.clamp_needed], None),
        ("vLLM", vllm, None if result.vllm_supported else "bad"),
        ("kernel file", result.kernel_file or "-", None),
        ("plugin", "registered" if plugin else "not available", None),
        ("file patch", result.file_patch.value if result.file_patch else "-", None),
        ("active delivery", result.active_delivery.value, None),
        ("engine would start", _yes(result.engine_would_start), "good" if result.ok else "bad"),
    ]
    return page(
        *(Line(f"{key:<19} {value}", style) for key, value, style in facts),
        *(f"  - {reason}" for reason in result.reasons),
    )


@summary(TuringStatus)
def status_summary(result: TuringStatus) -> str:
    """One line for an agent (and the reasons): the structured content has every fact."""
    needed = {True: "needed", False: "not needed", None: "need unknown"}[result.clamp_needed]
    text = (
        f"{result.gpu_name or 'GPU ?'} (compute {result.capability or 'unknown'}): clamp {needed}; "
        f"active delivery {result.active_delivery.value}; vLLM "
        f"{'would' if result.engine_would_start else 'would NOT'} start"
    )
    return text + "".join(f"\n- {reason}" for reason in result.reasons)


@view(VerifyResult)
def verify_page(result: VerifyResult) -> Page:
    recognised = "" if result.recognised else " (source not recognised)"
    return page(
        Line(f"{result.verdict.value}{recognised}: {result.detail}", "good" if result.ok else "bad"),
        f"  {result.target.path}",
    )


@view(PatchResult)
def patch_page(result: PatchResult) -> Page:
    """A dry run's diff first (added lines green, removed red on a terminal), then what was done and where."""
    diff = result.diff.splitlines() if result.dry_run and result.diff else []
    return page(
        *(Line(line, _diff_style(line)) for line in diff),
        f"{result.action}: {result.detail}",
        f"  {result.target.path}",
        f"  backup: {result.backup}" if result.backup else None,
    )


def _diff_style(line: str) -> Style | None:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "good"
    if line.startswith("-"):
        return "bad"
    return None


@summary(PatchResult)
def patch_summary(result: PatchResult) -> str:
    """What was done first (an agent reads the first line), then a dry run's diff."""
    text = f"{result.action}: {result.detail} ({result.target.path})"
    if result.backup:
        text += f"; backup {result.backup}"
    if result.dry_run and result.diff:
        text += "\n" + result.diff
    return text


#: Column heads of a layer geometry: head size, query heads, query heads per KV head, sliding window.
GEOMETRY = ["head>", "heads>", "q/kv>", "window>"]


def _row(launch: list[object], row: SearchRow | SmemRow, style: Style | None, *after: str) -> Row:
    """A compiled launch's row: its geometry, ``launch``'s cells, then whether it fits, registers and spills
    (``?`` where ptxas did not say)."""
    spill = "?" if row.spill_store_bytes is None else f"{row.spill_store_bytes}/{row.spill_load_bytes}"
    figures = [_yes(row.fits), "?" if row.registers is None else row.registers, spill]
    geometry = [row.head_size, row.num_query_heads, row.num_queries_per_kv, row.sliding_window or "global"]
    return Row(tuple(str(cell) for cell in (*geometry, *launch, *figures, *after)), style)


@view(SmemReport)
def smem_page(report: SmemReport) -> Page:
    rows = [
        _row(
            [row.phase, row.layout, row.variant, row.tile_size, row.num_warps, row.smem_bytes, row.smem_limit_bytes],
            row,
            None if row.fits else "bad",
        )
        for row in report.rows
    ]
    columns = [*GEOMETRY, "phase", "grid", "variant", "tile>", "warps>", "smem B>", "limit B>", "fits", "regs>"]
    return page(
        f"{report.vllm_file}  (triton {report.triton_version}, {report.arch})",
        table([*columns, "spill st/ld B>"], rows),
        Line(
            f"stock fits: {_yes(report.stock_fits)}; clamped fits: {_yes(report.clamped_fits)}; "
            f"clamp changes the launch: {_yes(report.clamp_changes_launch, 'no')}",
            "good" if report.clamped_fits else "bad",
        ),
    )


@view(LaunchSearch)
def search_page(found: LaunchSearch) -> Page:
    rows = [
        _row(
            [row.layout, row.tile_size, row.num_warps, row.num_stages, row.smem_bytes],
            row,
            "bold" if row.chosen else None,
            " ".join(mark for mark, on in (("stock", row.stock), ("<- choice", row.chosen)) if on),
        )
        for row in found.rows
    ]
    columns = [*GEOMETRY, "grid", "tile>", "warps>", "stages>", "smem B>", "fits", "regs>", "spill st/ld B>", "pick"]
    return page(
        f"{found.vllm_file}  (triton {found.triton_version}, {found.arch}, limit {found.smem_limit_bytes:,} B)",
        table(columns, rows),
        *(_pick_line(pick) for pick in found.picks),
    )


def _pick_line(pick: SearchPick) -> Line:
    where = (
        f"head {pick.head_size} {pick.layout}, {pick.num_query_heads} query heads, "
        f"{pick.num_queries_per_kv} per KV head"
        + (f", window {pick.sliding_window}" if pick.sliding_window else "")
        + f" ({', '.join(pick.models) or 'no Gemma 4 model'})"
    )
    if pick.picked is None:
        chosen = "none fits"
    elif pick.picked == pick.stock:
        chosen = f"vLLM's launch fits, kept: tile {pick.stock.tile_size}, {pick.stock.num_warps} warps"
    else:
        chosen = f"tile {pick.picked.tile_size}, {pick.picked.num_warps} warps"
    cost = "" if pick.picked_spill_bytes is None else f" ({pick.picked_spill_bytes} B spilled per thread)"
    stages = (
        f"; same figures at stages {pick.stages_checked}: {_yes(pick.stages_independent)}"
        if pick.stages_checked
        else ""
    )
    return Line(
        f"{where}: {chosen}{cost}; rule launches tile {pick.rule.tile_size}, {pick.rule.num_warps} warps: "
        f"{'agrees' if pick.rule_agrees else 'DIFFERS'}{stages}",
        None if pick.rule_agrees and pick.picked is not None else "bad",
    )


@view(SmemResult)
def smem_result_page(result: SmemResult) -> Page:
    """:class:`SmemResult` only describes the MCP tool's two shapes as one schema (the tool returns a
    :class:`SmemReport` or a :class:`LaunchSearch`): drawn as the shape its fields hold."""
    searched = [row for row in result.rows if isinstance(row, SearchRow)]
    if (
        len(searched) == len(result.rows)
        and result.picks is not None
        and result.rule_agrees is not None
        and result.smem_limit_bytes is not None
    ):
        return search_page(LaunchSearch.model_validate({**dict(result), "rows": searched}))
    compiled = [row for row in result.rows if isinstance(row, SmemRow)]
    verdicts = (result.stock_fits, result.clamped_fits, result.clamp_changes_launch)
    if len(compiled) == len(result.rows) and None not in verdicts:
        return smem_page(SmemReport.model_validate({**dict(result), "rows": compiled}))
    return page(
        f"{result.vllm_file}  (triton {result.triton_version}, {result.arch})",
        Line("neither a compile report nor a launch search: fields of both, or of neither, are set", "bad"),
    )
