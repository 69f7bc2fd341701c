"""Build and push the derived T4 image in CodeBuild: ECR repository, least-privilege role, project — all
idempotent — then start the build and follow it. The 8 GB image never touches the user's disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError, SageMakerTimedOut
from gemmaserve.sagemaker.aws import call, is_not_found
from gemmaserve.sagemaker.container import default_image_uri
from gemmaserve.sagemaker.iam import (
    RoleResult,
    account_id,
    ecr_repository_arn,
    ensure_role,
)
from gemmaserve.sagemaker.image import (
    DEFAULT_REPOSITORY,
    derived_image_tag,
    render_buildspec,
    render_dockerfile,
)
from gemmaserve.sagemaker.watch import Progress, _quiet, utc_now

PROJECT_NAME = "gemmaserve-turing-image"
BUILD_IMAGE = "aws/codebuild/standard:7.0"
# Creating a project right after its role fails until IAM propagates (a few seconds, rarely a minute).
_ROLE_PROPAGATION_RETRIES = 8


class ImageBuildPlan(BaseModel):
    region: str
    base_image: str
    target_image: str
    repository: str
    project: str
    dockerfile: str
    buildspec: str


class ImageBuildResult(BaseModel):
    plan: ImageBuildPlan
    role: RoleResult | None = None
    repository_uri: str | None = None
    build_id: str | None = None
    status: str | None = None  # CodeBuild's: SUCCEEDED, FAILED, FAULT, TIMED_OUT, STOPPED, IN_PROGRESS
    phases: list[dict[str, Any]] = []
    logs_url: str | None = None
    image_uri: str | None = None


def codebuild_role_policy(*, region: str, account: str, project: str, base_image: str, target_image: str
                          ) -> dict[str, Any]:
    """Logs for this project, ECR auth, pull of the base repository, push to the target repository."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "BuildLogs", "Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream",
                                                           "logs:PutLogEvents"],
         "Resource": [f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/{project}",
                      f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/{project}:*"]},
        {"Sid": "EcrAuth", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Sid": "PullBase", "Effect": "Allow",
         "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
         "Resource": ecr_repository_arn(base_image)},
        {"Sid": "PushTarget", "Effect": "Allow",
         "Action": ["ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart",
                    "ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
         "Resource": ecr_repository_arn(target_image)},
    ]}


def plan_image_build(*, region: str, account: str, base_image: str | None = None, repository: str = DEFAULT_REPOSITORY,
                     requirement: str | None = None, project: str = PROJECT_NAME) -> ImageBuildPlan:
    base = base_image or default_image_uri(region)
    base_tag = base.rsplit(":", 1)[-1] if ":" in base.rsplit("/", 1)[-1] else "latest"
    target = f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}:{derived_image_tag(base_tag)}"
    dockerfile = render_dockerfile(base, requirement=requirement)
    return ImageBuildPlan(region=region, base_image=base, target_image=target, repository=repository, project=project,
                          dockerfile=dockerfile,
                          buildspec=render_buildspec(dockerfile=dockerfile, base_image=base, target_image=target))


def ensure_repository(ecr: Any, name: str, *, region: str) -> str:
    try:
        found = call(region, ecr.describe_repositories, repositoryNames=[name])["repositories"][0]
    except AwsError as error:
        if not is_not_found(error):
            raise
        found = call(region, ecr.create_repository, repositoryName=name, imageScanningConfiguration={"scanOnPush": True},
                     tags=[{"Key": "gemmaserve:tool", "Value": "gemmaserve"}])["repository"]
    return str(found["repositoryUri"])


def ensure_project(cb: Any, plan: ImageBuildPlan, role_arn: str, *, sleep: Callable[[float], None]) -> None:
    spec = {
        "name": plan.project,
        "source": {"type": "NO_SOURCE", "buildspec": plan.buildspec},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "environment": {"type": "LINUX_CONTAINER", "image": BUILD_IMAGE, "computeType": "BUILD_GENERAL1_LARGE",
                        "privilegedMode": True},
        "serviceRole": role_arn,
        "timeoutInMinutes": 90,
        "tags": [{"key": "gemmaserve:tool", "value": "gemmaserve"}],
    }
    existing = call(plan.region, cb.batch_get_projects, names=[plan.project]).get("projects", [])
    method = cb.update_project if existing else cb.create_project
    for attempt in range(_ROLE_PROPAGATION_RETRIES):
        try:
            call(plan.region, method, **spec)
            return
        except AwsError as error:
            if "not authorized to perform: sts:AssumeRole" not in error.message or attempt == _ROLE_PROPAGATION_RETRIES - 1:
                raise
            sleep(5.0 * (attempt + 1))


def build_image(
    factory: Any,
    *,
    region: str,
    base_image: str | None = None,
    repository: str = DEFAULT_REPOSITORY,
    requirement: str | None = None,
    dry_run: bool = False,
    follow: bool = True,
    timeout_s: float = 5400.0,
    poll_s: float = 20.0,
    now: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress = _quiet,
) -> ImageBuildResult:
    """Ensure repository, role and project; start the build; follow it to the end (``follow``)."""
    account = account_id(factory("sts", region), region=region)
    plan = plan_image_build(region=region, account=account, base_image=base_image, repository=repository,
                            requirement=requirement)
    role = ensure_role(
        factory("iam", region), role_name=f"{plan.project}-{region}", service="codebuild.amazonaws.com",
        policy_name="gemmaserve-image-build", region=region, dry_run=dry_run, account=account,
        policy=codebuild_role_policy(region=region, account=account, project=plan.project,
                                     base_image=plan.base_image, target_image=plan.target_image),
        description="gemmaserve CodeBuild role: build and push the derived T4 image (least privilege)",
    )
    result = ImageBuildResult(plan=plan, role=role)
    if dry_run:
        return result
    result.repository_uri = ensure_repository(factory("ecr", region), repository, region=region)
    cb = factory("codebuild", region)
    assert role.role_arn is not None
    ensure_project(cb, plan, role.role_arn, sleep=sleep)
    build = call(region, cb.start_build, projectName=plan.project)["build"]
    result.build_id = build["id"]
    progress(f"Started CodeBuild build {build['id']} for {plan.target_image}")
    if follow:
        return follow_build(cb, result, timeout_s=timeout_s, poll_s=poll_s, now=now, sleep=sleep, progress=progress)
    result.status = build.get("buildStatus")
    return result


def follow_build(cb: Any, result: ImageBuildResult, *, timeout_s: float, poll_s: float, now: Callable[[], datetime],
                 sleep: Callable[[float], None], progress: Progress) -> ImageBuildResult:
    started = now()
    last_phase = None
    while True:
        build = call(result.plan.region, cb.batch_get_builds, ids=[result.build_id])["builds"][0]
        phase = build.get("currentPhase")
        if phase != last_phase:
            progress(f"CodeBuild phase: {phase}")
            last_phase = phase
        status = build.get("buildStatus")
        if status and status != "IN_PROGRESS":
            result.status = status
            result.phases = [{"phase": p.get("phaseType"), "status": p.get("phaseStatus"),
                              "seconds": p.get("durationInSeconds")} for p in build.get("phases", [])]
            result.logs_url = (build.get("logs") or {}).get("deepLink")
            if status != "SUCCEEDED":
                raise AwsError(
                    f"Image build {result.build_id} ended {status}.",
                    hint=f"Read its log: {result.logs_url or 'CodeBuild console, project ' + result.plan.project}",
                    region=result.plan.region, build_id=result.build_id,
                )
            result.image_uri = result.plan.target_image
            return result
        if (now() - started).total_seconds() >= timeout_s:
            raise SageMakerTimedOut(f"Image build {result.build_id} still running after {timeout_s / 60:.0f} min.",
                                    region=result.plan.region, build_id=result.build_id)
        sleep(poll_s)
