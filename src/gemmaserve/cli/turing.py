"""``gemmaserve turing status|apply|verify|revert|smem``: thin front end over gemmaserve.turing."""

from __future__ import annotations

import click

from gemmaserve.cli.output import emit, json_option

_target_options = [
    click.option("--file", "file", type=click.Path(dir_okay=False), default=None,
                 help="The triton_unified_attention.py to act on."),
    click.option("--python", "python", default=None,
                 help="Interpreter whose installed vLLM to act on (default: python3 on PATH)."),
]


def _with_target(function):  # type: ignore[no-untyped-def]
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
    emit(result, as_json=as_json, render=lambda r: click.echo(
        f"{r.verdict.value}{'' if r.recognised else ' (source not recognised)'}: {r.detail}\n  {r.target.path}"))
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
@click.option("--capability", default=None, help="State the GPU's compute capability (7.5 or sm_75) instead of "
              "asking nvidia-smi: for image builds with no GPU.")
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
        ("vLLM", f"{result.vllm_version or 'not found'} in {result.python} "
                 f"({'supported' if result.vllm_supported else 'NOT supported'}: {result.supported_range})"),
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
