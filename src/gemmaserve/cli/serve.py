"""``gemmaserve serve start|status|stop|logs``: vLLM on this host, behind doctor's interlock.

``start`` shows the engine's stage on stderr while it waits (:func:`progress_display`: redrawn in place
on a terminal; elsewhere a line per stage and one every 30 s). Ctrl-C there stops the server it launched
(the library does, as for a cancelled MCP call) and exits 130. The results' views: :mod:`gemmaserve.views.serve`.
"""

from __future__ import annotations

import time

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish, show
from gemmaserve.cli.progress_display import progress_display
from gemmaserve.errors import UsageError
from gemmaserve.progress import ProgressEvent
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

    with progress_display(stage_lines) as progress:
        result = start(request, progress=progress)
    finish(result, as_json=as_json)


def stage_lines(event: ProgressEvent) -> list[str]:
    """The engine's stage and the seconds waited (``vLLM loading — 42 s``); no bar: the wait has no
    known length, and a share of the timeout would read as one."""
    return [event.message]


@cli.command(name="status")
@request_options(StatusRequest)
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
    if isinstance(result, ServerList) and as_json:
        # --json keeps printing a list here, as it always has: scripts read it so (a list is always ok).
        show(result.servers, as_json=True)
        return
    finish(result, as_json=as_json)


@cli.command(name="stop")
@request_options(StopRequest)
def stop_command(request: StopRequest, as_json: bool) -> None:
    """SIGTERM the server's process group, then SIGKILL after --timeout; never a reused pid.

    \b
    Examples:
      gemmaserve serve stop
      gemmaserve serve stop --port 8001 --timeout 60 --yes --json
    """
    from gemmaserve.serve.api import stop

    finish(stop(request), as_json=as_json)


@cli.command(name="logs")
@request_options(LogsRequest)
def logs_command(request: LogsRequest, as_json: bool) -> None:
    """The engine log of the server on --port.

    \b
    Examples:
      gemmaserve serve logs -n 50
      gemmaserve serve logs --port 8001 --follow
      gemmaserve serve logs -n 200 --json
    """
    from gemmaserve.serve.api import logs
    from gemmaserve.serve.supervisor import log_path_for

    if not request.follow:
        finish(logs(request), as_json=as_json)
        return
    if as_json:
        raise UsageError("--json prints one document and --follow never ends: pass one of them.")
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
