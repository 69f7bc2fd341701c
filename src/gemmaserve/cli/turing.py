"""``gemmaserve turing status|apply|verify|revert|smem``: thin front end over gemmaserve.turing.

Options come from the request models in :mod:`gemmaserve.turing.requests`; apply and revert ask first
(``--yes`` off a terminal), their dry runs do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import emit, json_option
from gemmaserve.turing.requests import (
    ApplyRequest,
    RevertRequest,
    SmemRequest,
    TuringStatusRequest,
    VerifyRequest,
)

if TYPE_CHECKING:
    from gemmaserve.progress import ProgressEvent
    from gemmaserve.turing.filepatch import PatchResult
    from gemmaserve.turing.smem import LaunchSearch, SearchRow, SmemReport, SmemRow
    from gemmaserve.turing.status import TuringStatus


@click.group(name="turing")
def cli() -> None:
    """The Turing (T4, sm_75) shared-memory clamp for vLLM's Triton attention kernel."""


@cli.command()
@request_options(ApplyRequest)
@json_option
def apply(request: ApplyRequest, as_json: bool) -> None:
    """Insert the clamp into the installed vLLM file (once; backup beside it).

    Asks first (or needs --yes off a terminal); --dry-run shows the diff and needs neither.

    \b
    Examples:
      gemmaserve turing apply --dry-run
      gemmaserve turing apply --yes
      gemmaserve turing apply --python /opt/vllm/bin/python --yes
    """
    from gemmaserve.turing.filepatch import apply_clamp

    emit(apply_clamp(request), as_json=as_json, render=_render_patch)


@cli.command()
@request_options(RevertRequest)
@json_option
def revert(request: RevertRequest, as_json: bool) -> None:
    """Restore the vLLM file byte for byte.

    Asks first (or needs --yes off a terminal); --dry-run shows the diff and needs neither.

    \b
    Examples:
      gemmaserve turing revert --dry-run
      gemmaserve turing revert --yes
      gemmaserve turing revert --file ./triton_unified_attention.py --yes
    """
    from gemmaserve.turing.filepatch import revert_clamp

    emit(revert_clamp(request), as_json=as_json, render=_render_patch)


@cli.command()
@request_options(VerifyRequest)
@json_option
def verify(request: VerifyRequest, as_json: bool) -> None:
    """Is the file patch present and intact? Exit 0 only when it is.

    \b
    Examples:
      gemmaserve turing verify
      gemmaserve turing verify --python /opt/vllm/bin/python --json
    """
    from gemmaserve.turing.filepatch import verify_clamp

    result = verify_clamp(request)
    emit(
        result,
        as_json=as_json,
        render=lambda r: click.echo(
            f"{r.verdict.value}{'' if r.recognised else ' (source not recognised)'}: {r.detail}\n  {r.target.path}"
        ),
    )
    if not result.ok:
        raise click.exceptions.Exit(1)


def _render_patch(result: PatchResult) -> None:
    if result.diff and result.dry_run:
        click.echo(result.diff, nl=False)
    click.echo(f"{result.action}: {result.detail}\n  {result.target.path}")
    if result.backup:
        click.echo(f"  backup: {result.backup}")


@cli.command()
@request_options(TuringStatusRequest)
@json_option
def status(request: TuringStatusRequest, as_json: bool) -> None:
    """Is the clamp needed here, which delivery is active, would vLLM start? Exit 0 only if it would.

    \b
    Examples:
      gemmaserve turing status
      gemmaserve turing status --capability 7.5 --python /opt/vllm/bin/python --json
    """
    from gemmaserve.turing.status import check_status

    result = check_status(request)
    emit(result, as_json=as_json, render=_render_status)
    if not result.engine_would_start:
        raise click.exceptions.Exit(1)


def _render_status(result: TuringStatus) -> None:
    rows = [
        ("GPU", f"{result.gpu_name or '?'} (compute {result.capability or 'unknown'}, {result.capability_source})"),
        ("clamp needed", {True: "yes", False: "no", None: "unknown"}[result.clamp_needed]),
        (
            "vLLM",
            (
                f"{result.vllm_version or 'not found'} in {result.python} "
                f"({'supported' if result.vllm_supported else 'NOT supported'}: {result.supported_range})"
            ),
        ),
        ("kernel file", result.kernel_file or "-"),
        ("plugin", "registered" if result.plugin_registered and result.plugin_importable else "not available"),
        ("file patch", result.file_patch.value if result.file_patch else "-"),
        ("active delivery", result.active_delivery.value),
        ("engine would start", "yes" if result.engine_would_start else "NO"),
    ]
    for key, value in rows:
        click.echo(f"{key:<19} {value}")
    for reason in result.reasons:
        click.echo(f"  - {reason}")


@cli.command()
@request_options(SmemRequest)
@json_option
def smem(request: SmemRequest, as_json: bool) -> None:
    """Compile the real kernel for ARCH (no GPU needed): shared memory, registers, spills, stock vs clamped.

    Needs the kernel extra (pip install "gemmaserve[kernel]"), and vLLM's kernel file: the installed
    vLLM's, or any release's copy given with --vllm-file (no vLLM install needed).

    \b
    Examples:
      gemmaserve turing smem
      gemmaserve turing smem --vllm-file ./triton_unified_attention.py --head-size 512
      gemmaserve turing smem --arch sm_89 --json
      gemmaserve turing smem --search --vllm-file ./triton_unified_attention.py
    """
    from gemmaserve.turing.smem import LaunchSearch, compile_smem

    result = compile_smem(request, progress=_progress)
    emit(result, as_json=as_json, render=_render_search if isinstance(result, LaunchSearch) else _render_smem)


def _progress(event: ProgressEvent) -> None:
    # One line per compile, with the launches left and an ETA: a cold run compiles for a minute or more.
    click.echo(event.message, err=True)


#: Column heads of a layer geometry: head size, query heads, query heads per KV head, sliding window.
_GEOMETRY_HEADER = f"{'head':>4} {'heads':>5} {'q/kv':>4} {'window':>6}"


def _geometry(row: SearchRow | SmemRow) -> str:
    window = row.sliding_window or "global"
    return f"{row.head_size:>4} {row.num_query_heads:>5} {row.num_queries_per_kv:>4} {window:>6}"


def _render_search(found: LaunchSearch) -> None:
    click.echo(f"{found.vllm_file}  (triton {found.triton_version}, {found.arch}, limit {found.smem_limit_bytes:,} B)")
    click.echo(
        f"{_GEOMETRY_HEADER} {'grid':<4} {'tile':>4} {'warps':>5} {'stages':>6} {'smem B':>7} "
        f"{'fits':<4} {'regs':>4} {'spill st/ld B':>13}"
    )
    for row in found.rows:
        spill = "?" if row.spill_store_bytes is None else f"{row.spill_store_bytes}/{row.spill_load_bytes}"
        marks = " ".join(m for m, on in (("stock", row.stock), ("<- choice", row.chosen)) if on)
        click.echo(
            f"{_geometry(row)} {row.layout:<4} "
            f"{row.tile_size:>4} {row.num_warps:>5} {row.num_stages:>6} {row.smem_bytes:>7} "
            f"{'yes' if row.fits else 'NO':<4} {row.registers if row.registers is not None else '?':>4} {spill:>13}  "
            f"{marks}".rstrip()
        )
    for pick in found.picks:
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
            f"; same figures at stages {pick.stages_checked}: {'yes' if pick.stages_independent else 'NO'}"
            if pick.stages_checked
            else ""
        )
        click.echo(
            f"{where}: {chosen}{cost}; rule launches tile {pick.rule.tile_size}, {pick.rule.num_warps} warps: "
            f"{'agrees' if pick.rule_agrees else 'DIFFERS'}{stages}"
        )


def _render_smem(report: SmemReport) -> None:
    click.echo(f"{report.vllm_file}  (triton {report.triton_version}, {report.arch})")
    click.echo(
        f"{_GEOMETRY_HEADER} {'phase':<7} {'grid':<4} {'variant':<7} {'tile':>4} {'warps':>5} "
        f"{'smem B':>7} {'limit B':>7} {'fits':<4} {'regs':>4} {'spill st/ld B':>13}"
    )
    for row in report.rows:
        spill = "?" if row.spill_store_bytes is None else f"{row.spill_store_bytes}/{row.spill_load_bytes}"
        click.echo(
            f"{_geometry(row)} {row.phase:<7} {row.layout:<4} "
            f"{row.variant:<7} {row.tile_size:>4} {row.num_warps:>5} {row.smem_bytes:>7} {row.smem_limit_bytes:>7} "
            f"{'yes' if row.fits else 'NO':<4} {row.registers if row.registers is not None else '?':>4} {spill:>13}"
        )
    click.echo(
        f"stock fits: {'yes' if report.stock_fits else 'NO'}; clamped fits: "
        f"{'yes' if report.clamped_fits else 'NO'}; clamp changes the launch: "
        f"{'yes' if report.clamp_changes_launch else 'no'}"
    )
