"""Least-privilege IAM: the endpoint execution role and the CodeBuild role, as documents (pure) and ensured (adapter).

Not AmazonSageMakerFullAccess: the execution role may pull the image, write its
endpoint's logs, and read the model's S3 prefix if there is one — nothing else.
Creation is idempotent; the inline policy is rewritten each time so it stays exact, and
it keeps every region and image an earlier run allowed, so making the role usable in a new
region never breaks an old one. The trust policy names the account (``aws:SourceAccount``),
so no other account's SageMaker can make it act for them (the confused deputy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gemmaserve.errors import AwsError, UsageError
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import call, is_not_found
from gemmaserve.sagemaker.spec.container import default_image_uri, image_for_region
from gemmaserve.sagemaker.spec.requests import RoleCreateRequest

EXECUTION_POLICY_NAME = "gemmaserve-endpoint-execution"


class RoleResult(ActionResult):
    role_name: str
    role_arn: str | None
    created: bool
    dry_run: bool = False
    trust_policy: dict[str, Any]
    policy_name: str
    policy: dict[str, Any]


def trust_policy(service: str, account: str | None = None) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if account:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": account}}
    return {"Version": "2012-10-17", "Statement": [statement]}


def role_account(role_arn: str) -> str:
    """``arn:aws:iam::123456789012:role/x`` → ``123456789012``; anything else is a UsageError."""
    parts = role_arn.split(":")
    if (
        len(parts) != 6
        or parts[0] != "arn"
        or parts[2] != "iam"
        or not parts[4].isdigit()
        or not parts[5].startswith("role/")
    ):
        raise UsageError(
            f"{role_arn!r} is not an IAM role ARN.", hint="arn:aws:iam::ACCOUNT:role/NAME", role_arn=role_arn
        )
    return parts[4]


def log_group_arns(region: str, account_id: str) -> list[str]:
    return [
        f"arn:aws:logs:{region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*",
        f"arn:aws:logs:{region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*:log-stream:*",
    ]


def statement_resources(policy: dict[str, Any], sid: str) -> list[str]:
    for statement in policy.get("Statement", []):
        if statement.get("Sid") == sid:
            resource = statement.get("Resource", [])
            return [resource] if isinstance(resource, str) else list(resource)
    return []


def policy_regions(policy: dict[str, Any]) -> list[str]:
    """The regions whose endpoint logs an execution policy allows (from its EndpointLogs ARNs)."""
    regions = [arn.split(":")[3] for arn in statement_resources(policy, "EndpointLogs") if arn.count(":") >= 4]
    return list(dict.fromkeys(regions))


def ecr_repository_arn(image_uri: str) -> str:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG`` → the repository ARN."""
    host, _, rest = image_uri.partition("/")
    parts = host.split(".")
    if len(parts) < 6 or parts[1:3] != ["dkr", "ecr"] or not rest:
        raise UsageError(
            f"{image_uri!r} is not an ECR image URI.", hint="ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG"
        )
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
    *,
    regions: list[str],
    account_id: str,
    image_uris: list[str],
    s3_model_uri: str | None = None,
    repository_arns: list[str] | None = None,
) -> dict[str, Any]:
    """The execution role's policy: ECR pull of these images, its endpoints' logs in each region, the S3 prefix."""
    statements: list[dict[str, Any]] = [
        {"Sid": "EcrAuth", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {
            "Sid": "EcrPull",
            "Effect": "Allow",
            "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            "Resource": sorted({ecr_repository_arn(uri) for uri in image_uris} | set(repository_arns or [])),
        },
        {
            "Sid": "EndpointLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            "Resource": [arn for region in regions for arn in log_group_arns(region, account_id)],
        },
        {
            "Sid": "EndpointMetrics",
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
        },
        {
            # `sagemaker update` rolls back on the alarms it creates (gemmaserve-<endpoint>-<stamp>-…), and
            # SageMaker reads them as this role: "Ensure that your IAM execution role has permission to perform
            # the cloudwatch:DescribeAlarms action on the auto-rollback alarms you specify"
            # (docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html).
            "Sid": "UpdateRollbackAlarms",
            "Effect": "Allow",
            "Action": "cloudwatch:DescribeAlarms",
            "Resource": [f"arn:aws:cloudwatch:{region}:{account_id}:alarm:gemmaserve-*" for region in regions],
        },
    ]
    if s3_model_uri:
        bucket, objects, prefix = s3_prefix_arns(s3_model_uri)
        statements.append({"Sid": "ModelRead", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects})
        listing: dict[str, Any] = {"Sid": "ModelList", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket}
        if prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}}
        statements.append(listing)
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True)
class RoleSpec:
    """A role gemmaserve owns: its name, the service it trusts (for ``account`` only), its one inline policy."""

    role_name: str
    service: str
    policy_name: str
    policy: dict[str, Any]
    description: str
    account: str | None = None


def ensure_role(iam: Any, spec: RoleSpec, *, region: str, dry_run: bool = False) -> RoleResult:
    """Create the role if missing (trusting ``service`` for ``account`` only), then put the inline policy.

    Safe to repeat; an existing role's trust policy is brought to the same document.
    """
    role_name, policy_name, policy, account = spec.role_name, spec.policy_name, spec.policy, spec.account
    service, description = spec.service, spec.description
    trust = trust_policy(service, account)
    result = RoleResult(
        role_name=role_name,
        role_arn=None,
        created=False,
        dry_run=dry_run,
        trust_policy=trust,
        policy_name=policy_name,
        policy=policy,
    )
    try:
        role = call(region, iam.get_role, RoleName=role_name)["Role"]
    except AwsError as error:
        if not is_not_found(error):
            raise
        role = None
    if dry_run:
        return result.model_copy(update={"role_arn": role["Arn"] if role else None, "created": role is None})
    if role is None:
        role = call(
            region,
            iam.create_role,
            RoleName=role_name,
            AssumeRolePolicyDocument=json.dumps(trust),
            Description=description,
            Tags=[{"Key": "gemmaserve:tool", "Value": "gemmaserve"}],
        )["Role"]
        result.created = True
    elif account and _trust_document(role) != trust:
        call(region, iam.update_assume_role_policy, RoleName=role_name, PolicyDocument=json.dumps(trust))
    call(region, iam.put_role_policy, RoleName=role_name, PolicyName=policy_name, PolicyDocument=json.dumps(policy))
    result.role_arn = role["Arn"]
    return result


def _trust_document(role: dict[str, Any]) -> dict[str, Any]:
    return _policy_document(role.get("AssumeRolePolicyDocument", {}))


def _policy_document(document: str | dict[str, Any]) -> dict[str, Any]:
    """IAM returns policy documents URL-encoded JSON (a string) or, through some SDKs, already parsed."""
    if isinstance(document, str):
        from urllib.parse import unquote

        return dict(json.loads(unquote(document)))
    return dict(document)


def account_id(sts: Any, *, region: str) -> str:
    return str(call(region, sts.get_caller_identity)["Account"])


def read_inline_policy(iam: Any, role_name: str, policy_name: str, *, region: str) -> dict[str, Any] | None:
    """The role's inline policy document, or None when the role has no policy of that name."""
    try:
        document = call(region, iam.get_role_policy, RoleName=role_name, PolicyName=policy_name)["PolicyDocument"]
    except AwsError as error:
        if is_not_found(error):
            return None
        raise
    return _policy_document(document)


def ensure_execution_role(iam: Any, sts: Any, request: RoleCreateRequest) -> RoleResult:
    """The execution role, usable in the request's regions and every region it already served.

    It may pull the pinned image (each region's) and any given ones, write the endpoint's logs per region and
    (``model_s3``) read the S3 prefix.
    """
    chosen = request.chosen_regions()
    region, role_name, s3_model_uri = chosen[0], request.role_name, request.model_s3
    image_uris = list(
        dict.fromkeys(
            [image_for_region(uri, r) for uri in request.image for r in chosen]
            if request.image
            else [default_image_uri(r) for r in chosen]
        )
    )
    account = account_id(sts, region=region)
    wanted = list(dict.fromkeys(chosen))
    existing = read_inline_policy(iam, role_name, EXECUTION_POLICY_NAME, region=region)
    kept_repositories: list[str] = []
    if existing is not None:
        wanted = list(dict.fromkeys(policy_regions(existing) + wanted))
        kept_repositories = statement_resources(existing, "EcrPull")
        if s3_model_uri is None and statement_resources(existing, "ModelRead"):
            raise UsageError(
                f"Role {role_name} already allows reading a model from S3; re-running without --model-s3 would "
                "remove that.",
                hint="Pass the same --model-s3 again (or a new one to replace it).",
                role_name=role_name,
            )
    policy = execution_role_policy(
        regions=wanted,
        account_id=account,
        image_uris=image_uris,
        s3_model_uri=s3_model_uri,
        repository_arns=kept_repositories,
    )
    spec = RoleSpec(
        role_name=role_name,
        service="sagemaker.amazonaws.com",
        policy_name=EXECUTION_POLICY_NAME,
        policy=policy,
        account=account,
        description="gemmaserve SageMaker endpoint execution role (least privilege)",
    )
    return ensure_role(iam, spec, region=region, dry_run=request.dry_run)
