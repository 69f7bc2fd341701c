"""Shared test builders: a scripted clock, a DeploySpec, an IAM role in moto."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gemmaserve.cli import app
from gemmaserve.cli.errors import run_with_error_mapping
from gemmaserve.progress import ProgressEvent
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.deployment.endpoint import DeploySpec
from gemmaserve.sagemaker.operations.status import EndpointState, wait_for_endpoint
from gemmaserve.sagemaker.spec.container import serve_args_to_env
from gemmaserve.sagemaker.spec.requests import WaitRequest

START = datetime(2026, 12, 2, 17, 0, tzinfo=UTC)
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


@dataclass
class ScriptedClock:
    """now() and sleep() over a virtual time line: sleep advances it instantly."""

    current: datetime = START
    sleeps: list[float] = field(default_factory=list)

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.current += timedelta(seconds=seconds)


class Lines(list[str]):
    """A progress callback that keeps each event's message (the line the CLI prints) and, in ``events``, the event."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[ProgressEvent] = []

    def __call__(self, event: ProgressEvent) -> None:
        self.events.append(event)
        self.append(event.message)


class StubbedCodeBuild:
    """A client factory: moto for IAM/ECR/STS/S3; CodeBuild through Stubber (moto demands a source location that
    NO_SOURCE has not)."""

    def __init__(self, moto_factory: Any, region: str = "us-east-1") -> None:
        self.moto = moto_factory
        self.client = boto3.client("codebuild", region_name=region)
        self.stub = Stubber(self.client)
        self.stub.activate()

    def __call__(self, service: str, region: str) -> Any:
        return self.client if service == "codebuild" else self.moto(service, region)

    def expect_a_new_project(self) -> Stubber:
        """The default project is not there yet and gets created; returns the stub for the calls that follow."""
        self.stub.add_response("batch_get_projects", {"projects": []}, {"names": ["gemmaserve-turing-image"]})
        self.stub.add_response("create_project", {"project": {"name": "gemmaserve-turing-image"}})
        return self.stub


def pool_config(endpoint_name: str, region: str = "us-east-1") -> dict[str, Any]:
    """DescribeEndpointConfig's answer for ``endpoint_name``'s config: a pool of ml.g6.xlarge, then ml.g6.2xlarge."""
    return {
        "EndpointConfigName": f"{endpoint_name}-config",
        "EndpointConfigArn": f"arn:aws:sagemaker:{region}:123456789012:endpoint/{endpoint_name}-config",
        "CreationTime": START,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{endpoint_name}-model",
                "InstancePools": [
                    {"InstanceType": "ml.g6.xlarge", "Priority": 1},
                    {"InstanceType": "ml.g6.2xlarge", "Priority": 2},
                ],
            }
        ],
    }


def make_role(iam: Any, name: str = "gemmaserve-exec") -> str:
    return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"])


def make_spec(role_arn: str, **overrides: Any) -> DeploySpec:
    values: dict[str, Any] = {
        "endpoint_name": "gemma4-e2b-t4",
        "instance_types": ["ml.g4dn.xlarge"],
        "role_arn": role_arn,
        "environment": serve_args_to_env(
            ["google/gemma-4-E2B-it", "--dtype", "float16", "--max-model-len", "8192", "--enforce-eager"]
        ),
        "model_label": "gemma-4-e2b/bf16",
        "owner": "ana",
        "ttl_s": 3600.0,
    }
    values.update(overrides)
    return DeploySpec(**values)


DERIVED_T4 = (
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/gemmaserve-vllm:server-sagemaker-cuda-v2.3-gemmaserve0.1.0-turing"
)


def record_derived_image(image_uri: str = DERIVED_T4) -> str:
    """What a successful `sagemaker image build` leaves behind: the build record preflight trusts."""
    from gemmaserve.sagemaker.image.dockerfile import ImageBuildRecord, save_record
    from gemmaserve.sagemaker.spec.container import PINNED_IMAGE, default_image_uri

    save_record(
        ImageBuildRecord(
            image_uri=image_uri,
            region="us-east-1",
            build_id="gemmaserve-turing-image:1",
            built_at=START,
            base_image=default_image_uri("us-east-1"),
            base_vllm_version=PINNED_IMAGE.vllm_version,
            base_cuda_version=PINNED_IMAGE.cuda_version,
            gemmaserve_source="wheel:gemmaserve-0.1.0-py3-none-any.whl",
            clamp_verified=True,
        )
    )
    return image_uri


def deploy_argv(instances: Sequence[str], *flags: str, model: str = "gemma-4-e2b") -> list[str]:
    """``sagemaker deploy`` arguments: the model, one ``--instance`` a type (in the order given), then ``flags``."""
    return ["sagemaker", "deploy", "--model", model, *(arg for t in instances for arg in ("--instance", t)), *flags]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI as a user runs it (errors mapped to exit codes): exit code, stdout, stderr."""
    code = run_with_error_mapping(app, args, debug=False)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


HUB_ARN = "arn:aws:sagemaker:us-east-1:aws:hub/SageMakerPublicHub"


def hub_summaries(*names: str) -> list[dict[str, Any]]:
    """ListHubContents summaries of the public JumpStart hub, as botocore's stubber checks them."""
    return [
        {
            "HubContentName": name,
            "HubContentArn": f"arn:aws:sagemaker:us-east-1:aws:hub-content/x/Model/{name}",
            "HubContentType": "Model",
            "DocumentSchemaVersion": "2.0.0",
            "HubContentStatus": "Available",
            "HubContentVersion": "1.0.0",
            "CreationTime": "2026-06-01T00:00:00Z",
        }
        for name in names
    ]


def hub_content(summary: dict[str, Any], default_type: str, supported_types: list[str]) -> dict[str, Any]:
    """The DescribeHubContent answer for ``summary``: its document names the instance types."""
    document = {"DefaultInferenceInstanceType": default_type, "SupportedInferenceInstanceTypes": supported_types}
    return {
        "HubContentName": summary["HubContentName"],
        "HubContentArn": summary["HubContentArn"],
        "HubContentVersion": "1.0.0",
        "HubContentType": "Model",
        "DocumentSchemaVersion": "2.0.0",
        "HubName": "SageMakerPublicHub",
        "HubArn": HUB_ARN,
        "HubContentDocument": json.dumps(document),
        "HubContentStatus": "Available",
        "CreationTime": "2026-06-01T00:00:00Z",
        "HubContentDisplayName": "Gemma 4 E2B IT",
    }


def wait_on(sm: Any, logs: Any, name: str, deps: Deps, **options: float) -> EndpointState:
    """``wait_for_endpoint`` on ``name`` in us-east-1 with the wait request's ``options`` (timeout_s, poll_s)."""
    return wait_for_endpoint(sm, logs, WaitRequest(endpoint_name=name, region="us-east-1", **options), deps)
