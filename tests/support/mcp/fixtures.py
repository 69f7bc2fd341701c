"""MCP fixtures: the real SDK client talking to the server in memory, and the CLI's ``--json`` for comparison."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from gemmaserve.mcp_server import ServerDeps, build_server


@dataclass
class ProgressLog:
    updates: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))


def call_tool(
    server: MCPServer, name: str, arguments: dict[str, Any], progress: ProgressLog | None = None
) -> CallToolResult:
    """One tool call through the SDK's real client, connected in memory."""

    async def go() -> CallToolResult:
        async with Client(server) as client:
            return await client.call_tool(name, arguments, progress_callback=progress)

    return anyio.run(go)


def list_tools(server: MCPServer) -> list[Any]:
    async def go() -> list[Any]:
        async with Client(server) as client:
            return list((await client.list_tools()).tools)

    return anyio.run(go)


def cli_json(*args: str, exit_code: int = 0) -> Any:
    """What ``gemmaserve ARGS --json`` prints, parsed (the CLI must exit with ``exit_code``)."""
    from gemmaserve.cli import app

    result = CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    assert result.structured_content is None
    return "\n".join(block.text for block in result.content if block.type == "text")


def error_details(result: CallToolResult) -> dict[str, Any]:
    """The JSON after ``Details:`` in an error result: the GemmaserveError's fields."""
    text = error_text(result)
    line = next(line for line in text.splitlines() if line.startswith("Details: "))
    details: dict[str, Any] = json.loads(line.removeprefix("Details: "))
    return details


@pytest.fixture
def server_factory() -> Callable[..., MCPServer]:
    def make(**deps: Any) -> MCPServer:
        return build_server(ServerDeps(**deps))

    return make


@pytest.fixture
def server() -> MCPServer:
    return build_server(ServerDeps())


# --- SageMaker: moto's real HTTP server, with Service Quotas (which moto lacks) answered by Stubber ----------

from tests.support.sagemaker.fixtures import moto_factory, moto_server_url  # noqa: E402, F401 - re-exported fixtures

REGION = "us-east-1"


class QuotaStubbedFactory:
    """moto for every service but service-quotas, which answers from a Stubber with real botocore parsing."""

    def __init__(self, moto: Any, quotas: dict[str, float], calls: int = 8) -> None:
        import boto3
        from botocore.stub import Stubber

        self.moto = moto
        self.sq = boto3.client("service-quotas", region_name=REGION)
        self.stub = Stubber(self.sq)
        for _ in range(calls):
            self.stub.add_response(
                "list_service_quotas",
                {
                    "Quotas": [
                        {"ServiceCode": "sagemaker", "QuotaName": name, "Value": value}
                        for name, value in quotas.items()
                    ]
                },
            )
        self.stub.activate()

    def __call__(self, service: str, region: str) -> Any:
        return self.sq if service == "service-quotas" else self.moto(service, region)


@pytest.fixture
def aws_cli_env(moto_factory: Any, moto_server_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:  # noqa: F811
    """Points the CLI (which builds its own clients) at the same moto server the MCP server uses."""
    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", moto_server_url)
    monkeypatch.setenv("AWS_REGION", REGION)
    return moto_factory


def without(document: Any, keys: set[str]) -> Any:
    """``document`` with the named keys dropped at every depth (wall-clock fields that differ between two calls)."""
    if isinstance(document, dict):
        return {k: without(v, keys) for k, v in document.items() if k not in keys}
    if isinstance(document, list):
        return [without(item, keys) for item in document]
    return document
