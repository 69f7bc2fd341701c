"""``plan`` and ``env`` through the real client: equal to the CLI's --json, errors with the fix, schema rejection."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from tests.support.mcp.fixtures import call_tool, cli_json, error_details, error_text


def test_plan_structured_content_equals_cli_json(server: MCPServer) -> None:
    result = call_tool(server, "plan", {"model": ["e2b"], "gpu": ["t4", "l4"], "max_model_len": 4096})
    assert not result.is_error
    expected = cli_json("plan", "--model", "e2b", "--gpu", "t4", "--gpu", "l4", "--max-model-len", "4096")
    assert result.structured_content == expected
    assert len(expected["rows"]) == 8
    summary = result.content[0].text  # type: ignore[union-attr]
    assert summary.startswith("8 rows (")
    # The cheapest fitting row is named in the summary for people.
    assert "gemma-4-e2b" in summary


def test_plan_instance_and_decode_rate_match_cli(server: MCPServer) -> None:
    arguments = {
        "instance": "ml.g4dn.xlarge",
        "model": ["e2b"],
        "encoding": ["qat-w4a16"],
        "decode_rate": 40.0,
    }
    result = call_tool(server, "plan", arguments)
    expected = cli_json(
        "plan", "--instance", "ml.g4dn.xlarge", "--model", "e2b", "--encoding", "qat-w4a16", "--decode-rate", "40"
    )
    assert result.structured_content == expected
    assert expected["rows"][0]["usd_per_million_output_tokens"] is not None


def test_plan_unknown_model_is_an_error_result_with_the_fix(server: MCPServer) -> None:
    result = call_tool(server, "plan", {"model": ["gemma-9"]})
    text = error_text(result)
    assert "Unknown model 'gemma-9'" in text
    assert "Fix: Pick one of the names listed." in text
    details = error_details(result)
    assert details["error"] == "UnknownName"
    assert "gemma-4-e2b" in details["valid"]


def test_plan_rejects_bad_arguments_by_schema(server: MCPServer) -> None:
    for bad in ({"max_model_len": 8}, {"platform": "gcp"}, {"gpu_memory_utilization": 1.5}, {"model": "e2b"}):
        result = call_tool(server, "plan", bad)
        text = error_text(result)
        assert "validation error" in text, (bad, text)


def test_env_equals_cli_json(server: MCPServer) -> None:
    result = call_tool(server, "env", {})
    assert result.structured_content == cli_json("env")
    assert "gemmaserve" in result.content[0].text  # type: ignore[union-attr]


def test_plan_text_only_vllm_release_sort_and_warm_match_cli(server: MCPServer) -> None:
    arguments = {
        "model": ["e2b"],
        "gpu": ["t4", "l4"],
        "language_model_only": True,
        "vllm": "0.26.0",
        "sort": "cost",
        "warm": True,
    }
    result = call_tool(server, "plan", arguments)
    assert not result.is_error
    expected = cli_json(
        "plan",
        "--model",
        "e2b",
        "--gpu",
        "t4",
        "--gpu",
        "l4",
        "--language-model-only",
        "--vllm",
        "0.26.0",
        "--sort",
        "cost",
        "--warm",
    )
    assert result.structured_content == expected
    assert expected["vllm_version"] == "0.26"
    assert all(row["language_model_only"] and not row["first_start"] for row in expected["rows"])
    assert "Next: gemmaserve serve start" in result.content[0].text  # type: ignore[union-attr]


def test_plan_unsupported_vllm_release_is_an_error_with_the_fix(server: MCPServer) -> None:
    text = error_text(call_tool(server, "plan", {"vllm": "0.12.0"}))
    assert "0.12.0" in text and "--vllm" in text
