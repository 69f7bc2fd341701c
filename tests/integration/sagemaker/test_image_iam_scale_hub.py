"""The derived image (render + CodeBuild in moto), least-privilege IAM, autoscaling (moto), JumpStart (Stubber)."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gemmaserve.errors import AwsError, UsageError
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.image.codebuild import (
    BuildInputs,
    build_image,
    codebuild_role_policy,
    plan_image_build,
)
from gemmaserve.sagemaker.image.dockerfile import ARCH_CHECK
from gemmaserve.sagemaker.image.iam import (
    ecr_repository_arn,
    ensure_execution_role,
    execution_role_policy,
)
from gemmaserve.sagemaker.image.jumpstart import list_gemma4_models
from gemmaserve.sagemaker.operations.autoscale import autoscale_calls, configure_autoscaling
from gemmaserve.sagemaker.spec.container import image_claims_turing_clamp, image_cuda_version
from gemmaserve.sagemaker.spec.requests import AutoscaleRequest, ImageBuildRequest, RoleCreateRequest
from tests.support.sagemaker.helpers import Lines, ScriptedClock, StubbedCodeBuild, hub_content, hub_summaries

REGION = "us-east-1"
BASE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:server-sagemaker-cuda-v2.3"
GIT_REQUIREMENT = "gemmaserve @ git+https://github.com/example/gemmaserve@v0.1.0"


def test_dockerfile_keeps_the_base_and_fails_without_sm_75() -> None:
    plan = plan_image_build(BuildInputs(region=REGION, account="123456789012", requirement=GIT_REQUIREMENT))
    lines = plan.dockerfile.splitlines()
    assert lines[0] == f"FROM {BASE}"
    assert not any(line.startswith(("ENTRYPOINT", "CMD")) for line in lines)  # the stock entrypoint stays
    assert "gemmaserve turing status --capability sm_75" in plan.dockerfile and "get_arch_list" in plan.dockerfile
    assert "-c /tmp/gemmaserve-keep.txt" in plan.dockerfile  # torch/vLLM pinned to the image's own
    # The derived tag keeps the base tag (CUDA known); its text alone proves no clamp.
    assert image_cuda_version(plan.target_image) == (13, 0)
    assert image_claims_turing_clamp(plan.target_image) is None
    embedded = plan.buildspec.split('DOCKERFILE_B64: "')[1].split('"')[0]
    assert base64.b64decode(embedded).decode() == plan.dockerfile
    assert "on-failure: ABORT" in plan.buildspec and 'CODEBUILD_BUILD_SUCCEEDING" = "1"' in plan.buildspec


def test_the_arch_check_fails_on_a_torch_without_sm_75() -> None:
    # The CPU torch of this machine has no CUDA kernels at all: the build step must refuse it.
    completed = subprocess.run(
        [sys.executable, "-c", ARCH_CHECK], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode != 0 and "no sm_75" in completed.stderr


def test_execution_policy_is_least_privilege() -> None:
    policy = execution_role_policy(
        regions=[REGION], account_id="123456789012", image_uris=[BASE], s3_model_uri="s3://models/gemma4/e2b/"
    )
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert "sagemaker:*" not in actions and not any(a.endswith(":*") for a in actions)
    pull = next(s for s in policy["Statement"] if s["Sid"] == "EcrPull")
    assert pull["Resource"] == ["arn:aws:ecr:us-east-1:763104351884:repository/vllm"]
    read = next(s for s in policy["Statement"] if s["Sid"] == "ModelRead")
    assert read["Resource"] == "arn:aws:s3:::models/gemma4/e2b/*"
    # SageMaker reads an update's rollback alarms as this role: only gemmaserve's own.
    alarms = next(s for s in policy["Statement"] if s["Sid"] == "UpdateRollbackAlarms")
    assert alarms["Action"] == "cloudwatch:DescribeAlarms"
    assert alarms["Resource"] == ["arn:aws:cloudwatch:us-east-1:123456789012:alarm:gemmaserve-*"]
    with pytest.raises(UsageError):
        ecr_repository_arn("docker.io/vllm/vllm-openai:latest")


def test_execution_role_is_created_once_and_trusts_sagemaker(moto_factory: Any) -> None:
    iam, sts = moto_factory("iam", REGION), moto_factory("sts", REGION)
    first = ensure_execution_role(iam, sts, RoleCreateRequest(region=REGION, image=[BASE]))
    second = ensure_execution_role(iam, sts, RoleCreateRequest(region=REGION, image=[BASE]))
    assert first.created and not second.created and first.role_arn == second.role_arn
    stored = iam.get_role_policy(RoleName="gemmaserve-endpoint", PolicyName=first.policy_name)["PolicyDocument"]
    assert stored == first.policy
    trust = iam.get_role(RoleName="gemmaserve-endpoint")["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"]["Service"] == "sagemaker.amazonaws.com"


def _build(status: str, phase: str) -> dict[str, Any]:
    return {
        "builds": [
            {
                "id": "gemmaserve-turing-image:1",
                "buildStatus": status,
                "currentPhase": phase,
                "phases": [{"phaseType": "BUILD", "phaseStatus": "SUCCEEDED", "durationInSeconds": 900}],
                "logs": {"deepLink": "https://console/logs"},
            }
        ]
    }


def test_image_build_creates_resources_idempotently_and_follows_the_build(moto_factory: Any) -> None:
    clock = ScriptedClock()
    factory = StubbedCodeBuild(moto_factory)
    plan = plan_image_build(BuildInputs(region=REGION, account="123456789012", requirement=GIT_REQUIREMENT))
    role_arn = "arn:aws:iam::123456789012:role/gemmaserve-turing-image-us-east-1"
    project = {
        "name": plan.project,
        "source": {"type": "NO_SOURCE", "buildspec": plan.buildspec},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:7.0",
            "computeType": "BUILD_GENERAL1_LARGE",
            "privilegedMode": True,
        },
        "serviceRole": role_arn,
        "timeoutInMinutes": 90,
        "tags": [{"key": "gemmaserve:tool", "value": "gemmaserve"}],
    }
    stub = factory.stub
    stub.add_response("batch_get_projects", {"projects": []}, {"names": [plan.project]})
    stub.add_client_error(
        "create_project",
        service_error_code="InvalidInputException",
        service_message="CodeBuild is not authorized to perform: sts:AssumeRole on " + role_arn,
        expected_params=project,
    )
    stub.add_response("create_project", {"project": {"name": plan.project}}, project)
    stub.add_response(
        "start_build",
        {"build": {"id": "gemmaserve-turing-image:1", "buildStatus": "IN_PROGRESS"}},
        {"projectName": plan.project},
    )
    stub.add_response("batch_get_builds", _build("IN_PROGRESS", "BUILD"), {"ids": ["gemmaserve-turing-image:1"]})
    stub.add_response("batch_get_builds", _build("SUCCEEDED", "COMPLETED"), {"ids": ["gemmaserve-turing-image:1"]})
    progress = Lines()
    result = build_image(
        ImageBuildRequest(region=REGION, requirement=GIT_REQUIREMENT),
        Deps(factory=factory, clock=clock.now, sleep=clock.sleep, progress=progress),
        poll_s=5,
    )
    stub.assert_no_pending_responses()
    assert result.status == "SUCCEEDED" and result.image_uri == plan.target_image
    assert result.repository_uri == "123456789012.dkr.ecr.us-east-1.amazonaws.com/gemmaserve-vllm"
    assert clock.sleeps == [5.0, 5]  # one role-propagation retry, one poll
    # Second run: role and repository exist, the project is updated, not created.
    stub.add_response("batch_get_projects", {"projects": [{"name": plan.project}]}, {"names": [plan.project]})
    stub.add_response("update_project", {"project": {"name": plan.project}}, project)
    stub.add_response(
        "start_build",
        {"build": {"id": "gemmaserve-turing-image:2", "buildStatus": "IN_PROGRESS"}},
        {"projectName": plan.project},
    )
    again = build_image(
        ImageBuildRequest(region=REGION, follow=False, requirement=GIT_REQUIREMENT),
        Deps(factory=factory, clock=clock.now, sleep=clock.sleep),
    )
    stub.assert_no_pending_responses()
    assert again.role is not None and not again.role.created
    assert len(moto_factory("ecr", REGION).describe_repositories()["repositories"]) == 1
    policy = codebuild_role_policy(
        region=REGION, account="123456789012", project="p", base_image=BASE, target_image=plan.target_image
    )
    push = next(s for s in policy["Statement"] if s["Sid"] == "PushTarget")
    assert push["Resource"] == "arn:aws:ecr:us-east-1:123456789012:repository/gemmaserve-vllm"


def test_failed_build_is_an_error_with_its_log(moto_factory: Any) -> None:
    factory = StubbedCodeBuild(moto_factory)
    stub = factory.expect_a_new_project()
    stub.add_response("start_build", {"build": {"id": "b:1", "buildStatus": "IN_PROGRESS"}})
    stub.add_response("batch_get_builds", _build("FAILED", "BUILD"))
    with pytest.raises(AwsError, match="ended FAILED") as info:
        build_image(
            ImageBuildRequest(region=REGION, requirement=GIT_REQUIREMENT), Deps(factory=factory, sleep=lambda s: None)
        )
    assert "https://console/logs" in (info.value.hint or "")


def test_image_build_dry_run_creates_nothing(moto_factory: Any) -> None:
    result = build_image(ImageBuildRequest(region=REGION, dry_run=True), Deps(factory=moto_factory))
    assert result.build_id is None and result.role is not None and result.role.created
    assert moto_factory("iam", REGION).list_roles()["Roles"] == []


def test_autoscaling_registers_target_tracking(moto_factory: Any) -> None:
    aas = moto_factory("application-autoscaling", REGION)
    request = AutoscaleRequest(
        endpoint_name="gemma4-e2b-l4", region=REGION, min_instances=1, max_instances=4, target_invocations=120
    )
    result = configure_autoscaling(aas, request)
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [(t["ResourceId"], t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [
        ("endpoint/gemma4-e2b-l4/variant/AllTraffic", 1, 4)
    ]
    policy = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"][0]
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert config["TargetValue"] == 120.0
    assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    assert result.policy_arn


@pytest.mark.parametrize(("low", "high", "target"), [(0, 2, 10.0), (3, 2, 10.0), (1, 2, 0.0)])
def test_autoscaling_refuses_bad_bounds(low: int, high: int, target: float) -> None:
    with pytest.raises(UsageError):
        # unchecked by the request model (a library caller may build one so): the pure planner refuses too
        autoscale_calls(
            AutoscaleRequest.model_construct(
                endpoint_name="e", min_instances=low, max_instances=high, target_invocations=target
            )
        )


def test_jumpstart_lists_gemma4_with_instance_types() -> None:
    sm = boto3.client("sagemaker", region_name=REGION)
    summaries = hub_summaries("huggingface-llm-gemma-4-e2b-it", "huggingface-llm-gemma-3-4b-it")
    with Stubber(sm) as stub:
        stub.add_response(
            "list_hub_contents",
            {"HubContentSummaries": summaries},
            {"HubName": "SageMakerPublicHub", "HubContentType": "Model", "NameContains": "gemma"},
        )
        stub.add_response(
            "describe_hub_content",
            hub_content(summaries[0], "ml.g6.xlarge", ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge"]),
            {
                "HubName": "SageMakerPublicHub",
                "HubContentType": "Model",
                "HubContentName": "huggingface-llm-gemma-4-e2b-it",
            },
        )
        listing = list_gemma4_models(sm, region=REGION)
        stub.assert_no_pending_responses()
    assert [m.hub_content_name for m in listing.models] == ["huggingface-llm-gemma-4-e2b-it"]
    assert listing.models[0].supported_instance_types == ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge"]
    assert listing.models[0].default_instance_type == "ml.g6.xlarge"
