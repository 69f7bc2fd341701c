"""``gemmaserve serve start|status|stop|logs``: vLLM on this host, behind doctor's interlock."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from gemmaserve.cli.output import (
    console,
    emit,
    gpu_memory_utilization_option,
    json_option,
    max_model_len_option,
)
from gemmaserve.engine_log import EngineStage

_PORT = click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)


@click.group(name="serve")
def cli() -> None:
    """Run vLLM on this host behind an interlock: start, status, stop, logs."""


@cli.command(name="start", context_settings={"ignore_unknown_options": True})
@click.option("--model", default="gemma-4-e2b", show_default=True)
@click.option("--encoding", default="qat-w4a16", show_default=True)
@click.option(
    "--python",
    "python",
    help="The interpreter vLLM runs under (default: the `vllm` on PATH's).",
)
@click.option("--gpu", help="Catalog GPU to plan for when nvidia-smi's is not in the catalog.")
@click.option(
    "--gpu-index",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Which GPU (CUDA_VISIBLE_DEVICES).",
)
@_PORT
@max_model_len_option
@gpu_memory_utilization_option
@click.option("--max-num-seqs", type=click.IntRange(min=1))
@click.option("--served-model-name", help="The name clients ask for (default: the model key).")
@click.option(
    "--checkpoint",
    help="Load this local directory or repo instead of the catalog's repo for --encoding "
    "(the plan still comes from --model/--encoding).",
)
@click.option(
    "--language-model-only",
    is_flag=True,
    help="vLLM's --language-model-only: the text decoder without the vision and audio towers (planned so).",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Return once the process is started; do not wait for /health.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=1800,
    show_default=True,
    help="Seconds to wait for /health.",
)
@json_option
@click.argument("extra_args", nargs=-1, type=click.UNPROCESSED)
def start_command(
    model: str,
    encoding: str,
    python: str | None,
    gpu: str | None,
    gpu_index: int,
    port: int,
    max_model_len: int,
    gpu_memory_utilization: float,
    max_num_seqs: int | None,
    served_model_name: str | None,
    checkpoint: str | None,
    language_model_only: bool,
    no_wait: bool,
    timeout_s: float,
    as_json: bool,
    extra_args: tuple[str, ...],
) -> None:
    """Plan, check and start `vllm serve`; extra arguments after `--` go to vLLM unchanged.

    Example: gemmaserve serve start --checkpoint ./model -- --load-format dummy --enforce-eager
    """
    from gemmaserve.serve.api import start

    with _StageDisplay() as on_progress:
        result = start(
            model=model,
            encoding=encoding,
            python=python,
            gpu=gpu,
            port=port,
            gpu_index=gpu_index,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            max_num_seqs=max_num_seqs,
            served_model_name=served_model_name,
            checkpoint=checkpoint,
            language_model_only=language_model_only,
            extra_args=list(extra_args),
            wait=not no_wait,
            ready_timeout_s=timeout_s,
            on_progress=on_progress,
        )
    emit(
        result,
        as_json=as_json,
        render=_render_start,
    )
    if not no_wait and not result.ready:
        raise SystemExit(1)


def _render_start(result: Any) -> None:
    out = console()
    state = "serving" if result.ready else "started (not serving yet)"
    out.print(
        f"{state}: pid {result.record.pid} on port {result.record.port}, log {result.record.log_path}",
        highlight=False,
    )
    if result.clamp is not None:
        out.print(f"  Turing clamp: {result.clamp.evidence}", highlight=False)


class _StageDisplay:
    """A rich spinner on stderr with the engine's stage and the seconds waited; only on a terminal."""

    def __init__(self) -> None:
        self._status: Any = None

    def __enter__(self) -> Callable[[EngineStage, float], None] | None:
        if not sys.stderr.isatty():
            return None
        from rich.console import Console

        self._status = Console(stderr=True).status("vLLM starting")
        self._status.start()
        return self.update

    def update(self, stage: EngineStage, waited_s: float) -> None:
        self._status.update(f"vLLM {stage.value} — {waited_s:.0f} s")

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()


@cli.command(name="status")
@_PORT
@click.option(
    "--all",
    "all_servers",
    is_flag=True,
    help="Every server gemmaserve started on this host.",
)
@click.option(
    "-n",
    "lines",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Log lines to show.",
)
@json_option
def status_command(port: int, all_servers: bool, lines: int, as_json: bool) -> None:
    """compiling / loading / serving / dead, with the engine facts from its log."""
    from gemmaserve.serve.api import list_statuses, server_status

    if all_servers:
        emit(
            list_statuses(),
            as_json=as_json,
            render=_render_statuses,
        )
        return
    status = server_status(port, last_lines=lines)
    emit(status, as_json=as_json, render=_render_status)
    if status.state.value == "dead":
        raise SystemExit(1)


def _render_statuses(rows: list[Any]) -> None:
    if not rows:
        console().print("no servers started by gemmaserve on this host")
    for row in rows:
        _render_status(row)


def _render_status(status: Any) -> None:
    out = console()
    e = status.engine
    out.print(
        f"port {status.port}: [bold]{status.state.value}[/] (pid {status.pid}, {status.model}, up {status.uptime_s:.0f} s)"
    )
    facts = {
        "vLLM": e.vllm_version,
        "dtype": e.dtype,
        "quantization": e.quantization,
        "weights GiB": e.weights_gib,
        "load s": e.load_seconds,
        "KV tokens": e.kv_cache_tokens,
        "max concurrency": f"{e.max_concurrency}x at {e.max_concurrency_context_tokens} tokens"
        if e.max_concurrency
        else None,
    }
    out.print("  " + ", ".join(f"{k} {v}" for k, v in facts.items() if v is not None))
    for error in e.errors:
        out.print(f"  [red]{error}[/]", markup=True, highlight=False)
    if status.oom_hint:
        out.print(f"  {status.oom_hint}", highlight=False)
    for line in status.last_lines:
        out.print(f"  | {line}", markup=False, highlight=False)


@cli.command(name="stop")
@_PORT
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0),
    default=30,
    show_default=True,
    help="Seconds after SIGTERM before SIGKILL.",
)
@json_option
def stop_command(port: int, timeout_s: float, as_json: bool) -> None:
    """SIGTERM the server's process group, then SIGKILL after --timeout; never a reused pid."""
    from gemmaserve.serve.api import stop_server

    result = stop_server(port, timeout_s=timeout_s)
    emit(
        result,
        as_json=as_json,
        render=lambda r: console().print(f"port {r.port} pid {r.pid}: {r.note}"),
    )


@cli.command(name="logs")
@_PORT
@click.option("-n", "lines", type=click.IntRange(min=0), default=100, show_default=True)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until interrupted.")
def logs_command(port: int, lines: int, follow: bool) -> None:
    """The engine log of the server on --port."""
    from gemmaserve.serve.supervisor import log_path_for, read_logs

    if not follow:
        for line in read_logs(port, lines):
            click.echo(line)
        return
    read_logs(port, 0)  # raises ServerNotRunning when there is no log
    # One handle for the tail and the follow, so no line written in between is lost or doubled.
    with log_path_for(port).open("r", errors="replace") as handle:
        for line in handle.read().splitlines()[-lines:] if lines else []:
            click.echo(line)
        while True:
            chunk = handle.readline()
            if chunk:
                click.echo(chunk, nl=False)
            else:
                time.sleep(0.2)
