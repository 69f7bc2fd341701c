"""Views of this host's results: ``env`` and ``doctor``."""

from __future__ import annotations

from gemmaserve.envinfo import EnvReport
from gemmaserve.findings import Finding, Status
from gemmaserve.host.verdicts import DoctorReport
from gemmaserve.views import summary, view
from gemmaserve.views.page import Line, Page, Row, Style, page, table


@view(EnvReport)
def env_page(report: EnvReport) -> Page:
    return page(
        f"gemmaserve {report.gemmaserve}",
        f"python {report.python} ({report.executable})",
        f"platform {report.platform}",
        table(
            ["package", "version"],
            [(name, version or "not installed") for name, version in report.packages.items()],
        ),
    )


@summary(EnvReport)
def env_summary(report: EnvReport) -> str:
    """One line for an agent: versions, and what is missing (the structured content lists every package)."""
    missing = [name for name, version in report.packages.items() if version is None]
    text = f"gemmaserve {report.gemmaserve} on Python {report.python} ({report.platform})"
    return text + (f"; not installed: {', '.join(missing)}" if missing else "")


DOCTOR_STYLE: dict[Status, Style] = {
    Status.OK: "good",
    Status.WARN: "warn",
    Status.FAIL: "bad",
    Status.UNKNOWN: "bad",  # unknown is never ok
    Status.NOT_APPLICABLE: "dim",
}
DOCTOR_SHORT = {Status.NOT_APPLICABLE: "n/a"}


@view(DoctorReport)
def doctor_page(report: DoctorReport) -> Page:
    """The checks as a table; each fix's shell commands under it, whole, one to a line (the block is a valid
    shell script: its labels are ``#`` comments), so each can be pasted as it is."""
    numbers: dict[str, int] = {}
    commands: list[Line] = []
    for check in report.checks:
        for command in check.commands:
            if command not in numbers:
                numbers[command] = len(numbers) + 1
                commands += [Line(f"# [{numbers[command]}] {check.check}", "dim"), Line(command)]
    with_fixes = any(check.fix for check in report.checks)  # an empty column would only take width
    rows = [
        Row(
            (
                DOCTOR_SHORT.get(check.status, check.status.value),
                check.check + ("" if check.required else " (advisory)") + (f" ({check.state})" if check.state else ""),
                check.detail,
                *([_fix_cell(check, numbers)] if with_fixes else []),
            ),
            DOCTOR_STYLE[check.status],
        )
        for check in report.checks
    ]
    plan = report.plan
    return page(
        f"gemmaserve doctor — {report.model} {report.encoding} on {report.gpu or 'a GPU not in the catalog'}",
        f"plan: vLLM {plan.vllm_version} memory rules ({plan.vllm_from})" if plan is not None else None,
        f"python: {report.python}",
        table(["", "check", "detail", *(["fix"] if with_fixes else [])], rows),
        _verdict(report),
        Line("# Fix commands, one to a line: paste each whole.", "dim") if commands else None,
        *commands,
    )


def _verdict(report: DoctorReport) -> Line:
    if report.ok:
        return Line("ok: every required check passed", "good")
    if not report.checks:
        return Line("not ok: no check ran", "bad")
    return Line(f"not ok: {len(report.blocking)} required check(s) did not pass", "bad")


def _fix_cell(check: Finding, numbers: dict[str, int]) -> str:
    """The fix's words, each command replaced by the number it has under the table."""
    text = check.fix or ""
    for command in check.commands:
        reference = f"[{numbers[command]}]"
        text = text.replace(command, reference) if command in text else f"{text} {reference}".strip()
    return text


@summary(DoctorReport)
def doctor_summary(report: DoctorReport) -> str:
    """For an agent: ready or not, and each blocking check with its fix."""
    head = "Host ready" if report.ok else "Host NOT ready"
    lines = [
        f"{head} for {report.model} {report.encoding} (GPU {report.gpu or 'not in the catalog'}, "
        f"python {report.python})."
    ]
    if report.plan is not None:
        lines.append(f"Planned with vLLM {report.plan.vllm_version} memory rules ({report.plan.vllm_from}).")
    for check in report.blocking:
        lines.append(
            f"- {check.status.value} {check.title or check.check}: {check.detail}"
            + (f" Fix: {check.fix}" if check.fix else "")
        )
    return "\n".join(lines)
