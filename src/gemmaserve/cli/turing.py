"""``gemmaserve turing status|apply|verify|revert|smem``: thin front end over gemmaserve.turing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gemmaserve.cli.output import emit, json_option

_F = TypeVar("_F", bound=Callable[..., Any])

_target_options = [
    click.option(
        "--file",
        "file",
        type=click.Path(dir_okay=False),
        default=None,
        help="The triton_unified_attention.py to act on.",
    ),
    click.option(
        "--python",
        "python",
        default=None,
        help="Interpreter whose installed vLLM to act on (default: the one running gemmaserve).",
    ),
]


def _with_target(function: _F) -> _F:
    for option in reversed(_target_options):
        function = option(function)
    return function


@click.group(name="turing")
def cli() -> None:
    """The Turing (T4, sm_75) shared-memory clamp for vLLM's Triton attention kernel."""


@cli.command()
@_with_target
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
@json_option
def apply(file: str | None, python: str | None, dry_run: bool, as_json: bool) -> None:
    """Insert the clamp into the installed vLLM file (once; backup beside it)."""
    from gemmaserve.turing import filepatch

    result = filepatch.apply(filepatch.resolve_target(file=file, python=python), dry_run=dry_run)
    emit(result, as_json=as_json, render=_render_patch)


@cli.command()
@_with_target
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
@json_option
def revert(file: str | None, python: str | None, dry_run: bool, as_json: bool) -> None:
    """Restore the vLLM file byte for byte."""
    from gemmaserve.turing import filepatch

    result = filepatch.revert(filepatch.resolve_target(file=file, python=python), dry_run=dry_run)
    emit(result, as_json=as_json, render=_render_patch)


@cli.command()
@_with_target
@json_option
def verify(file: str | None, python: str | None, as_json: bool) -> None:
    """Is the file patch present and intact? Exit 0 only when it is."""
    from gemmaserve.turing import filepatch

    result = filepatch.verify(filepatch.resolve_target(file=file, python=python))
    emit(
        result,
        as_json=as_json,
        render=lambda r: click.echo(
            f"{r.verdict.value}{'' if r.recognised else ' (source not recognised)'}: {r.detail}\n  {r.target.path}"
        ),
    )
    if not result.ok:
        raise click.exceptions.Exit(1)


def _render_patch(result) -> None:  # type: ignore[no-untyped-def]
    if result.diff and result.dry_run:
        click.echo(result.diff, nl=False)
    click.echo(f"{result.action}: {result.detail}\n  {result.target.path}")
    if result.backup:
        click.echo(f"  backup: {result.backup}")


@cli.command()
@click.option("--python", "python", default=None, help="Interpreter that runs vLLM (default: this one).")
@click.option(
    "--capability",
    default=None,
    help="State the GPU's compute capability (7.5 or sm_75) instead of "
    "asking nvidia-smi: for image builds with no GPU.",
)
@json_option
def status(python: str | None, capability: str | None, as_json: bool) -> None:
    """Is the clamp needed here, which delivery is active, would vLLM start? Exit 0 only if it would."""
    from gemmaserve.turing.status import turing_status

    result = turing_status(python, capability=capability)
    emit(result, as_json=as_json, render=_render_status)
    if not result.engine_would_start:
        raise click.exceptions.Exit(1)


def _render_status(result) -> None:  # type: ignore[no-untyped-def]
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
@click.option(
    "--vllm-file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="The triton_unified_attention.py to compile (default: the installed vLLM's).",
)
@click.option("--python", "python", default=None, help="Interpreter whose vLLM to find when --vllm-file is not given.")
@click.option("--arch", default="sm_75", show_default=True, help="Target architecture, e.g. sm_75, sm_89.")
@click.option("--head-size", "head_sizes", type=int, multiple=True, help="Head size(s); default 256 and 512.")
@click.option("--num-warps", type=int, default=4, show_default=True, help="The stock launch's num_warps.")
@click.option(
    "--search",
    is_flag=True,
    help="Compile every candidate (tile, num_warps) per head size and layout; "
    "show the one that fits and spills least beside the rule's launch.",
)
@json_option
def smem(
    vllm_file: str | None,
    python: str | None,
    arch: str,
    head_sizes: tuple[int, ...],
    num_warps: int,
    search: bool,
    as_json: bool,
) -> None:
    """Compile the real kernel for ARCH (no GPU needed): shared memory, registers, spills, stock vs clamped."""
    from gemmaserve.turing.filepatch import resolve_target
    from gemmaserve.turing.smem import compile_report, search_launches

    path = vllm_file or resolve_target(file=None, python=python).path
    if search:
        found = search_launches(vllm_file=path, arch=arch, head_sizes=head_sizes or (256, 512))
        emit(found, as_json=as_json, render=_render_search)
        return
    report = compile_report(vllm_file=path, arch=arch, head_sizes=head_sizes or (256, 512), num_warps=num_warps)
    emit(report, as_json=as_json, render=_render_smem)


def _render_search(found) -> None:  # type: ignore[no-untyped-def]
    click.echo(f"{found.vllm_file}  (triton {found.triton_version}, {found.arch}, limit {found.smem_limit_bytes:,} B)")
    click.echo(
        f"{'head':>4} {'grid':<4} {'tile':>4} {'warps':>5} {'stages':>6} {'smem B':>7} {'fits':<4} {'regs':>4} "
        f"{'spill st/ld B':>13}  "
    )
    for row in found.rows:
        spill = "?" if row.spill_store_bytes is None else f"{row.spill_store_bytes}/{row.spill_load_bytes}"
        marks = " ".join(m for m, on in (("stock", row.stock), ("<- choice", row.chosen)) if on)
        click.echo(
            f"{row.head_size:>4} {row.layout:<4} {row.tile_size:>4} {row.num_warps:>5} {row.num_stages:>6} "
            f"{row.smem_bytes:>7} {'yes' if row.fits else 'NO':<4} "
            f"{row.registers if row.registers is not None else '?':>4} {spill:>13}  {marks}"
        )
    for pick in found.picks:
        chosen = (
            "none fits"
            if pick.picked is None
            else (f"tile {pick.picked.tile_size}, {pick.picked.num_warps} warps ({pick.picked_spill_bytes} B spilled)")
        )
        click.echo(
            f"head {pick.head_size} {pick.layout}: choice {chosen}; rule launches tile {pick.rule.tile_size}, "
            f"{pick.rule.num_warps} warps: {'agrees' if pick.rule_agrees else 'DIFFERS'}; same figures at "
            f"stages {pick.stages_checked}: {'yes' if pick.stages_independent else 'NO'}"
        )


def _render_smem(report) -> None:  # type: ignore[no-untyped-def]
    click.echo(f"{report.vllm_file}  (triton {report.triton_version}, {report.arch})")
    click.echo(
        f"{'head':>4} {'phase':<7} {'grid':<4} {'variant':<7} {'tile':>4} {'warps':>5} {'smem B':>7} "
        f"{'limit B':>7} {'fits':<4} {'regs':>4} {'spill st/ld B':>13}"
    )
    for row in report.rows:
        spill = "?" if row.spill_store_bytes is None else f"{row.spill_store_bytes}/{row.spill_load_bytes}"
        click.echo(
            f"{row.head_size:>4} {row.phase:<7} {row.layout:<4} {row.variant:<7} {row.tile_size:>4} "
            f"{row.num_warps:>5} {row.smem_bytes:>7} {row.smem_limit_bytes:>7} {'yes' if row.fits else 'NO':<4} "
            f"{row.registers if row.registers is not None else '?':>4} {spill:>13}"
        )
    click.echo(
        f"stock fits: {'yes' if report.stock_fits else 'NO'}; clamped fits: "
        f"{'yes' if report.clamped_fits else 'NO'}; clamp changes the launch: "
        f"{'yes' if report.clamp_changes_launch else 'no'}"
    )
