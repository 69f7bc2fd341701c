"""``gemmaserve serve start|status|stop|logs``: vLLM on this host, behind doctor's interlock.

``start`` shows the engine's stage on stderr while it waits (a rich spinner on a terminal, a plain
line per stage and now and then elsewhere). Ctrl-C there stops the server it launched (the library
does, as for a cancelled MCP call) and exits 130.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import console, emit, err_console, json_option
from gemmaserve.progress import ProgressCallback, ProgressEvent
from gemmaserve.serve.requests import LogsRequest, StartRequest, StatusRequest, StopRequest
from gemmaserve.serve.supervisor import ServerList


@click.group(name="serve")
def cli() -> None:
    """Run vLLM on this host behind an interlock: start, status, stop, logs.

    \b
    Examples:
      gemmaserve serve start --model e2b --encoding qat-w4a16
      gemmaserve serve status
      gemmaserve serve stop --yes
    """


@cli.command(name="start", context_settings={"ignore_unknown_options": True})
@request_options(StartRequest)
@json_option
def start_command(request: StartRequest, as_json: bool) -> None:
    """Plan once, check that plan (doctor, Turing clamp) and start `vllm serve` with its flags.

    The plan follows --vllm, else the target interpreter's installed vLLM, else the newest. Extra
    arguments after `--` go to vLLM unchanged, after the plan's flags.

    \b
    Examples:
      gemmaserve serve start --model e2b --encoding qat-w4a16 --max-model-len 8192
      gemmaserve serve start --python ~/vllm/bin/python --port 8001 --no-wait --json
      gemmaserve serve start --checkpoint ./model -- --load-format dummy --enforce-eager
    """
    from gemmaserve.serve.api import start

    with _stage_display() as progress:
        result = start(request, progress=progress)
    emit(result, as_json=as_json, render=_render_start)
    if request.wait and not result.ready:
        raise SystemExit(1)


def _render_start(result: Any) -> None:
    out = console()
    state = "serving" if result.ready else "started (not serving yet)"
    out.print(
        f"{state}: pid {result.record.pid} on port {result.record.port}, log {result.record.log_path}",
        highlight=False,
    )
    if result.plan is not None:
        row = result.plan
        out.print(
            f"  plan (vLLM {row.vllm_version} rules): {row.kv_cache_tokens:,} KV tokens, "
            f"{row.max_concurrency:g}x at {row.max_model_len:,} tokens; "
            f"what vLLM logged: gemmaserve serve status --port {result.record.port}",
            highlight=False,
        )
    if result.clamp is not None:
        out.print(f"  Turing clamp: {result.clamp.evidence}", highlight=False)
    for line in _rank_lines(result.ranks):
        out.print(line, highlight=False)


def _rank_lines(ranks: list[Any]) -> list[str]:
    """One line per worker of a split model: what its own log lines said ("not stated" where vLLM is silent)."""

    def said(value: float | None) -> str:
        return "not stated" if value is None else f"{value:g} GiB"

    return [
        f"  rank {rank.rank} (pid {rank.pid}): Turing plugin {rank.clamp_plugin or 'no line'}, "
        f"weights {said(rank.weights_gib)}, KV cache {said(rank.kv_cache_gib)}"
        for rank in ranks
    ]


# Off a terminal (a log, CI): a line when the stage changes, else one this often. A first start on a
# T4 waits many minutes in one stage; a line per second poll would bury the log.
PLAIN_EVERY_S = 30.0


@contextmanager
def _stage_display() -> Iterator[ProgressCallback]:
    """The engine's stage and the seconds waited on stderr: a rich spinner on a terminal, plain lines elsewhere."""
    if not sys.stderr.isatty():
        yield _plain_stages()
        return
    status = err_console().status("vLLM starting")
    status.start()
    try:
        yield lambda event: status.update(event.message)
    finally:
        status.stop()


def _plain_stages() -> ProgressCallback:
    last: dict[str, Any] = {"phase": None, "at": 0.0}

    def show(event: ProgressEvent) -> None:
        now = time.monotonic()
        if event.phase != last["phase"] or now - last["at"] >= PLAIN_EVERY_S:
            last.update(phase=event.phase, at=now)
            click.echo(event.message, err=True)

    return show


@cli.command(name="status")
@request_options(StatusRequest)
@json_option
def status_command(request: StatusRequest, as_json: bool) -> None:
    """compiling / loading / serving / dead, with the engine facts from its log; exit 1 when dead.

    \b
    Examples:
      gemmaserve serve status
      gemmaserve serve status --port 8001 -n 30
      gemmaserve serve status --all --json
    """
    from gemmaserve.serve.api import status

    result = status(request)
    if isinstance(result, ServerList):
        # --json keeps printing a list here, as it always has: scripts read it so.
        emit(result.servers, as_json=as_json, render=_render_statuses)
        return
    emit(result, as_json=as_json, render=_render_status)
    if result.state.value == "dead":
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
        "tensor parallel": e.tensor_parallel_size if (e.tensor_parallel_size or 1) > 1 else None,
        "max concurrency": f"{e.max_concurrency}x at {e.max_concurrency_context_tokens} tokens"
        if e.max_concurrency
        else None,
    }
    out.print("  " + ", ".join(f"{k} {v}" for k, v in facts.items() if v is not None))
    for line in _rank_lines(e.ranks):
        out.print(line, highlight=False)
    for error in e.errors:
        out.print(f"  [red]{error}[/]", markup=True, highlight=False)
    if status.oom_hint:
        out.print(f"  {status.oom_hint}", highlight=False)
    for line in status.last_lines:
        out.print(f"  | {line}", markup=False, highlight=False)


@cli.command(name="stop")
@request_options(StopRequest)
@json_option
def stop_command(request: StopRequest, as_json: bool) -> None:
    """SIGTERM the server's process group, then SIGKILL after --timeout; never a reused pid.

    Asks first on a terminal; elsewhere it needs --yes.

    \b
    Examples:
      gemmaserve serve stop
      gemmaserve serve stop --port 8001 --timeout 60 --yes --json
    """
    from gemmaserve.serve.api import stop

    result = stop(request)
    emit(
        result,
        as_json=as_json,
        render=lambda r: console().print(f"port {r.port} pid {r.pid}: {r.note}", highlight=False),
    )


@cli.command(name="logs")
@request_options(LogsRequest)
def logs_command(request: LogsRequest) -> None:
    """The engine log of the server on --port.

    \b
    Examples:
      gemmaserve serve logs -n 50
      gemmaserve serve logs --port 8001 --follow
    """
    from gemmaserve.serve.api import logs
    from gemmaserve.serve.supervisor import log_path_for

    if not request.follow:
        for line in logs(request).lines:
            click.echo(line)
        return
    logs(request.model_copy(update={"lines": 0}))  # raises ServerNotRunning when there is no log
    # One handle for the tail and the follow, so no line written in between is lost or doubled.
    with log_path_for(request.port).open("r", errors="replace") as handle:
        for line in handle.read().splitlines()[-request.lines :] if request.lines else []:
            click.echo(line)
        while True:
            chunk = handle.readline()
            if chunk:
                click.echo(chunk, nl=False)
            else:
                time.sleep(0.2)
