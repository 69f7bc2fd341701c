"""The update's request, its dry run in both front ends, and the preflight interlock before anything bills."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gemmaserve.errors import InterlockRefused
from gemmaserve.mcp_server import ServerDeps, build_server
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.deployment.preflight import Reachability
from gemmaserve.sagemaker.spec.requests import UpdateRequest
from tests.support.mcp.fixtures import call_tool, cli_json, error_details
from tests.support.sagemaker.helpers import make_role

REGION = "us-east-1"
BASE = {"endpoint_name": "gemma-4-e2b-l4", "model": "gemma-4-e2b", "instance": ["ml.g6.xlarge"], "region": REGION}


def test_canary_is_the_default_and_one_policy_only() -> None:
    assert UpdateRequest(**BASE, dry_run=True).policy_mode() == ("CANARY", 50)
    assert UpdateRequest(**BASE, dry_run=True, canary=10).policy_mode() == ("CANARY", 10)
    assert UpdateRequest(**BASE, dry_run=True, linear=20).policy_mode() == ("LINEAR", 20)
    assert UpdateRequest(**BASE, dry_run=True, all_at_once=True).policy_mode() == ("ALL_AT_ONCE", None)
    with pytest.raises(ValidationError, match="one traffic policy"):
        UpdateRequest(**BASE, dry_run=True, canary=10, linear=20)
    with pytest.raises(ValidationError, match="--role-arn"):
        UpdateRequest(**BASE)
    with pytest.raises(ValidationError):
        UpdateRequest(**BASE, dry_run=True, canary=60)  # CanarySize: at most 50% of the new fleet
    with pytest.raises(ValidationError):
        UpdateRequest(**BASE, dry_run=True, bake_min=61)  # WaitIntervalInSeconds: at most 3600


def test_dry_run_shows_the_policy_the_alarms_and_the_extra_price() -> None:
    result = api.update(UpdateRequest(**BASE, dry_run=True, linear=25, bake_min=15, max_slowdown=5))
    plan = result.plan
    assert [c.operation for c in plan.calls] == [
        "CreateModel",
        "CreateEndpointConfig",
        "PutMetricAlarm",
        "PutMetricAlarm",
        "PutMetricAlarm",
        "UpdateEndpoint",
    ]
    policy = plan.calls[-1].params["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {
        "Type": "LINEAR",
        "WaitIntervalInSeconds": 900,
        "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
    }
    assert plan.policy.max_slowdown == pytest.approx(0.05)
    assert result.extra_usd_per_hour == plan.usd_per_hour and plan.usd_per_hour is not None
    variant = plan.calls[1].params["ProductionVariants"][0]
    assert variant["VariantName"] == plan.variant_name != "AllTraffic"
    for alarm in plan.calls[2:4]:
        assert alarm.params["Namespace"] == "AWS/SageMaker"
        assert alarm.params["Dimensions"] == [
            {"Name": "EndpointName", "Value": "gemma-4-e2b-l4"},
            {"Name": "VariantName", "Value": plan.variant_name},
        ]


def test_the_planned_calls_are_valid_for_botocore() -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    session = botocore.session.get_session()
    plan = api.update(UpdateRequest(**BASE, dry_run=True)).plan
    for planned in plan.calls:
        shape = session.get_service_model(planned.service).operation_model(planned.operation).input_shape
        report = ParamValidator().validate(planned.params, shape)
        assert not report.has_errors(), report.generate_report()


def test_mcp_dry_run_agrees_with_the_cli_and_a_real_update_needs_confirm() -> None:
    server = build_server(ServerDeps())
    args = {**BASE, "dry_run": True, "canary": 10}
    result = call_tool(server, "sagemaker_update", args)
    assert not result.is_error, result
    expected = cli_json(
        "sagemaker", "update", "gemma-4-e2b-l4", "--model", "gemma-4-e2b", "--instance", "ml.g6.xlarge",
        "--region", REGION, "--canary", "10", "--dry-run",
    )  # fmt: skip
    got: Any = result.structured_content
    assert got["plan"]["policy"] == expected["plan"]["policy"]
    assert [c["operation"] for c in got["plan"]["calls"]] == [c["operation"] for c in expected["plan"]["calls"]]
    refused = call_tool(server, "sagemaker_update", {**BASE, "role_arn": "arn:aws:iam::123456789012:role/x"})
    assert error_details(refused)["error"] == "ConfirmationRequired"


def test_a_failed_preflight_creates_nothing(moto_factory: Any) -> None:
    role = make_role(moto_factory("iam", REGION))
    request = UpdateRequest(**{**BASE, "instance": ["ml.g4dn.xlarge"]}, role_arn=role)  # T4 with the stock image

    def reachable(_model: str) -> Any:
        return Reachability.REACHABLE

    with pytest.raises(InterlockRefused, match="nothing was created"):
        api.update(request, SageMakerSession(factory=moto_factory, check_model=reachable))
    sm = moto_factory("sagemaker", REGION)
    assert sm.list_models()["Models"] == [] and sm.list_endpoint_configs()["EndpointConfigs"] == []


def test_one_region_and_always_followed() -> None:
    with pytest.raises(ValidationError, match="one region"):
        UpdateRequest(**{**BASE, "region": None}, regions=["us-east-1", "us-west-2"], dry_run=True)
    with pytest.raises(ValidationError, match="follows the update"):
        UpdateRequest(**BASE, dry_run=True, wait=False)
