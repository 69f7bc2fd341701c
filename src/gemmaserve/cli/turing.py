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
