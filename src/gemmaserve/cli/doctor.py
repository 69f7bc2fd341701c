"""``gemmaserve doctor``: the host and target-interpreter checks as a table or ``--json``; exit 1 when not ok.

The table fits 100 columns; the fixes' shell commands are printed under it, one to a line and never
wrapped, so each can be pasted whole (the block is a valid shell script: labels are ``#`` comments).
"""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import console, emit, json_option
from gemmaserve.findings import Finding, Status
from gemmaserve.host.doctor import DoctorRequest
from gemmaserve.host.verdicts import DoctorReport

TABLE_WIDTH = 100

_STYLE = {
    Status.OK: "green",
    Status.WARN: "yellow",
    Status.FAIL: "red",
    Status.UNKNOWN: "magenta",
    Status.NOT_APPLICABLE: "cyan",
}
_SHORT = {Status.NOT_APPLICABLE: "n/a"}


@click.command(name="doctor")
@request_options(DoctorRequest)
@json_option
@click.pass_context
def cli(ctx: click.Context, request: DoctorRequest, as_json: bool) -> None:
    """Check this GPU host and a target interpreter, cheapest failure first.

    The plan is made once, for the GPU found here (or --gpu) and the target interpreter's vLLM (or
    --vllm), and every check judges that plan. Exit 0 when every required check passed, 1 otherwise
    (unknown counts as not passed).

    \b
    Examples:
      gemmaserve doctor
      gemmaserve doctor --python ~/vllm/bin/python --model e2b --encoding bf16
      gemmaserve doctor --gpu t4 --max-model-len 4096 --language-model-only --json
    """
    from gemmaserve.host.doctor import doctor

    report = doctor(request)
    emit(report, as_json=as_json, render=render_report)
    if not report.ok:
        ctx.exit(1)


def _fix_cell(check: Finding, numbers: dict[str, int]) -> str:
    """The fix's words, each command replaced by the number it has under the table."""
    text = check.fix or ""
    for command in check.commands:
        reference = f"[{numbers[command]}]"
        text = text.replace(command, reference) if command in text else f"{text} {reference}".strip()
    return text


def render_report(report: DoctorReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    plan = report.plan
    head = [
        f"gemmaserve doctor — {report.model} {report.encoding} on {report.gpu or 'a GPU not in the catalog'}",
        f"python: {report.python}",
    ]
    if plan is not None:
        head.insert(1, f"plan: vLLM {plan.vllm_version} memory rules ({plan.vllm_from})")
    for line in head:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    numbers: dict[str, int] = {}
    commands: list[tuple[int, str, str]] = []  # number, check id, command
    for check in report.checks:
        for command in check.commands:
            if command not in numbers:
                numbers[command] = len(numbers) + 1
                commands.append((numbers[command], check.check, command))
    grid = Table(header_style="bold", show_lines=True, width=min(out.width, TABLE_WIDTH))
    grid.add_column("", no_wrap=True)
    grid.add_column("check", no_wrap=True)
    grid.add_column("detail", ratio=3, overflow="fold")
    with_fixes = any(check.fix for check in report.checks)
    if with_fixes:  # an empty column would only take width from the detail
        grid.add_column("fix", ratio=2, overflow="fold")
    for check in report.checks:
        style = _STYLE[check.status]
        mark = f"[{style}]{_SHORT.get(check.status, check.status.value)}[/]"
        name = escape(check.check) + ("\n(advisory)" if not check.required else "")
        if check.state:
            name += f"\n[red]{escape(check.state)}[/]"
        cells = [mark, name, escape(check.detail)]
        grid.add_row(*cells, *([escape(_fix_cell(check, numbers))] if with_fixes else []))
    out.print(grid)
    verdict = (
        "[green]ok: every required check passed[/]"
        if report.ok
        else (f"[red]not ok: {len(report.blocking)} required check(s) did not pass[/]")
    )
    out.print(verdict)
    if commands:
        out.print("# Fix commands, one to a line: paste each whole.", highlight=False, markup=False)
        for number, check_id, command in commands:
            out.print(f"# [{number}] {check_id}", highlight=False, markup=False, soft_wrap=True)
            out.print(command, highlight=False, markup=False, soft_wrap=True)
