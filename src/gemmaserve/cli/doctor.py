"""``gemmaserve doctor``: the host and target-interpreter checks as a table or ``--json``; exit 1 when not ok."""

from __future__ import annotations

import click

from gemmaserve.cli.output import (
    console,
    emit,
    gpu_memory_utilization_option,
    json_option,
    max_model_len_option,
)
from gemmaserve.host.verdicts import CheckStatus, DoctorReport

_STYLE = {
    CheckStatus.OK: "green",
    CheckStatus.WARN: "yellow",
    CheckStatus.FAIL: "red",
    CheckStatus.UNKNOWN: "magenta",
    CheckStatus.NOT_APPLICABLE: "cyan",
}


@click.command(name="doctor")
@click.option(
    "--python",
    "python",
    help="The interpreter vLLM runs under (default: the `vllm` on PATH's, else this one).",
)
@click.option(
    "--model",
    default="gemma-4-e2b",
    show_default=True,
    help="The model to check this host for.",
)
@click.option(
    "--encoding",
    default="qat-w4a16",
    show_default=True,
    help="Its encoding: bf16, qat-w4a16, …",
)
@click.option(
    "--gpu",
    help="Plan for this catalog GPU (t4, l4, …) when nvidia-smi's is not in the catalog.",
)
@max_model_len_option
@gpu_memory_utilization_option
@json_option
@click.pass_context
def cli(
    ctx: click.Context,
    python: str | None,
    model: str,
    encoding: str,
    gpu: str | None,
    max_model_len: int,
    gpu_memory_utilization: float,
    as_json: bool,
) -> None:
    """Check this GPU host and a target interpreter, cheapest failure first.

    Exit 0 when every required check passed, 1 otherwise (unknown counts as not passed).
    """
    from gemmaserve.host.doctor import run_doctor

    report = run_doctor(
        python,
        model=model,
        encoding=encoding,
        gpu=gpu,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    emit(report, as_json=as_json, render=render_report)
    if not report.ok:
        ctx.exit(1)


def render_report(report: DoctorReport) -> None:
    from rich.table import Table

    grid = Table(
        title=f"gemmaserve doctor — {report.model} {report.encoding}, python {report.python}",
        header_style="bold",
        show_lines=True,
    )
    for column in ("", "check", "evidence", "fix"):
        grid.add_column(column, overflow="fold")
    for check in report.checks:
        mark = f"[{_STYLE[check.status]}]{check.status.value}[/]"
        name = check.id + ("" if check.required else " (advisory)")
        if check.broken_state:
            name += f"\n[red]{check.broken_state}[/]"
        grid.add_row(mark, name, check.evidence, check.fix or "")
    out = console()
    out.print(grid)
    verdict = (
        "[green]ok: every required check passed[/]"
        if report.ok
        else (f"[red]not ok: {len(report.blocking)} required check(s) did not pass[/]")
    )
    out.print(verdict)
