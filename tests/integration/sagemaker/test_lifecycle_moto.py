"""The deploy → status → wait → delete lifecycle against moto (in-process and through its HTTP server)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from gemmaserve.errors import DeployInterrupted, UsageError
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.deployment.endpoint import execute_deploy, plan_deploy
from gemmaserve.sagemaker.operations.status import EndpointStatus, describe_endpoint_state, wait_for_endpoint
from gemmaserve.sagemaker.operations.teardown import delete_deployment
from gemmaserve.sagemaker.spec.container import parse_tags, tags_to_dict
from gemmaserve.sagemaker.spec.requests import DeleteRequest, WaitRequest
from tests.support.sagemaker.helpers import START, Lines, ScriptedClock, make_role, make_spec

REGION = "us-east-1"


def _lifecycle(sm: Any, logs: Any, iam: Any) -> None:
    clock = ScriptedClock()
    spec = make_spec(make_role(iam))
    plan = plan_deploy(spec, region=REGION, now=START)
    assert plan.serve_args == [
        "--model",
        "google/gemma-4-E2B-it",
        "--dtype",
        "float16",
        "--max-model-len",
        "8192",
        "--enforce-eager",
    ]
    progress = Lines()
    result = execute_deploy(
        sm,
        plan,
        Deps(clock=clock.now, progress=progress),
        wait=lambda: wait_for_endpoint(
            sm,
            logs,
            WaitRequest(endpoint_name=spec.endpoint_name, region=REGION),
            Deps(clock=clock.now, sleep=clock.sleep),
        ),
    )
    assert result.created == ["model", "endpoint-config", "endpoint"]
    assert result.state is not None and result.state.status is EndpointStatus.IN_SERVICE
    state = describe_endpoint_state(sm, spec.endpoint_name, region=REGION, now=clock.now())
    assert state.instance_type == "ml.g4dn.xlarge" and state.config_name == "gemma4-e2b-t4-config"
    tags = parse_tags(tags_to_dict(sm.list_tags(ResourceArn=state.arn)["Tags"]))
    assert tags is not None and tags.owner == "ana" and tags.model == "gemma-4-e2b/bf16"
    model = sm.describe_model(ModelName="gemma4-e2b-t4-model")
    assert model["PrimaryContainer"]["Environment"]["SM_VLLM_DTYPE"] == "float16"
    with pytest.raises(UsageError, match="already exists"):
        execute_deploy(sm, plan, Deps(clock=clock.now))

    report = delete_deployment(
        sm, DeleteRequest(endpoint_name=spec.endpoint_name, region=REGION), Deps(clock=clock.now, sleep=clock.sleep)
    )
    assert report.deleted == [
        "endpoint:gemma4-e2b-t4",
        "endpoint-config:gemma4-e2b-t4-config",
        "model:gemma4-e2b-t4-model",
    ]
    assert (
        describe_endpoint_state(sm, spec.endpoint_name, region=REGION, now=clock.now()).status
        is EndpointStatus.NOT_FOUND
    )
    again = delete_deployment(
        sm, DeleteRequest(endpoint_name=spec.endpoint_name, region=REGION), Deps(clock=clock.now, sleep=clock.sleep)
    )
    assert again.deleted == []
    assert set(again.absent) == {
        "endpoint:gemma4-e2b-t4",
        "endpoint-config:gemma4-e2b-t4-config",
        "model:gemma4-e2b-t4-model",
    }


def test_lifecycle_in_process() -> None:
    with mock_aws():
        _lifecycle(
            boto3.client("sagemaker", region_name=REGION),
            boto3.client("logs", region_name=REGION),
            boto3.client("iam", region_name=REGION),
        )


def test_lifecycle_through_the_moto_http_server(moto_factory: Any) -> None:
    _lifecycle(moto_factory("sagemaker", REGION), moto_factory("logs", REGION), moto_factory("iam", REGION))


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_interrupted_deploy_deletes_what_it_created(moto_factory: Any, interrupt: type[BaseException]) -> None:
    sm = moto_factory("sagemaker", REGION)
    clock = ScriptedClock()
    plan = plan_deploy(make_spec(make_role(moto_factory("iam", REGION))), region=REGION, now=START)

    def wait() -> Any:
        raise interrupt()

    with pytest.raises(DeployInterrupted if interrupt is KeyboardInterrupt else interrupt):
        execute_deploy(sm, plan, Deps(clock=clock.now, sleep=clock.sleep), wait=wait)
    assert sm.list_endpoints()["Endpoints"] == []
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []
    assert sm.list_models()["Models"] == []


def test_interrupted_deploy_with_keep_leaves_everything(moto_factory: Any) -> None:
    sm = moto_factory("sagemaker", REGION)
    clock = ScriptedClock()
    plan = plan_deploy(make_spec(make_role(moto_factory("iam", REGION))), region=REGION, now=START)

    def wait() -> Any:
        raise KeyboardInterrupt

    with pytest.raises(DeployInterrupted) as caught:
        execute_deploy(sm, plan, Deps(clock=clock.now), wait=wait, keep=True)
    assert caught.value.fields["remaining"] == [
        "model:gemma4-e2b-t4-model",
        "endpoint-config:gemma4-e2b-t4-config",
        "endpoint:gemma4-e2b-t4",
    ]
    assert [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]] == ["gemma4-e2b-t4"]
