"""Least-privilege IAM: the endpoint execution role and the CodeBuild role, as documents (pure) and ensured (adapter).

Not AmazonSageMakerFullAccess: the execution role may pull the image, write its
endpoint's logs, and read the model's S3 prefix if there is one — nothing else.
Creation is idempotent; the inline policy is rewritten each time so it stays exact.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError, UsageError
from gemmaserve.sagemaker.aws import call, is_not_found

EXECUTION_POLICY_NAME = "gemmaserve-endpoint-execution"


class RoleResult(BaseModel):
    role_name: str
    role_arn: str | None
    created: bool
    dry_run: bool = False
    trust_policy: dict[str, Any]
    policy_name: str
    policy: dict[str, Any]


def trust_policy(service: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}


def ecr_repository_arn(image_uri: str) -> str:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG`` → the repository ARN."""
    host, _, rest = image_uri.partition("/")
    parts = host.split(".")
    if len(parts) < 6 or parts[1:3] != ["dkr", "ecr"] or not rest:
        raise UsageError(f"{image_uri!r} is not an ECR image URI.", hint="ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG")
    repository = rest.split("@")[0].rsplit(":", 1)[0]
    partition = "aws-cn" if host.endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{parts[3]}:{parts[0]}:repository/{repository}"


def s3_prefix_arns(s3_uri: str) -> tuple[str, str, str]:
    """``s3://bucket/prefix`` → (bucket ARN, object ARN pattern, prefix)."""
    if not s3_uri.startswith("s3://"):
        raise UsageError(f"{s3_uri!r} is not an s3:// URI.")
    bucket, _, prefix = s3_uri[5:].partition("/")
    prefix = prefix.rstrip("/")
    objects = f"arn:aws:s3:::{bucket}/{prefix}/*" if prefix else f"arn:aws:s3:::{bucket}/*"
    return f"arn:aws:s3:::{bucket}", objects, prefix


def execution_role_policy(
    *, region: str, account_id: str, image_uris: list[str], s3_model_uri: str | None = None
) -> dict[str, Any]:
    """The execution role's policy: ECR pull of these images, its endpoints' logs, the model's S3 prefix."""
    statements: list[dict[str, Any]] = [
        {"Sid": "EcrAuth", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Sid": "EcrPull", "Effect": "Allow",
         "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
         "Resource": sorted({ecr_repository_arn(uri) for uri in image_uris})},
        {"Sid": "EndpointLogs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": [f"arn:aws:logs:{region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*",
                      f"arn:aws:logs:{region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*:log-stream:*"]},
        {"Sid": "EndpointMetrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         "Condition": {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}},
    ]
    if s3_model_uri:
        bucket, objects, prefix = s3_prefix_arns(s3_model_uri)
        statements.append({"Sid": "ModelRead", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects})
        listing: dict[str, Any] = {"Sid": "ModelList", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket}
        if prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}
        statements.append(listing)
    return {"Version": "2012-10-17", "Statement": statements}


def ensure_role(
    iam: Any, *, role_name: str, service: str, policy_name: str, policy: dict[str, Any], region: str,
    description: str, dry_run: bool = False,
) -> RoleResult:
    """Create the role if missing (trusting ``service``), then put the inline policy. Safe to repeat."""
    trust = trust_policy(service)
    result = RoleResult(role_name=role_name, role_arn=None, created=False, dry_run=dry_run, trust_policy=trust,
                        policy_name=policy_name, policy=policy)
    try:
        role = call(region, iam.get_role, RoleName=role_name)["Role"]
    except AwsError as error:
        if not is_not_found(error):
            raise
        role = None
    if dry_run:
        return result.model_copy(update={"role_arn": role["Arn"] if role else None, "created": role is None})
    if role is None:
        role = call(region, iam.create_role, RoleName=role_name, AssumeRolePolicyDocument=json.dumps(trust),
                    Description=description, Tags=[{"Key": "gemmaserve:tool", "Value": "gemmaserve"}])["Role"]
        result.created = True
    call(region, iam.put_role_policy, RoleName=role_name, PolicyName=policy_name, PolicyDocument=json.dumps(policy))
    result.role_arn = role["Arn"]
    return result


def account_id(sts: Any, *, region: str) -> str:
    return str(call(region, sts.get_caller_identity)["Account"])


def ensure_execution_role(
    iam: Any, sts: Any, *, region: str, role_name: str = "gemmaserve-endpoint", image_uris: list[str],
    s3_model_uri: str | None = None, dry_run: bool = False,
) -> RoleResult:
    policy = execution_role_policy(region=region, account_id=account_id(sts, region=region), image_uris=image_uris,
                                   s3_model_uri=s3_model_uri)
    return ensure_role(iam, role_name=role_name, service="sagemaker.amazonaws.com",
                       policy_name=EXECUTION_POLICY_NAME, policy=policy, region=region, dry_run=dry_run,
                       description="gemmaserve SageMaker endpoint execution role (least privilege)")
