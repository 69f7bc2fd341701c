"""vLLM on this host: a launcher behind doctor's interlock, and its supervisor.

``records`` (state file, process identity, locks), ``launcher`` (interlock, argv,
detached start, readiness), ``supervisor`` (status, stop, logs), ``requests`` (the
request models), ``api`` (the request-taking entry points the CLI and the MCP server call).

The actions: ``start(StartRequest)``, ``status(StatusRequest)``, ``stop(StopRequest)``,
``logs(LogsRequest)``. Imported on first use, so that ``import gemmaserve.serve`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.serve.api import logs as logs
    from gemmaserve.serve.api import start as start
    from gemmaserve.serve.api import status as status
    from gemmaserve.serve.api import stop as stop
    from gemmaserve.serve.launcher import StartResult as StartResult
    from gemmaserve.serve.requests import LogsRequest as LogsRequest
    from gemmaserve.serve.requests import StartRequest as StartRequest
    from gemmaserve.serve.requests import StatusRequest as StatusRequest
    from gemmaserve.serve.requests import StopRequest as StopRequest
    from gemmaserve.serve.supervisor import ServeLogs as ServeLogs
    from gemmaserve.serve.supervisor import ServerList as ServerList
    from gemmaserve.serve.supervisor import ServerStatus as ServerStatus
    from gemmaserve.serve.supervisor import StopResult as StopResult

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".api": ("start", "status", "stop", "logs"),
        ".requests": ("StartRequest", "StatusRequest", "StopRequest", "LogsRequest"),
        ".launcher": ("StartResult",),
        ".supervisor": ("ServerStatus", "ServerList", "StopResult", "ServeLogs"),
    },
)
