"""The MCP server (``gemmaserve mcp``): every gemmaserve capability as tools an agent can drive safely.

Tools are thin wrappers over the same library functions the CLI calls, so their
structured results equal the CLI's ``--json``. Imports the ``mcp`` SDK: load it
only when serving (``gemmaserve --help`` must not pay for it).
"""

from __future__ import annotations

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.server import SERVER_NAME, build_server

__all__ = ["SERVER_NAME", "ServerDeps", "build_server"]
