"""``gemmaserve bench``: ``measure`` targets into result files; ``combine``, ``report`` and ``import`` read them.

``measure`` shows where the run stands on stderr through the one progress display (the run's line and a
line per phase redrawn in place on a terminal, the run's line now and then elsewhere), writes the
targets' warnings to stderr and ends with its result's view (:mod:`gemmaserve.views.bench`) on stdout.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gemmaserve.bench.requests import MeasureRequest
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish, warn
from gemmaserve.cli.progress_display import bar, progress_display

if TYPE_CHECKING:
    from gemmaserve.bench.run_progress import MeasureProgress

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
def measure(request: MeasureRequest, as_json: bool) -> None:
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
    from gemmaserve.views.bench import measure_warnings

    with progress_display(
        measure_lines, plain_every_s=PLAIN_EVERY_S, phase_starts=FirstOfEachPhase(), keep_ended_phases=False
    ) as progress:
        report = measure_endpoints(request, progress=progress, command=["gemmaserve", *sys.argv[1:]])
    for message in measure_warnings(report):
        warn(message)
    finish(report, as_json=as_json)


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


try:  # the analysis commands live in their own module; measure must work without it
    from gemmaserve.cli.bench_analysis import combine, import_vllm, report

    cli.add_command(combine)
    cli.add_command(report)
    cli.add_command(import_vllm)
except ImportError as _exc:  # pragma: no cover - only while that module is missing
    if getattr(_exc, "name", None) != "gemmaserve.cli.bench_analysis":
        raise
