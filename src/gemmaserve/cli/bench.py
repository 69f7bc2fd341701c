"""``gemmaserve bench``: ``measure`` targets into result files; ``combine`` and ``report`` read them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from gemmaserve.cli.output import console, emit, json_option, warn
from gemmaserve.errors import UsageError


@click.group(name="bench")
def cli() -> None:
    """Measure endpoints: decode rate, latency, throughput, quality, cost."""


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--concurrency {text!r} is not a comma-separated list of integers.") from None
    if not levels or any(level < 1 for level in levels):
        raise UsageError(f"--concurrency {text!r}: each level must be an integer >= 1.")
    return levels


@cli.command(name="measure")
@click.argument("targets", nargs=-1, required=True)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory for <label>.json files."
)
@click.option("--label", "labels", multiple=True, help="Short name per target (file name, tables), in target order.")
@click.option(
    "--decode-calls",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Calls at each decode length (0 skips).",
)
@click.option("--decode-short", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--decode-long", type=click.IntRange(min=2), default=512, show_default=True)
@click.option("--concurrency", "concurrency", default="1,4,16", show_default=True, help="Load levels, comma-separated.")
@click.option(
    "--repeats", type=click.IntRange(min=0), default=3, show_default=True, help="Repeats per load level (0 skips load)."
)
@click.option(
    "--input-tokens", type=click.IntRange(min=1), default=128, show_default=True, help="Prompt words per load request."
)
@click.option(
    "--output-tokens",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Output tokens per load request.",
)
@click.option(
    "--requests-per-stream",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Load requests per concurrent stream in each repeat.",
)
@click.option("--quality-set", default="published-40", show_default=True, help="Question set, or 'none' to skip.")
@click.option("--quality-max-tokens", type=click.IntRange(min=1), default=2048, show_default=True)
@click.option("--quality-concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option(
    "--ignore-eos/--no-ignore-eos",
    default=True,
    show_default=True,
    help="Ask vLLM for exactly max_tokens on decode and load calls.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds one request may take.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic prompts.")
@click.option(
    "--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Unscored calls per target first."
)
@click.option(
    "--client-processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes that send each load level (one per free core for thousands of streams).",
)
@click.option(
    "--max-client-lag-ms",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Stop when the client's own event loop lags more than this (median) in a decode or load step; 0: never.",
)
@click.option(
    "--log", "logs", multiple=True, type=click.Path(dir_okay=False), help="vLLM log file per target, in target order."
)
@click.option(
    "--instance", "instances", multiple=True, help="Catalog instance per target (price, GPU), in target order."
)
@click.option("--gpu", "gpus", multiple=True, help="Catalog GPU per target, in target order.")
@click.option(
    "--price-usd-per-hour", "prices", multiple=True, type=float, help="Hourly price per target (overrides the catalog)."
)
@json_option
@click.pass_context
def measure(
    ctx: click.Context,
    targets: tuple[str, ...],
    out_dir: str,
    labels: tuple[str, ...],
    decode_calls: int,
    decode_short: int,
    decode_long: int,
    concurrency: str,
    repeats: int,
    input_tokens: int,
    output_tokens: int,
    requests_per_stream: int,
    quality_set: str,
    quality_max_tokens: int,
    quality_concurrency: int,
    temperature: float,
    ignore_eos: bool,
    timeout_s: float,
    seed: int,
    warmup: int,
    client_processes: int,
    max_client_lag_ms: float,
    logs: tuple[str, ...],
    instances: tuple[str, ...],
    gpus: tuple[str, ...],
    prices: tuple[float, ...],
    as_json: bool,
) -> None:
    """Measure TARGET… (http://HOST:PORT or sagemaker://NAME?region=R), interleaved, into --out.

    Exit status: 0 when every request succeeded and every phase finished; 1 when
    any request failed or a phase is missing (partial) or nothing succeeded; 2 for
    bad usage; 130 when interrupted (finished steps are saved).
    """
    from gemmaserve.bench.measure import measure_targets
    from gemmaserve.bench.measure_options import build_measure_inputs

    settings, options = build_measure_inputs(
        targets,
        decode_short=decode_short,
        decode_long=decode_long,
        decode_calls=decode_calls,
        concurrency=_levels(concurrency),
        repeats=repeats,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        quality_set=quality_set,
        quality_max_tokens=quality_max_tokens,
        temperature=temperature,
        ignore_eos=ignore_eos,
        timeout_s=timeout_s,
        seed=seed,
        warmup=warmup,
        quality_concurrency=quality_concurrency,
        requests_per_stream=requests_per_stream,
        client_processes=client_processes,
        max_client_lag_ms=max_client_lag_ms or None,
        labels=labels,
        logs=logs,
        instances=instances,
        gpus=gpus,
        prices_usd_per_hour=prices,
        option_names={
            "labels": "--label",
            "logs": "--log",
            "instances": "--instance",
            "gpus": "--gpu",
            "prices_usd_per_hour": "--price-usd-per-hour",
        },
    )
    with _progress() as progress:
        report = measure_targets(
            targets,
            out_dir,
            settings=settings,
            target_options=options,
            progress=progress,
            command=["gemmaserve", *sys.argv[1:]],
        )
    for target in report.targets:
        if target.client_warning:
            warn(f"{target.label}: {target.client_warning}")
        for message in target.decode_warnings:
            warn(f"{target.label}: {message}")
        if target.note:
            warn(f"{target.label}: {target.note}")
    emit(report, as_json=as_json, render=_render)
    ctx.exit(report.exit_code)


@contextmanager
def _progress() -> Iterator[Callable[..., None] | None]:
    """A rich progress bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from gemmaserve.cli.output import err_console

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=None)

        def update(event: Any) -> None:
            bar.update(task, completed=event.done_requests, total=event.total_requests, description=event.description)

        yield update


def _fixed_cost(intercept_s: float | None, flag: str | None) -> str:
    if intercept_s is None:
        return "–"
    if flag is not None:  # never shown as a cost: it says the line does not fit
        return f"n/a ({flag} intercept {intercept_s * 1000:.1f})"
    return f"{intercept_s * 1000:.1f}"


def _render(report: object) -> None:
    from rich.table import Table

    table = Table(title=f"bench measure — {report.message}")  # type: ignore[attr-defined]
    for column in ("target", "status", "decode tok/s", "fixed cost ms", "load tok/s", "quality", "failed", "file"):
        table.add_column(column)
    for t in report.targets:  # type: ignore[attr-defined]
        load = ", ".join(f"{k}: {v:.0f}" if v is not None else f"{k}: –" for k, v in t.load_output_tokens_per_s.items())
        table.add_row(
            t.label,
            t.status.value + (f" ({', '.join(t.missing)} missing)" if t.missing else ""),
            f"{t.decode_tokens_per_s:.1f}" if t.decode_tokens_per_s else "–",
            _fixed_cost(t.intercept_s, t.intercept_flag),
            load or "–",
            f"{t.quality_correct}/{t.quality_total}" if t.quality_total else "–",
            f"{t.failed}/{t.requests}" + (f" {t.failures_by_reason}" if t.failures_by_reason else ""),
            t.path,
        )
    console().print(table)


try:  # the analysis commands live in their own module; measure must work without it
    from gemmaserve.cli.bench_analysis import combine, import_vllm, report

    cli.add_command(combine)
    cli.add_command(report)
    cli.add_command(import_vllm)
except ImportError as _exc:  # pragma: no cover - only while that module is missing
    if getattr(_exc, "name", None) != "gemmaserve.cli.bench_analysis":
        raise
