"""`gemmaserve sagemaker update` as a user runs it, against moto's server and the update fake."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gemmaserve.sagemaker.aws import Boto3ClientFactory, Deps
from gemmaserve.sagemaker.deployment.endpoint import execute_deploy, plan_deploy
from tests.support.sagemaker.helpers import START, ScriptedClock, make_role, make_spec, record_derived_image, run
from tests.support.sagemaker.update_fake import UpdateFake

REGION = "us-east-1"
NAME = "gemma4-e2b-t4"


@pytest.fixture
def fake(moto_factory: Any, moto_server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[UpdateFake]:
    proxy = UpdateFake(moto_server_url)
    monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", proxy.url)
    try:
        yield proxy
    finally:
        proxy.close()


def test_update_without_the_gate_ends_on_the_new_config(
    fake: UpdateFake, moto_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = Boto3ClientFactory(endpoint_url=fake.url)
    role = make_role(moto_factory("iam", REGION))
    image = record_derived_image()
    spec = make_spec(role, image_uri=image)
    execute_deploy(
        clients("sagemaker", REGION), plan_deploy(spec, region=REGION, now=START), Deps(clock=ScriptedClock().now)
    )
    fake.scenario.bake_reads = 0  # SageMaker's bake is not simulated here: the first read shows it done
    code, out, err = run(
        ["sagemaker", "update", NAME, "--model", "e2b", "--encoding", "bf16", "--instance", "ml.g4dn.xlarge",
         "--image", image, "--role-arn", role, "--region", REGION, "--accept-unknown", "--no-gate", "--yes"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "Outcome: updated" in out and "Deleted: alarm:" in out
    sent = [body for op, body in fake.calls if op == "UpdateEndpoint"]
    assert (
        len(sent) == 1
        and sent[0]["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "CANARY"
    )
    described = clients("sagemaker", REGION).describe_endpoint(EndpointName=NAME)
    assert described["EndpointConfigName"] == sent[0]["EndpointConfigName"]


def test_update_refused_by_preflight_creates_nothing(
    fake: UpdateFake, moto_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    role = make_role(moto_factory("iam", REGION))
    code, _out, err = run(
        ["sagemaker", "update", NAME, "--model", "e2b", "--encoding", "bf16", "--instance", "ml.g4dn.xlarge",
         "--role-arn", role, "--region", REGION, "--accept-unknown", "--yes"],
        capsys,
    )  # fmt: skip
    assert code == 1 and "nothing was created" in err  # a T4 with the stock image: the Turing clamp is missing
    assert not [op for op, _ in fake.calls if op in ("CreateModel", "CreateEndpointConfig", "UpdateEndpoint")]
