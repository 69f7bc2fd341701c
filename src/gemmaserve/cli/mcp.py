"""``gemmaserve mcp``: run the MCP server on stdio, for agents.

stdout carries the protocol and nothing else: this command prints nothing itself,
and the SDK points file descriptor 1 at stderr while it serves. When the session ends (stdin
closed, SIGTERM, SIGHUP) every tool call in flight is cleaned up first: see :mod:`gemmaserve.mcp_server.stdio`.
"""

from __future__ import annotations

import click


@click.command(name="mcp")
def cli() -> None:
    """Run the MCP server on stdio (register it with an MCP client as: gemmaserve mcp).

    Every tool wraps the same library function as the matching CLI command; see docs/mcp.md.
    """
    from gemmaserve.cli.redaction import unwrapped
    from gemmaserve.mcp_server import build_server
    from gemmaserve.mcp_server.stdio import serve

    with unwrapped():  # the server redacts its replies, progress and stderr itself
        code = serve(build_server())
    raise SystemExit(code)
