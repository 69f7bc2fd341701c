"""The server as an agent first sees it: name, version, instructions, and every tool's metadata."""

from __future__ import annotations

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

from gemmaserve import __version__
from gemmaserve.actions import confirmation_actions
from tests.support.mcp.fixtures import list_tools

# Tools that change or create something outside the conversation must ask for confirmation.
CONFIRMED = {
    "sagemaker_deploy",
    "sagemaker_delete",
    "sagemaker_update",
    "sagemaker_cleanup",
    "sagemaker_image_build",
    "sagemaker_role_create",
    "sagemaker_autoscale",
    "serve_stop",
    "turing_apply",
    "turing_revert",
}


def test_server_identity_and_instructions(server: MCPServer) -> None:
    async def go() -> tuple[object, str | None]:
        async with Client(server) as client:
            return client.server_info, client.instructions

    info, instructions = anyio.run(go)
    assert info.name == "gemmaserve" and info.version == __version__  # type: ignore[attr-defined]
    assert instructions and "confirm=true" in instructions and "sagemaker_delete" in instructions


def test_every_tool_is_described_annotated_and_typed(server: MCPServer) -> None:
    tools = list_tools(server)
    names = [tool.name for tool in tools]
    assert len(names) == len(set(names))
    for tool in tools:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.title, tool.name
        hints = tool.annotations
        assert hints is not None, tool.name
        for hint in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            assert getattr(hints, hint) is not None, (tool.name, hint)
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        if hints.read_only_hint:
            assert not hints.destructive_hint and "confirm" not in tool.input_schema["properties"], tool.name
        if hints.destructive_hint:
            assert tool.name in CONFIRMED, tool.name
    for name in CONFIRMED:
        schema = next(tool for tool in tools if tool.name == name).input_schema
        # offered, false unless given: a dry run needs none; a real change without it is refused (test_framework)
        assert "confirm" not in schema.get("required", []), name
        assert schema["properties"]["confirm"]["type"] == "boolean"
        assert schema["properties"]["confirm"]["default"] is False, name


def test_docs_list_every_tool(server: MCPServer) -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[3] / "docs" / "mcp.md").read_text()
    missing = [tool.name for tool in list_tools(server) if f"| `{tool.name}` |" not in docs]
    assert not missing, f"docs/mcp.md does not list: {missing}"
    # each row's hint letters are the tool's own: RO D I W from its request's effect, C with confirm (P, progress,
    # is the docs' word alone)
    for tool in list_tools(server):
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{tool.name}` |"))
        letters = set(row.split("|")[3].split()) - {"P"}
        hints = tool.annotations
        assert hints is not None
        expected = {
            letter
            for letter, on in (
                ("RO", hints.read_only_hint),
                ("D", hints.destructive_hint),
                ("I", hints.idempotent_hint),
                ("W", hints.open_world_hint),
                ("C", "confirm" in tool.input_schema["properties"]),
            )
            if on
        }
        assert letters == expected, tool.name
    # the paragraph that names the actions needing confirmation names each of them (line breaks folded)
    paragraph = " ".join(docs.split("Actions that need confirmation", 1)[1].split("\n\n", 1)[0].split())
    assert sorted(action for action in confirmation_actions() if f"`{action}`" not in paragraph) == []
