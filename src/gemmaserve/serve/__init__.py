"""vLLM on this host: a launcher behind doctor's interlock, and its supervisor.

``records`` (state file, process identity, locks), ``launcher`` (interlock, argv,
detached start, readiness), ``supervisor`` (status, stop, logs), ``requests`` (the
request models), ``api`` (the request-taking entry points the CLI and the MCP server call).

The actions: ``start(StartRequest)``, ``status(StatusRequest)``, ``stop(StopRequest)``,
``logs(LogsRequest)``. Imported on first use, so that ``import gemmaserve.serve`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "start": "gemmaserve.serve.api",
    "status": "gemmaserve.serve.api",
    "stop": "gemmaserve.serve.api",
    "logs": "gemmaserve.serve.api",
    "StartRequest": "gemmaserve.serve.requests",
    "StatusRequest": "gemmaserve.serve.requests",
    "StopRequest": "gemmaserve.serve.requests",
    "LogsRequest": "gemmaserve.serve.requests",
    "StartResult": "gemmaserve.serve.launcher",
    "ServerStatus": "gemmaserve.serve.supervisor",
    "ServerList": "gemmaserve.serve.supervisor",
    "StopResult": "gemmaserve.serve.supervisor",
    "ServeLogs": "gemmaserve.serve.supervisor",
}

__all__ = [
    "LogsRequest",
    "ServeLogs",
    "ServerList",
    "ServerStatus",
    "StartRequest",
    "StartResult",
    "StatusRequest",
    "StopRequest",
    "StopResult",
    "logs",
    "start",
    "status",
    "stop",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gemmaserve.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
