"""SageMaker tools against moto's HTTP server: equal to the CLI's --json, the deploy interlock,
confirmation, progress, and a cancelled deploy that deletes what it created."""

from __future__ import annotations

import getpass
import json
import urllib.request
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from gemmaserve.mcp_server import ServerDeps, build_server
from gemmaserve.sagemaker.deployment.preflight import Reachability
from gemmaserve.sagemaker.spec.inputs import tag_safe
from gemmaserve.sagemaker.spec.requests import RoleCreateRequest
from tests.support.mcp.fixtures import (
    REGION,
    ProgressLog,
    QuotaStubbedFactory,
    call_tool,
    cli_json,
    error_details,
    error_text,
    without,
)
from tests.support.sagemaker.helpers import DERIVED_T4, deploy_argv, make_role, record_derived_image

QUOTAS = {"ml.g6.xlarge for endpoint usage": 2.0, "ml.g4dn.xlarge for endpoint usage": 2.0}
# A derived image with the build record `sagemaker image build` writes (its tag's text proves nothing).
T4_DERIVED = DERIVED_T4


@pytest.fixture(autouse=True)
def _derived_image_built() -> None:
    record_derived_image(T4_DERIVED)


VOLATILE = {"age_s", "elapsed_s", "cost_so_far_usd", "latency_s", "waited_s"}


def _reachable(repo_id: str) -> Reachability:
    return Reachability.REACHABLE


@pytest.fixture
def aws_server(aws_cli_env: Any) -> tuple[MCPServer, Any, str]:
    from gemmaserve.sagemaker.image.iam import ensure_execution_role
    from gemmaserve.sagemaker.spec.container import default_image_uri

    factory = QuotaStubbedFactory(aws_cli_env, QUOTAS)
    # the role `sagemaker role create` makes: preflight can then check it works in the region
    role = ensure_execution_role(
        aws_cli_env("iam", REGION),
        aws_cli_env("sts", REGION),
        RoleCreateRequest(region=REGION, image=[T4_DERIVED, default_image_uri(REGION)]),
    ).role_arn
    assert role is not None
    server = build_server(ServerDeps(aws_clients=factory, check_model=_reachable, sleep=lambda s: None))
    return server, aws_cli_env, role


def _deploy_args(role: str, name: str, image: str | None = T4_DERIVED, **extra: Any) -> dict[str, Any]:
    # moto accepts only older instance types: ml.g4dn (T4) is the GPU type it knows.
    return {
        "model": "gemma-4-e2b",
        "instance": ["ml.g4dn.xlarge"],
        "role_arn": role,
        "endpoint_name": name,
        "image": image,
        "region": REGION,
        "list_prices": True,
        "confirm": True,
        **extra,
    }


def _drop_tags(outcome: dict[str, Any]) -> dict[str, Any]:
    for planned in outcome["plan"]["calls"]:
        planned["params"].pop("Tags")  # created-at/expires-at differ by the seconds between the two calls
    return outcome


def test_deploy_dry_run_equals_cli_and_needs_no_confirm() -> None:
    server = build_server(ServerDeps())
    result = call_tool(
        server,
        "sagemaker_deploy",
        {
            "model": "gemma-4-e2b",
            "instance": ["ml.g6.xlarge", "ml.g6.2xlarge"],
            "dry_run": True,
            "region": REGION,
        },
    )  # no confirm at all: a dry run changes nothing
    assert not result.is_error, result
    expected = cli_json(*deploy_argv(["ml.g6.xlarge", "ml.g6.2xlarge"], "--dry-run", "--region", REGION))
    assert _drop_tags(result.structured_content) == _drop_tags(expected)  # type: ignore[arg-type]
    assert result.content[0].text.startswith("Dry run: Endpoint gemma-4-e2b-l4 in us-east-1")  # type: ignore[union-attr]


def test_deploy_refuses_without_confirm_and_creates_nothing(aws_server: tuple[MCPServer, Any, str]) -> None:
    server, moto, role = aws_server
    result = call_tool(server, "sagemaker_deploy", _deploy_args(role, "mcp-noconfirm", confirm=False))
    assert error_details(result)["error"] == "ConfirmationRequired"
    assert moto("sagemaker", REGION).list_models()["Models"] == []


def test_t4_deploy_with_the_stock_image_is_refused_by_the_interlock(aws_server: tuple[MCPServer, Any, str]) -> None:
    server, moto, role = aws_server
    result = call_tool(server, "sagemaker_deploy", _deploy_args(role, "mcp-t4", image=None))
    details = error_details(result)
    assert details["error"] == "InterlockRefused"
    failed = {reason["check"]: reason["status"] for reason in details["reasons"]}
    assert failed == {"turing-clamp": "fail"}
    assert "Fix:" in error_text(result)
    assert moto("sagemaker", REGION).list_models()["Models"] == []


def test_deploy_status_logs_invoke_list_delete_agree_with_the_cli(
    aws_server: tuple[MCPServer, Any, str], moto_server_url: str
) -> None:
    server, _, role = aws_server
    progress = ProgressLog()
    deployed = call_tool(server, "sagemaker_deploy", _deploy_args(role, "mcp-t4ok"), progress=progress)
    assert not deployed.is_error, deployed.content[0].text  # type: ignore[union-attr]
    outcome = deployed.structured_content
    assert outcome["result"]["state"]["status"] == "InService"  # type: ignore[index]
    assert [check["status"] for check in outcome["preflight"]["findings"]] == ["ok"] * len(  # type: ignore[index]
        outcome["preflight"]["findings"]
    )  # type: ignore[index]
    messages = [message for _, _, message in progress.updates]
    assert any(message and message.startswith("Created endpoint for mcp-t4ok") for message in messages), messages
    assert [count for count, _, _ in progress.updates] == list(range(1, len(progress.updates) + 1))

    status = call_tool(server, "sagemaker_status", {"endpoint_name": "mcp-t4ok", "region": REGION})
    assert without(status.structured_content, VOLATILE) == without(
        cli_json("sagemaker", "status", "mcp-t4ok", "--region", REGION), VOLATILE
    )
    waited = call_tool(server, "sagemaker_wait", {"endpoint_name": "mcp-t4ok", "region": REGION})
    assert waited.structured_content["status"] == "InService"  # type: ignore[index]

    logs = call_tool(server, "sagemaker_logs", {"endpoint_name": "mcp-t4ok", "region": REGION})
    assert logs.structured_content == cli_json("sagemaker", "logs", "mcp-t4ok", "--region", REGION)

    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    results = [{"Body": json.dumps(body), "ContentType": "application/json"}] * 2
    urllib.request.urlopen(
        urllib.request.Request(
            moto_server_url + "/moto-api/static/sagemaker/endpoint-results",
            data=json.dumps({"results": results}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        ),
        timeout=10,
    )
    invoked = call_tool(
        server, "sagemaker_invoke", {"endpoint_name": "mcp-t4ok", "prompt": "Capital of France?", "region": REGION}
    )
    assert invoked.content[0].text == "Paris"  # type: ignore[union-attr]
    assert without(invoked.structured_content, VOLATILE) == without(
        cli_json("sagemaker", "invoke", "mcp-t4ok", "Capital of France?", "--region", REGION), VOLATILE
    )

    listed = call_tool(server, "sagemaker_list", {"region": REGION, "list_prices": True})
    assert without(listed.structured_content, VOLATILE) == without(
        cli_json("sagemaker", "list", "--region", REGION, "--list-prices"), VOLATILE
    )
    assert [e["endpoint_name"] for e in listed.structured_content["endpoints"]] == ["mcp-t4ok"]  # type: ignore[index]

    cleanup = call_tool(
        server,
        "sagemaker_cleanup",
        {"region": REGION, "expired": True, "dry_run": True, "confirm": False, "list_prices": True},
    )
    assert cleanup.structured_content == {
        "dry_run": True,
        "owner": tag_safe(getpass.getuser()),  # the owner deploy tags with by default
        "expired": [],
        "orphans": [],
        "deleted": [],
        "items": [],
        "errors": [],
        "complete": True,
        "ok": True,
    }

    refused = call_tool(server, "sagemaker_delete", {"endpoint_name": "mcp-t4ok", "region": REGION, "confirm": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"
    dry = call_tool(
        server, "sagemaker_delete", {"endpoint_name": "mcp-t4ok", "region": REGION, "confirm": False, "dry_run": True}
    )
    assert without(dry.structured_content, VOLATILE) == without(
        cli_json("sagemaker", "delete", "mcp-t4ok", "--region", REGION, "--dry-run"), VOLATILE
    )
    deleted = call_tool(server, "sagemaker_delete", {"endpoint_name": "mcp-t4ok", "region": REGION, "confirm": True})
    assert "endpoint:mcp-t4ok" in deleted.structured_content["deleted"]  # type: ignore[index]
    gone = call_tool(server, "sagemaker_status", {"endpoint_name": "mcp-t4ok", "region": REGION})
    assert gone.structured_content["status"] == "NotFound"  # type: ignore[index]


def test_cancelled_deploy_deletes_what_it_created(aws_server: tuple[MCPServer, Any, str]) -> None:
    server, moto, role = aws_server
    seen: list[str] = []

    async def go() -> None:
        async with Client(server) as client, anyio.create_task_group() as group:

            async def cancel_once_created(progress: float, total: float | None, message: str | None) -> None:
                if message and message.startswith("Created model"):
                    seen.append(message)
                    group.cancel_scope.cancel()

            group.start_soon(
                lambda: client.call_tool(
                    "sagemaker_deploy", _deploy_args(role, "mcp-cancel"), progress_callback=cancel_once_created
                )
            )

    anyio.run(go)
    assert seen, "the deploy never created its model, so nothing was cancelled"
    sm = moto("sagemaker", REGION)
    assert sm.list_endpoints()["Endpoints"] == []
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []
    assert sm.list_models()["Models"] == []


def test_bad_endpoint_name_and_arguments(aws_server: tuple[MCPServer, Any, str]) -> None:
    server, _, role = aws_server
    bad_name = call_tool(server, "sagemaker_status", {"endpoint_name": "bad_name", "region": REGION})
    assert error_details(bad_name)["error"] == "UsageError"
    for arguments in (
        {"model": "gemma-4-e2b", "instance": [], "confirm": True},
        {"model": "gemma-4-e2b", "instance": ["ml.g6.xlarge"], "confirm": True, "ttl_hours": 0},
    ):
        assert "validation error" in error_text(call_tool(server, "sagemaker_deploy", arguments)), arguments
    unconfirmed = call_tool(
        server, "sagemaker_deploy", {"model": "gemma-4-e2b", "instance": ["ml.g6.xlarge"], "role_arn": role}
    )
    assert error_details(unconfirmed)["error"] == "ConfirmationRequired"  # a real deploy without confirm


def test_preflight_equals_cli_and_unknown_is_not_ok(aws_cli_env: Any) -> None:
    # The same world for both front ends: moto (no Service Quotas there) and a Hub the network guard blocks.
    role = make_role(aws_cli_env("iam", REGION))
    server = build_server(ServerDeps(aws_clients=aws_cli_env))
    arguments = {
        "model": "gemma-4-e2b",
        "instance": ["ml.g4dn.xlarge"],
        "role_arn": role,
        "region": REGION,
        "image": T4_DERIVED,
    }
    result = call_tool(server, "sagemaker_preflight", arguments)
    expected = cli_json(
        "sagemaker",
        "preflight",
        "--model",
        "gemma-4-e2b",
        "--instance",
        "ml.g4dn.xlarge",
        "--role-arn",
        role,
        "--region",
        REGION,
        "--image",
        T4_DERIVED,
        exit_code=1,
    )
    assert result.structured_content == expected
    statuses = {finding["check"].split(":")[0]: finding["status"] for finding in expected["findings"]}
    assert statuses["execution-role"] == "ok" and statuses["turing-clamp"] == "ok"
    assert "unknown" in statuses.values()
    assert result.content[0].text.startswith("Not ready: ")  # type: ignore[union-attr]
