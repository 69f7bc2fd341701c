"""Build the gemmaserve MCP server: one ``MCPServer`` with every tool whose capability exists.

Each ``tools_*`` module registers thin wrappers over the library functions the CLI calls;
this module only names the server, tells agents how to use it, and wires the seams.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from gemmaserve import __version__
from gemmaserve.mcp_server import (
    tools_bench,
    tools_checkpoint,
    tools_host,
    tools_plan,
    tools_sagemaker,
    tools_sagemaker_setup,
    tools_serve,
    tools_turing,
)
from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import RedactReplies, ToolSet

SERVER_NAME = "gemmaserve"

INSTRUCTIONS = """\
gemmaserve puts Google's Gemma 4 models into service with vLLM on the cheapest NVIDIA GPU that
holds them (T4, L4, L40S…), on this host or on an Amazon SageMaker endpoint, and measures them.

Work in this order, proving each step before the next one costs money:
1. `plan` (offline): which model × encoding × GPU fits, KV pool, host RAM/swap, $/hour.
2. On a GPU host: `doctor`, then on a T4 the Turing clamp (`turing_status`, `turing_apply`,
   `turing_verify`), then `serve_start`. `serve_start` refuses by itself unless its checks pass now.
3. On SageMaker: `sagemaker_preflight`, then `sagemaker_deploy` (dry_run=true first: it shows the
   calls and $/hour), `sagemaker_status`, `sagemaker_logs`, `sagemaker_invoke`, and always
   `sagemaker_delete` when done: a running endpoint bills by the hour.
4. `bench_*` to measure what was deployed.

Tools that change or delete things take `confirm`; pass confirm=true only after the user agreed.
A failed call returns an error whose text says what failed and the fix ("Fix: …") and carries
the error's fields as JSON ("Details: …").
"""


def build_server(deps: ServerDeps | None = None) -> MCPServer:
    """The server with all tools registered; ``deps`` are the seams (defaults: real AWS, real clock)."""
    deps = deps if deps is not None else ServerDeps()
    tools = ToolSet()
    for module in (
        tools_plan,
        tools_host,
        tools_serve,
        tools_turing,
        tools_sagemaker,
        tools_sagemaker_setup,
        tools_bench,
        tools_checkpoint,
    ):
        module.register(tools, deps)
    return MCPServer(
        SERVER_NAME,
        title="gemmaserve",
        description="Serve Gemma 4 with vLLM on the cheapest NVIDIA GPU that holds it, and measure it.",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        tools=tools.tools,
        middleware=[RedactReplies()],
    )
