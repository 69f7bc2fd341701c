"""What moto cannot do: InstancePools, current GPU types, Creating→Failed, quota and capacity errors.

botocore's Stubber checks every request against the real service model
(``expected_params``) and returns canned responses through botocore's parsers.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from gemmaserve.errors import (
    AwsError,
    CapacityUnavailable,
    EndpointFailed,
    QuotaExceeded,
    SageMakerTimedOut,
)
from gemmaserve.progress import Cancelled, CancelToken
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.deployment.endpoint import DeployPlan, execute_deploy, plan_deploy
from gemmaserve.sagemaker.operations.status import EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.operations.teardown import delete_deployment
from gemmaserve.sagemaker.spec.requests import DeleteRequest
from tests.support.sagemaker.helpers import START, Lines, ScriptedClock, make_spec, pool_config, wait_on

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/gemmaserve-exec"
NAME = "gemma4-e2b-l4"
ARN = f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{NAME}"


def sm_client() -> Any:
    return boto3.client("sagemaker", region_name=REGION)


def not_found(stub: Stubber, name: str = NAME) -> None:
    stub.add_client_error(
        "describe_endpoint",
        service_error_code="ValidationException",
        service_message=f'Could not find endpoint "{ARN}".',
        expected_params={"EndpointName": name},
    )


def fresh(stub: Stubber, name: str = NAME) -> None:
    """No endpoint, model or config of this name yet (the checks a deploy makes before creating anything)."""
    not_found(stub, name)
    stub.add_client_error(
        "describe_model",
        service_error_code="ValidationException",
        service_message=f'Could not find model "arn:aws:sagemaker:{REGION}:123456789012:model/{name}-model".',
        expected_params={"ModelName": f"{name}-model"},
    )
    stub.add_client_error(
        "describe_endpoint_config",
        service_error_code="ValidationException",
        service_message='Could not find endpoint configuration "arn:aws:sagemaker:'
        f'{REGION}:123456789012:endpoint-config/{name}-config".',
        expected_params={"EndpointConfigName": f"{name}-config"},
    )


def ours_and_unshared(stub: Stubber) -> None:
    """What delete checks before deleting: the resources' ARNs, their gemmaserve tags, other endpoints' use."""
    from gemmaserve.sagemaker.spec.container import build_tags

    tags = {"Tags": build_tags(owner="ana", now=START, ttl_s=3600)}
    stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
    stub.add_response(
        "describe_model",
        {"ModelName": f"{NAME}-model", "ModelArn": ARN + "-model", "CreationTime": START},
        {"ModelName": f"{NAME}-model"},
    )
    for arn in (ARN, ARN + "-config", ARN + "-model"):
        stub.add_response("list_tags", tags, {"ResourceArn": arn})
    stub.add_response("list_endpoints", {"Endpoints": []}, {})


def described(
    status: str, *, minutes: float = 1, reason: str | None = None, pools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    variant: dict[str, Any] = {
        "VariantName": "AllTraffic",
        "CurrentInstanceCount": 1,
        "DeployedImages": [{"SpecifiedImage": "img:tag", "ResolvedImage": "img@sha256:abc"}],
    }
    if pools is not None:
        variant["InstancePools"] = pools
    response: dict[str, Any] = {
        "EndpointName": NAME,
        "EndpointArn": ARN,
        "EndpointConfigName": f"{NAME}-config",
        "EndpointStatus": status,
        "CreationTime": START - timedelta(minutes=minutes),
        "LastModifiedTime": START,
        "ProductionVariants": [variant],
    }
    if reason:
        response["FailureReason"] = reason
    return response


def one_type_plan() -> DeployPlan:
    """The deploy plan of NAME on one instance type (ml.g6.xlarge) in REGION."""
    return plan_deploy(make_spec(ROLE, endpoint_name=NAME, instance_types=["ml.g6.xlarge"]), region=REGION, now=START)


def config_refused(stub: Stubber, plan: DeployPlan, code: str, message: str) -> None:
    """A fresh name, CreateModel answered, then CreateEndpointConfig refused with ``code``."""
    fresh(stub)
    stub.add_response("create_model", {"ModelArn": ARN}, expected_params=plan.calls[0].params)
    stub.add_client_error(
        "create_endpoint_config",
        service_error_code=code,
        service_message=message,
        expected_params=plan.calls[1].params,
    )


def config_already_existing(stub: Stubber, plan: DeployPlan, tags: list[dict[str, str]]) -> None:
    """CreateEndpointConfig refused as "already existing"; the config found there carries ``tags``."""
    config_refused(stub, plan, "ValidationException", "Cannot create already existing endpoint configuration")
    stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
    stub.add_response("list_tags", {"Tags": tags}, {"ResourceArn": ARN + "-config"})


def test_instance_pools_plan_is_accepted_by_the_service_model() -> None:
    sm = sm_client()
    spec = make_spec(ROLE, endpoint_name=NAME, instance_types=["ml.g6.xlarge", "ml.g6.2xlarge"])
    plan = plan_deploy(spec, region=REGION, now=START)
    variant = plan.calls[1].params["ProductionVariants"][0]
    assert "InstanceType" not in variant
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6.xlarge", "Priority": 1},
        {"InstanceType": "ml.g6.2xlarge", "Priority": 2},
    ]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    with Stubber(sm) as stub:
        fresh(stub)
        for planned in plan.calls:
            op = {
                "CreateModel": "create_model",
                "CreateEndpointConfig": "create_endpoint_config",
                "CreateEndpoint": "create_endpoint",
            }[planned.operation]
            key = {
                "create_model": "ModelArn",
                "create_endpoint_config": "EndpointConfigArn",
                "create_endpoint": "EndpointArn",
            }[op]
            stub.add_response(op, {key: ARN}, expected_params=planned.params)
        result = execute_deploy(sm, plan, Deps(clock=lambda: START))
        stub.assert_no_pending_responses()
    assert result.created == ["model", "endpoint-config", "endpoint"]


def test_status_reports_the_placed_pool_type_and_resolved_image() -> None:
    sm = sm_client()
    with Stubber(sm) as stub:
        stub.add_response(
            "describe_endpoint",
            described(
                "InService",
                pools=[
                    {"InstanceType": "ml.g6.xlarge", "CurrentInstanceCount": 0},
                    {"InstanceType": "ml.g6.2xlarge", "CurrentInstanceCount": 1},
                ],
            ),
            {"EndpointName": NAME},
        )
        state = describe_endpoint_state(sm, NAME, region=REGION, now=START)
    assert state.instance_type == "ml.g6.2xlarge"
    assert state.pool_types == ["ml.g6.xlarge", "ml.g6.2xlarge"]
    assert state.resolved_image == "img@sha256:abc" and state.elapsed_s == 60


def test_quota_error_on_create_is_quota_exceeded_and_tears_down() -> None:
    sm = sm_client()
    plan = one_type_plan()
    with Stubber(sm) as stub:
        fresh(stub)
        stub.add_response("create_model", {"ModelArn": ARN}, expected_params=plan.calls[0].params)
        stub.add_response("create_endpoint_config", {"EndpointConfigArn": ARN}, expected_params=plan.calls[1].params)
        stub.add_client_error(
            "create_endpoint",
            service_error_code="ResourceLimitExceeded",
            service_message="The account-level service limit 'ml.g6.xlarge for endpoint usage' is 0",
            http_status_code=400,
            expected_params=plan.calls[2].params,
        )
        stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": f"{NAME}-config"})
        stub.add_response("delete_model", {}, {"ModelName": f"{NAME}-model"})
        with pytest.raises(QuotaExceeded) as info:
            execute_deploy(sm, plan, Deps(clock=lambda: START))
        stub.assert_no_pending_responses()
    assert info.value.fields["aws_error_code"] == "ResourceLimitExceeded"
    assert info.value.fields["region"] == REGION


def test_creating_then_failed_for_capacity_raises_capacity_unavailable() -> None:
    sm = sm_client()
    clock = ScriptedClock()
    with Stubber(sm) as stub:
        for minutes in (1, 10):
            stub.add_response("describe_endpoint", described("Creating", minutes=minutes), {"EndpointName": NAME})
            stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        stub.add_response(
            "describe_endpoint",
            described(
                "Failed",
                minutes=31,
                reason="Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error.",
            ),
            {"EndpointName": NAME},
        )
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        with pytest.raises(CapacityUnavailable) as info:
            wait_on(sm, None, NAME, Deps(clock=clock.now, sleep=clock.sleep), poll_s=60)
    assert info.value.fields["diagnosis"] == "capacity"
    assert clock.sleeps == [60, 60]


def test_cannot_start_container_says_to_set_the_ami() -> None:
    sm = sm_client()
    with Stubber(sm) as stub:
        stub.add_response(
            "describe_endpoint",
            described("Failed", reason="CannotStartContainerError. Please ensure the model container is valid."),
            {"EndpointName": NAME},
        )
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        with pytest.raises(EndpointFailed) as info:
            wait_on(sm, None, NAME, Deps(clock=lambda: START, sleep=lambda s: None))
    assert "al2023-ami-sagemaker-inference-gpu-4-1" in (info.value.hint or "")


def test_wait_times_out_with_a_bound() -> None:
    sm = sm_client()
    clock = ScriptedClock()
    with Stubber(sm) as stub:
        for _ in range(3):
            stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
            stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": ANY})
        with pytest.raises(SageMakerTimedOut):
            wait_on(sm, None, NAME, Deps(clock=clock.now, sleep=clock.sleep), timeout_s=100, poll_s=50)
    assert clock.sleeps == [50, 50]


def test_delete_waits_while_creating_then_deletes_everything() -> None:
    sm = sm_client()
    clock = ScriptedClock()
    progress = Lines()
    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        ours_and_unshared(stub)
        for status in ("Creating", "Creating", "InService"):
            stub.add_response("describe_endpoint", described(status), {"EndpointName": NAME})
            stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        stub.add_response("delete_endpoint", {}, {"EndpointName": NAME})
        stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": f"{NAME}-config"})
        stub.add_client_error(
            "delete_model",
            service_error_code="ValidationException",
            service_message='Could not find model "x".',
            expected_params={"ModelName": f"{NAME}-model"},
        )
        report = delete_deployment(
            sm,
            DeleteRequest(endpoint_name=NAME, region=REGION),
            Deps(clock=clock.now, sleep=clock.sleep, progress=progress),
            poll_s=20,
        )
        stub.assert_no_pending_responses()
    assert report.deleted == [f"endpoint:{NAME}", f"endpoint-config:{NAME}-config"]
    assert report.absent == [f"model:{NAME}-model"]
    assert clock.sleeps == [20, 20] and len(progress) == 2


def test_delete_gives_up_after_its_bound() -> None:
    sm = sm_client()
    clock = ScriptedClock()
    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": ANY})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": ANY})
        ours_and_unshared(stub)
        for _ in range(3):
            stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
            stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": ANY})
        with pytest.raises(SageMakerTimedOut):
            delete_deployment(
                sm,
                DeleteRequest(endpoint_name=NAME, region=REGION, busy_timeout_s=60),
                Deps(clock=clock.now, sleep=clock.sleep),
                poll_s=30,
            )


def test_failure_midway_deletes_only_what_this_run_made() -> None:
    sm = sm_client()
    plan = one_type_plan()
    with Stubber(sm) as stub:
        # "already existing" may be botocore retrying a call that succeeded, or someone else's config made
        # meanwhile: the tags decide. Here they are not this run's, so the config is left alone.
        config_already_existing(stub, plan, tags=[{"Key": "team", "Value": "other"}])
        stub.add_response("delete_model", {}, {"ModelName": f"{NAME}-model"})
        with pytest.raises(AwsError, match="already existing") as caught:
            execute_deploy(sm, plan, Deps(clock=lambda: START))
        stub.assert_no_pending_responses()
    teardown = caught.value.fields["teardown"]
    assert teardown["deleted"] == [f"model:{NAME}-model"] and teardown["remaining"] == []
    assert teardown["skipped"] == [f"endpoint-config:{NAME}-config (not tagged by this run: left alone)"]


def test_a_retried_create_that_had_succeeded_is_still_torn_down() -> None:
    """botocore retries a CreateEndpointConfig whose first answer was lost: "already existing", yet ours."""
    sm = sm_client()
    plan = one_type_plan()
    with Stubber(sm) as stub:
        config_already_existing(stub, plan, tags=plan.calls[1].params["Tags"])
        stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": f"{NAME}-config"})
        stub.add_response("delete_model", {}, {"ModelName": f"{NAME}-model"})
        with pytest.raises(AwsError) as caught:
            execute_deploy(sm, plan, Deps(clock=lambda: START))
        stub.assert_no_pending_responses()
    assert caught.value.fields["teardown"]["deleted"] == [f"endpoint-config:{NAME}-config", f"model:{NAME}-model"]


def test_not_found_is_a_state() -> None:
    sm = sm_client()
    with Stubber(sm) as stub:
        not_found(stub)
        assert describe_endpoint_state(sm, NAME, region=REGION, now=START).status is EndpointStatus.NOT_FOUND


def test_a_failing_teardown_still_raises_the_original_error_and_says_how_to_finish() -> None:
    sm = sm_client()
    plan = one_type_plan()
    progress = Lines()
    with Stubber(sm) as stub:
        config_refused(stub, plan, "ThrottlingException", "Rate exceeded")
        stub.add_client_error(
            "delete_model",
            service_error_code="AccessDeniedException",
            http_status_code=400,
            expected_params={"ModelName": f"{NAME}-model"},
        )
        stub.add_response(
            "describe_model",
            {"ModelName": f"{NAME}-model", "ModelArn": ARN, "CreationTime": START},
            {"ModelName": f"{NAME}-model"},
        )
        with pytest.raises(AwsError, match="Rate exceeded"):
            execute_deploy(sm, plan, Deps(clock=lambda: START, progress=progress))
    assert f"gemmaserve sagemaker delete {NAME} --region {REGION} --yes" in progress[-1]


def test_wait_reports_each_status_with_seconds_of_the_timeout() -> None:
    sm = sm_client()
    clock = ScriptedClock()
    progress = Lines()
    with Stubber(sm) as stub:
        for status in ("Creating", "Creating", "InService"):
            stub.add_response("describe_endpoint", described(status), {"EndpointName": NAME})
            stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        wait_on(sm, None, NAME, Deps(clock=clock.now, sleep=clock.sleep, progress=progress), poll_s=60, timeout_s=600)
    assert [(e.phase, e.done, e.total) for e in progress.events] == [("Creating", 0, 600), ("InService", 120, 600)]
    assert progress[0].startswith(f"{NAME} ({REGION}): Creating")  # the line the CLI prints, as before


def test_cancelled_wait_stops_following_at_the_next_poll() -> None:
    """A scripted sleep cannot be cut short: the token is checked around it, and no further poll is made."""
    sm = sm_client()
    clock = ScriptedClock()
    token = CancelToken()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        token.cancel()

    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        with pytest.raises(Cancelled):
            wait_on(sm, None, NAME, Deps(clock=clock.now, sleep=sleep, cancel=token), poll_s=60)
        stub.assert_no_pending_responses()
    assert clock.sleeps == [60]


def test_cancel_cuts_a_real_wait_short() -> None:
    sm = sm_client()
    token = CancelToken()
    with Stubber(sm) as stub:
        stub.add_response("describe_endpoint", described("Creating"), {"EndpointName": NAME})
        stub.add_response("describe_endpoint_config", pool_config(NAME), {"EndpointConfigName": f"{NAME}-config"})
        threading.Timer(0.1, token.cancel).start()
        with pytest.raises(Cancelled):
            # sleep=None: real time between polls, here longer than any test run, so only the cancel ends it.
            wait_on(sm, None, NAME, Deps(cancel=token), poll_s=threading.TIMEOUT_MAX)
        stub.assert_no_pending_responses()
