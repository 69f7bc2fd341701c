"""The derived image, execution role, autoscaling and JumpStart tools: equal to the CLI's --json (moto, Stubber)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.stub import Stubber

from gemmaserve.mcp_server import ServerDeps, build_server
from tests.support.mcp.fixtures import REGION, call_tool, cli_json, error_details, without
from tests.support.sagemaker.helpers import hub_content, hub_summaries


def test_image_render_equals_cli() -> None:
    result = call_tool(build_server(), "sagemaker_image_render", {"region": REGION, "account": "123456789012"})
    assert result.structured_content == cli_json(
        "sagemaker", "image", "render", "--region", REGION, "--account", "123456789012"
    )
    assert "turing" in result.structured_content["target_image"]  # type: ignore[index]


def test_image_build_dry_run_equals_cli_and_the_real_build_needs_confirm(aws_cli_env: Any) -> None:
    server = build_server(ServerDeps(aws_clients=aws_cli_env, sleep=lambda s: None))
    dry = call_tool(server, "sagemaker_image_build", {"region": REGION, "dry_run": True, "confirm": False})
    assert not dry.is_error, dry.content
    assert dry.structured_content == cli_json("sagemaker", "image", "build", "--region", REGION, "--dry-run")
    refused = call_tool(server, "sagemaker_image_build", {"region": REGION, "confirm": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"
    assert aws_cli_env("ecr", REGION).describe_repositories()["repositories"] == []


def test_role_create_equals_cli_and_is_idempotent(aws_cli_env: Any) -> None:
    server = build_server(ServerDeps(aws_clients=aws_cli_env))
    arguments = {"region": REGION, "role_name": "mcp-role", "confirm": True}
    created = call_tool(server, "sagemaker_role_create", arguments)
    assert created.structured_content["created"] is True  # type: ignore[index]
    again = cli_json("sagemaker", "role", "create", "--region", REGION, "--name", "mcp-role", "--yes")
    assert again["created"] is False
    assert without(created.structured_content, {"created"}) == without(again, {"created"})
    assert call_tool(server, "sagemaker_role_create", arguments).structured_content == again


def test_autoscale_dry_run_equals_cli() -> None:
    arguments = {
        "endpoint_name": "mcp-scale",
        "max_instances": 3,
        "target_invocations": 60,
        "region": REGION,
        "dry_run": True,
        "confirm": False,
    }
    result = call_tool(build_server(), "sagemaker_autoscale", arguments)
    assert result.structured_content == cli_json(
        "sagemaker",
        "autoscale",
        "mcp-scale",
        "--max",
        "3",
        "--target-invocations",
        "60",
        "--region",
        REGION,
        "--dry-run",
    )
    refused = call_tool(build_server(), "sagemaker_autoscale", {**arguments, "dry_run": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"


def test_jumpstart_lists_gemma4_through_botocore_parsing() -> None:
    sm = boto3.client("sagemaker", region_name=REGION)
    summaries = hub_summaries("huggingface-llm-gemma-4-e2b-it", "huggingface-llm-gemma-3-4b-it")
    with Stubber(sm) as stub:
        stub.add_response("list_hub_contents", {"HubContentSummaries": summaries})
        stub.add_response(
            "describe_hub_content",
            hub_content(summaries[0], "ml.g6.xlarge", ["ml.g5.xlarge", "ml.g6.xlarge"]),
        )
        server = build_server(ServerDeps(aws_clients=lambda service, region: sm))
        result = call_tool(server, "sagemaker_jumpstart", {"region": REGION})
        stub.assert_no_pending_responses()
    listing = result.structured_content
    assert [m["hub_content_name"] for m in listing["models"]] == ["huggingface-llm-gemma-4-e2b-it"]  # type: ignore[index]
    assert listing["models"][0]["supported_instance_types"] == ["ml.g5.xlarge", "ml.g6.xlarge"]  # type: ignore[index]
    assert "huggingface-llm-gemma-4-e2b-it (default ml.g6.xlarge)" in result.content[0].text  # type: ignore[union-attr]
