"""``gemmaserve bench``: ``measure`` targets into result files; ``combine``, ``report`` and ``import`` read them.

``measure`` shows where the run stands on stderr (lines per phase redrawn in place on a terminal, a
plain line now and then elsewhere) and ends with two tables on stdout that fit 100 columns: the
outcome per target, and TTFT/ITL/TPOT p50/p99 per target and phase.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from gemmaserve.bench.requests import MeasureReport, MeasureRequest, TargetSummary
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import console, emit, json_option, warn
from gemmaserve.cli.progress_display import bar, progress_display

if TYPE_CHECKING:
    from gemmaserve.bench.run_progress import MeasureProgress

TABLE_WIDTH = 100
# Off a terminal, a progress line when a phase starts, else at most this often (the run's heartbeat is 1 s).
PLAIN_EVERY_S = 10.0


@click.group(name="bench")
def cli() -> None:
    """Measure endpoints: decode rate, latency, throughput, quality, cost.

    \b
    Examples:
      gemmaserve bench measure http://127.0.0.1:8000 --out results/ --label t4-qat
      gemmaserve bench combine results/a.json results/b.json
      gemmaserve bench report results/
    """


@cli.command(name="measure")
@request_options(MeasureRequest)
@json_option
@click.pass_context
def measure(ctx: click.Context, request: MeasureRequest, as_json: bool) -> None:
    """Measure TARGET… (http://HOST:PORT or sagemaker://NAME?region=R), interleaved, into --out.

    Per-target options (--label, --log, --instance, --gpu, --price-usd-per-hour) are given
    once per target, in target order. Progress goes to stderr; the tables (or --json) to stdout.

    Exit status: 0 when every request succeeded and every phase finished; 1 when
    any request failed or a phase is missing (partial) or nothing succeeded; 2 for
    bad usage; 130 when interrupted (finished steps are saved).

    \b
    Examples:
      gemmaserve bench measure http://127.0.0.1:8000 --out results/ --label t4-qat --instance g4dn.xlarge
      gemmaserve bench measure http://a:8000 http://b:8000 http://a:8000 --out ab/ --label a --label b
      gemmaserve bench measure sagemaker://gemma4-t4?region=us-east-1 --out sm/ --concurrency 1,8,32
      gemmaserve bench measure http://127.0.0.1:8000 --out quick/ --decode-calls 0 --quality-set none --json
    """
    from gemmaserve.bench.measure import measure_endpoints

    with progress_display(
        measure_lines, plain_every_s=PLAIN_EVERY_S, phase_starts=FirstOfEachPhase(), keep_ended_phases=False
    ) as progress:
        report = measure_endpoints(request, progress=progress, command=["gemmaserve", *sys.argv[1:]])
    for target in report.targets:
        if target.client_warning:
            warn(f"{target.label}: {target.client_warning}")
        for message in target.decode_warnings:
            warn(f"{target.label}: {message}")
        if target.note:
            warn(f"{target.label}: {target.note}")
    emit(report, as_json=as_json, render=_render)
    ctx.exit(report.exit_code)


def duration(seconds: float | None) -> str:
    """``1h05m``, ``3m07s``, ``42s``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def measure_lines(event: MeasureProgress) -> list[str]:
    """The run's line (the step, its share of the planned work, requests, time so far and left), then one
    line per phase; off a terminal only the first is written."""
    left = "" if event.eta_s is None else f", ETA {duration(event.eta_s)}{_pending(event)}"
    detail = f"{event.done_requests}/{event.total_requests} requests, {duration(event.elapsed_s)} elapsed{left}"
    rows = [(event.message, bar(event.done_work, event.total_work), detail)]
    rows += [
        (
            f"  {phase.phase}",
            bar(phase.done_work, phase.total_work),
            f"{phase.done_requests}/{phase.total_requests} requests",
        )
        for phase in event.phases
    ]
    label_width = max(len(label) for label, _, _ in rows)
    return [f"{label:<{label_width}}  {shown}  {detail}" for label, shown, detail in rows]


def _pending(event: MeasureProgress) -> str:
    """The phases the ETA leaves out: their answers' length is not known until the first is in."""
    return f" + {', '.join(event.eta_pending)}" if event.eta_pending else ""


class FirstOfEachPhase:
    """Off a terminal, a phase starts the first time it is seen: the first warmup does, the pool warmups
    before each load level do not (a line for each would say nothing new)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, event: MeasureProgress) -> bool:
        starts = event.phase not in self.seen and (event.phase != "warmup" or not self.seen)
        self.seen.add(event.phase)
        return starts


def _fixed_cost(intercept_s: float | None, flag: str | None) -> str:
    if intercept_s is None:
        return "–"
    if flag is not None:  # never shown as a cost: it says the line does not fit
        return f"n/a ({flag})"
    return f"{intercept_s * 1000:.1f}"


def _ms(values: Any) -> str:
    if values is not None and values.not_measurable:
        return str(values.not_measurable)
    if values is None or values.p50 is None or values.p99 is None:
        return "–"
    return f"{values.p50 * 1000:.1f} / {values.p99 * 1000:.1f}"


def _quality_cell(correct: int | None, answered: int | None, total: int | None) -> str:
    from gemmaserve.bench.report import quality_cell

    return quality_cell(correct, answered, total).replace("—", "–")


def _status(target: TargetSummary) -> str:
    return target.status.value + (" *" if target.missing or target.failures_by_reason else "")


def _render(report: MeasureReport) -> None:
    from rich import box
    from rich.table import Table

    out = console()
    width = min(out.width, TABLE_WIDTH)
    out.print(f"bench measure — {report.message}", highlight=False, markup=False, width=width)
    summary = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, header_style="bold")
    for column, justify in (
        ("target", "left"),
        ("status", "left"),
        ("decode tok/s", "right"),
        ("fixed ms", "right"),
        ("load tok/s", "left"),
        ("quality", "right"),
        ("failed", "right"),
    ):
        summary.add_column(column, justify=justify)  # type: ignore[arg-type]
    for t in report.targets:
        load = " ".join(f"{k}:{v:.0f}" if v is not None else f"{k}:–" for k, v in t.load_output_tokens_per_s.items())
        summary.add_row(
            t.label,
            _status(t),
            f"{t.decode_tokens_per_s:.1f}" if t.decode_tokens_per_s else "–",
            _fixed_cost(t.intercept_s, t.intercept_flag),
            load or "–",
            _quality_cell(t.quality_correct, t.quality_answered, t.quality_total),
            f"{t.failed}/{t.requests}",
        )
    out.print(summary, width=width)
    latency = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, header_style="bold")
    for column, justify in (
        ("target", "left"),
        ("phase", "left"),
        ("TTFT ms p50 / p99", "right"),
        ("ITL ms p50 / p99", "right"),
        ("TPOT ms p50 / p99", "right"),
    ):
        latency.add_column(column, justify=justify)  # type: ignore[arg-type]
    for t in report.targets:
        for row in t.latency:
            latency.add_row(t.label, row.phase, _ms(row.ttft_s), _ms(row.itl_s), _ms(row.tpot_s))
    if latency.row_count:
        out.print(latency, width=width)
    for t in report.targets:
        problems = [f"{reason} ×{count}" for reason, count in sorted(t.failures_by_reason.items())]
        if t.missing:
            problems.append(f"missing: {', '.join(t.missing)}")
        if problems:
            out.print(f"* {t.label}: {'; '.join(problems)}", highlight=False, markup=False, width=width)
    paths = [t.path for t in report.targets]
    out.print(f"Files: {', '.join(paths)}", highlight=False, markup=False, soft_wrap=True)
    if len(paths) > 1:
        out.print(f"Next: gemmaserve bench combine {' '.join(paths)}", highlight=False, markup=False, soft_wrap=True)
    else:
        out.print(f"Next: gemmaserve bench report {report.out_dir}", highlight=False, markup=False, soft_wrap=True)


try:  # the analysis commands live in their own module; measure must work without it
    from gemmaserve.cli.bench_analysis import combine, import_vllm, report

    cli.add_command(combine)
    cli.add_command(report)
    cli.add_command(import_vllm)
except ImportError as _exc:  # pragma: no cover - only while that module is missing
    if getattr(_exc, "name", None) != "gemmaserve.cli.bench_analysis":
        raise
