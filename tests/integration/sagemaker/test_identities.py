"""Identities: the role is in the caller's account, works in every region a deploy may fall back to, and
`role create` adds regions without breaking earlier ones and names the account in its trust policy (moto)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gemmaserve.errors import UsageError
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.image.iam import EXECUTION_POLICY_NAME, policy_regions
from gemmaserve.sagemaker.spec.requests import PreflightRequest
from tests.support.sagemaker.helpers import make_role, run

ACCOUNT = "123456789012"  # moto's


def findings(factory: Any, role_arn: str, regions: list[str]) -> dict[str, str]:
    request = PreflightRequest(model="gemma-4-e2b", instance=["ml.g6.xlarge"], regions=regions, role_arn=role_arn)
    report = api.preflight(request, SageMakerSession(factory=factory, check_model=None))
    return {f.check: f.status.value for f in report.findings if f.check.startswith(("execution-role", "role-"))}


def test_a_role_of_another_account_fails_preflight(moto_factory: Any) -> None:
    found = findings(moto_factory, "arn:aws:iam::210987654321:role/gemmaserve-endpoint", ["us-east-1"])
    assert found == {"execution-role": "fail"}


def test_a_malformed_role_arn_is_a_usage_error(moto_factory: Any) -> None:
    with pytest.raises(UsageError, match="not an IAM role ARN"):
        findings(moto_factory, "gemmaserve-endpoint", ["us-east-1"])


def test_role_create_adds_a_region_without_breaking_the_first(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sagemaker", "role", "create", "--yes", "--region", "us-east-1", "--json"], capsys)
    assert code == 0, err
    arn = json.loads(out)["role_arn"]
    code, out, err = run(["sagemaker", "role", "create", "--yes", "--region", "eu-west-1", "--json"], capsys)
    assert code == 0, err
    stored = aws_env("iam", "us-east-1").get_role_policy(
        RoleName="gemmaserve-endpoint", PolicyName=EXECUTION_POLICY_NAME
    )["PolicyDocument"]
    assert policy_regions(stored) == ["us-east-1", "eu-west-1"]
    pulls = next(s for s in stored["Statement"] if s["Sid"] == "EcrPull")["Resource"]
    assert "arn:aws:ecr:us-east-1:763104351884:repository/vllm" in pulls
    assert "arn:aws:ecr:eu-west-1:763104351884:repository/vllm" in pulls
    assert findings(aws_env, arn, ["us-east-1", "eu-west-1"]) == {"execution-role": "ok", "role-regions": "ok"}


def test_role_create_with_several_regions_and_preflight_names_a_missing_one(
    aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["sagemaker", "role", "create", "--yes", "--regions", "us-east-1,us-west-2", "--json"], capsys)
    arn = json.loads(out)["role_arn"]
    assert code == 0
    found = findings(aws_env, arn, ["us-east-1", "us-west-2", "eu-central-1"])
    assert found == {"execution-role": "ok", "role-regions:eu-central-1": "fail", "role-regions": "ok"}


def test_trust_policy_names_the_account_and_an_old_role_is_brought_up_to_date(
    aws_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    iam = aws_env("iam", "us-east-1")
    make_role(iam, name="gemmaserve-endpoint")  # an earlier version's role: trust without a condition
    code, _, err = run(["sagemaker", "role", "create", "--yes", "--region", "us-east-1"], capsys)
    assert code == 0, err
    trust = iam.get_role(RoleName="gemmaserve-endpoint")["Role"]["AssumeRolePolicyDocument"]
    statement = trust["Statement"][0]
    assert statement["Principal"]["Service"] == "sagemaker.amazonaws.com"
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}


def test_a_role_not_made_by_gemmaserve_is_a_warning_not_a_pass(moto_factory: Any) -> None:
    role = make_role(moto_factory("iam", "us-east-1"))
    assert findings(moto_factory, role, ["us-east-1"]) == {"execution-role": "ok", "role-regions": "warn"}


def test_the_role_fix_for_a_custom_image_works_when_followed(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The fix names --image: a role re-made without it would still not pull the custom image."""
    import shlex

    image = f"{ACCOUNT}.dkr.ecr.{{region}}.amazonaws.com/team/gemma:v1"
    code, out, _ = run(["sagemaker", "role", "create", "--yes", "--region", "us-east-1", "--json"], capsys)
    arn = json.loads(out)["role_arn"]
    request = PreflightRequest(
        model="gemma-4-e2b", instance=["ml.g6.xlarge"], regions=["us-east-1"], role_arn=arn, image=image
    )
    failed = [
        f
        for f in api.preflight(request, SageMakerSession(factory=aws_env, check_model=None)).findings
        if f.check.startswith("role")
    ]
    fix = next(f.fix for f in failed if f.status.value == "fail")
    assert fix is not None and f"--image {image}" in fix
    command = shlex.split(fix.split(": ", 1)[1])
    assert command[:3] == ["gemmaserve", "sagemaker", "role"]
    code, _, err = run([*command[1:], "--yes"], capsys)
    assert code == 0, err
    again = api.preflight(request, SageMakerSession(factory=aws_env, check_model=None)).findings
    assert {f.check: f.status.value for f in again if f.check.startswith("role")} == {"role-regions": "ok"}
