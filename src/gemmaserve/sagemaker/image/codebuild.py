"""Build and push the derived T4 image in CodeBuild: ECR repository, least-privilege role, project — all
idempotent — then start the build and follow it. The 8 GB image never touches the user's disk.

gemmaserve goes in from a wheel built here from the user's checkout (uploaded to a tagged S3
bucket of the account; the build checks its SHA-256), or from a requirement the user names —
never from the package index, where it is not published. A successful build writes the
build record (:mod:`.dockerfile`) that preflight reads to trust the image's clamp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from gemmaserve.errors import AwsError, SageMakerTimedOut, UsageError
from gemmaserve.pinned_image import PINNED_IMAGE
from gemmaserve.progress import (
    Cancelled,
    ProgressEvent,
    check,
    pause,
    report,
)
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import Deps, call, is_not_found
from gemmaserve.sagemaker.image.dockerfile import (
    DEFAULT_REPOSITORY,
    ImageBuildRecord,
    build_bucket,
    derived_image_tag,
    record_location,
    render_buildspec,
    render_dockerfile,
    save_record,
    wheel_filename,
)
from gemmaserve.sagemaker.image.iam import (
    RoleResult,
    RoleSpec,
    account_id,
    ecr_repository_arn,
    ensure_role,
)
from gemmaserve.sagemaker.spec.container import default_image_uri
from gemmaserve.sagemaker.spec.requests import ImageBuildRequest
from gemmaserve.turing.versions import is_supported

PROJECT_NAME = "gemmaserve-turing-image"
BUILD_IMAGE = "aws/codebuild/standard:7.0"
# Creating a project right after its role fails until IAM propagates (a few seconds, rarely a minute).
_ROLE_PROPAGATION_RETRIES = 8


class ImageBuildPlan(ActionResult):
    region: str
    base_image: str
    base_vllm_version: str | None  # known for the pinned base; else the build's own check decides
    base_cuda_version: str | None
    base_vllm_supported: bool | None  # inside the Turing clamp's range (None: unknown until the build)
    target_image: str
    repository: str
    project: str
    gemmaserve_source: str  # "wheel:<file> sha256:<hex>" or "requirement:<spec>"
    record_s3_uri: str  # where the build writes its record (read by preflight on any host)
    wheel_name: str | None = None
    wheel_s3_uri: str | None = None
    wheel_sha256: str | None = None
    dockerfile: str
    buildspec: str


class ImageBuildResult(ActionResult):
    plan: ImageBuildPlan
    role: RoleResult | None = None
    repository_uri: str | None = None
    build_id: str | None = None
    status: str | None = None  # CodeBuild's: SUCCEEDED, FAILED, FAULT, TIMED_OUT, STOPPED, IN_PROGRESS
    phases: list[dict[str, Any]] = Field(default_factory=list)
    logs_url: str | None = None
    image_uri: str | None = None


def codebuild_role_policy(
    *, region: str, account: str, project: str, base_image: str, target_image: str, wheel_s3_uri: str | None = None
) -> dict[str, Any]:
    """Logs for this project, ECR auth, pull of the base, push of the target, read of the wheel, the build record."""
    wheel = (
        [
            {
                "Sid": "ReadWheel",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::" + wheel_s3_uri.removeprefix("s3://"),
            }
        ]
        if wheel_s3_uri
        else []
    )
    record = (
        [
            {
                "Sid": "WriteBuildRecord",
                "Effect": "Allow",
                "Action": "s3:PutObject",
                "Resource": "arn:aws:s3:::" + record_location(target_image).removeprefix("s3://"),
            }
        ]
        if target_image.split("/", 1)[0].count(".") >= 5
        else []
    )
    return {
        "Version": "2012-10-17",
        "Statement": [
            *wheel,
            *record,
            {
                "Sid": "BuildLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": [
                    f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/{project}",
                    f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/{project}:*",
                ],
            },
            {"Sid": "EcrAuth", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {
                "Sid": "PullBase",
                "Effect": "Allow",
                "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                "Resource": ecr_repository_arn(base_image),
            },
            {
                "Sid": "PushTarget",
                "Effect": "Allow",
                "Action": [
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:InitiateLayerUpload",
                    "ecr:UploadLayerPart",
                    "ecr:CompleteLayerUpload",
                    "ecr:PutImage",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                "Resource": ecr_repository_arn(target_image),
            },
        ],
    }


@dataclass(frozen=True)
class BuildInputs:
    """What the derived image is built from and for: region and account, the base image, and gemmaserve as a
    pip ``requirement`` or (None) a wheel (its file name and SHA-256 once built)."""

    region: str
    account: str
    base_image: str | None = None
    requirement: str | None = None
    wheel_name: str | None = None
    wheel_sha256: str | None = None


def plan_image_build(
    inputs: BuildInputs, *, repository: str = DEFAULT_REPOSITORY, project: str = PROJECT_NAME
) -> ImageBuildPlan:
    """The build's Dockerfile and buildspec (pure). Without ``requirement``, gemmaserve comes from a wheel."""
    region, account, base_image, requirement = inputs.region, inputs.account, inputs.base_image, inputs.requirement
    wheel_name, wheel_sha256 = inputs.wheel_name, inputs.wheel_sha256
    base = base_image or default_image_uri(region)
    pinned = base == default_image_uri(region)
    base_tag = base.rsplit(":", 1)[-1] if ":" in base.rsplit("/", 1)[-1] else "latest"
    target = f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}:{derived_image_tag(base_tag)}"
    wheel = None if requirement else (wheel_name or wheel_filename())
    wheel_uri = (
        f"s3://{build_bucket(account, region)}/wheels/{wheel_sha256}/{wheel}" if wheel and wheel_sha256 else None
    )
    dockerfile = render_dockerfile(base, wheel_name=wheel, requirement=requirement)
    record_uri = record_location(target)
    source = (
        f"requirement:{requirement}"
        if requirement
        else f"wheel:{wheel} sha256:{wheel_sha256 or '(built at build time)'}"
    )
    plan = ImageBuildPlan(
        region=region,
        base_image=base,
        base_vllm_version=PINNED_IMAGE.vllm_version if pinned else None,
        base_cuda_version=PINNED_IMAGE.cuda_version if pinned else None,
        base_vllm_supported=is_supported(PINNED_IMAGE.vllm_version) if pinned else None,
        target_image=target,
        repository=repository,
        project=project,
        gemmaserve_source=source,
        wheel_name=wheel,
        wheel_s3_uri=wheel_uri,
        wheel_sha256=wheel_sha256,
        dockerfile=dockerfile,
        record_s3_uri=record_uri,
        buildspec="",
    )
    return plan.model_copy(update={"buildspec": render_buildspec(plan)})


def checkout_root() -> Path | None:
    """The source checkout this gemmaserve runs from (``pyproject.toml`` + ``src/gemmaserve``), if any."""
    import gemmaserve

    root = Path(gemmaserve.__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "src" / "gemmaserve" / "__init__.py").is_file():
        return root
    return None


def build_wheel_from_checkout(out_dir: Path, root: Path | None = None) -> Path:
    """``pip wheel`` of the checkout as it is now (uncommitted edits included), built in a copy of it.

    The copy keeps ``build/`` and ``*.egg-info`` out of the user's tree.
    """
    import shutil
    import subprocess
    import sys

    root = root or checkout_root()
    if root is None:
        raise UsageError(
            "gemmaserve is not running from a source checkout, and it is not on the package index.",
            hint="Run from a gemmaserve checkout (pip install -e .), or pass --requirement with a "
            "pip spec the build can install (a git URL, or your own index).",
        )
    staging = out_dir / "src-copy"
    shutil.copytree(root / "src", staging / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            shutil.copy2(root / name, staging / name)
    wheels = out_dir / "wheels"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(staging),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    built = sorted(wheels.glob("gemmaserve-*.whl")) if wheels.is_dir() else []
    if completed.returncode != 0 or not built:
        raise UsageError(
            f"Building the gemmaserve wheel from {root} failed: {completed.stderr.strip()[-800:]}",
            hint="pip install setuptools wheel (the build runs without network isolation).",
        )
    return built[0]


def upload_wheel(s3: Any, wheel: Path, *, account: str, region: str, sha256: str) -> str:
    """Put the wheel in the account's gemmaserve build bucket."""
    bucket = ensure_bucket(s3, account=account, region=region)
    key = f"wheels/{sha256}/{wheel.name}"
    call(region, s3.put_object, Bucket=bucket, Key=key, Body=wheel.read_bytes())
    return f"s3://{bucket}/{key}"


def ensure_bucket(s3: Any, *, account: str, region: str) -> str:
    """The account's gemmaserve build bucket, created private and tagged if missing."""
    bucket = build_bucket(account, region)
    try:
        call(region, s3.head_bucket, Bucket=bucket)
    except AwsError as error:
        if not (is_not_found(error) or error.fields.get("aws_error_code") in ("404", "NoSuchBucket")):
            raise
        params: dict[str, Any] = {"Bucket": bucket}
        if region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": region}
        call(region, s3.create_bucket, **params)
        call(
            region,
            s3.put_public_access_block,
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
        call(
            region,
            s3.put_bucket_tagging,
            Bucket=bucket,
            Tagging={"TagSet": [{"Key": "gemmaserve:tool", "Value": "gemmaserve"}]},
        )
    return bucket


def ensure_repository(ecr: Any, name: str, *, region: str) -> str:
    try:
        found = call(region, ecr.describe_repositories, repositoryNames=[name])["repositories"][0]
    except AwsError as error:
        if not is_not_found(error):
            raise
        found = call(
            region,
            ecr.create_repository,
            repositoryName=name,
            imageScanningConfiguration={"scanOnPush": True},
            tags=[{"Key": "gemmaserve:tool", "Value": "gemmaserve"}],
        )["repository"]
    return str(found["repositoryUri"])


def ensure_project(cb: Any, plan: ImageBuildPlan, role_arn: str, *, sleep: Callable[[float], None]) -> None:
    spec = {
        "name": plan.project,
        "source": {"type": "NO_SOURCE", "buildspec": plan.buildspec},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": BUILD_IMAGE,
            "computeType": "BUILD_GENERAL1_LARGE",
            "privilegedMode": True,
        },
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
            if (
                "not authorized to perform: sts:AssumeRole" not in error.message
                or attempt == _ROLE_PROPAGATION_RETRIES - 1
            ):
                raise
            sleep(5.0 * (attempt + 1))


def build_image(
    request: ImageBuildRequest, deps: Deps, *, repository: str = DEFAULT_REPOSITORY, poll_s: float = 20.0
) -> ImageBuildResult:
    """Ensure repository, role and project; start the build; follow it to the end (``request.follow``).

    Without ``requirement``, gemmaserve goes in as ``request.wheel`` or a wheel built now from this checkout.
    ``deps.sleep`` is a test's scripted sleep (None: real time, cut short by ``deps.cancel``). The token is
    checked before the build starts and while it is followed; once started, cancelling (like Ctrl-C) only stops
    following: the build goes on in CodeBuild, and the last event says how to stop it. Every event's ``done``
    is the seconds since this call began (one unit for the whole stream, so it only grows).
    """
    factory, region, requirement, dry_run = deps.clients, request.chosen_region(), request.requirement, request.dry_run
    now, sleep, progress, cancel = deps.now, deps.sleep, deps.progress, deps.cancel
    begun = now()

    def wait(seconds: float) -> None:
        pause(seconds, cancel=cancel, sleep=sleep)

    def event(phase: str, message: str) -> ProgressEvent:
        return ProgressEvent(phase, message, done=(now() - begun).total_seconds())

    import hashlib
    import tempfile

    account = account_id(factory("sts", region), region=region)
    with tempfile.TemporaryDirectory(prefix="gemmaserve-wheel-") as scratch:
        wheel = None
        if requirement is None and not dry_run:
            wheel = request.wheel or build_wheel_from_checkout(Path(scratch))
        sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest() if wheel else None
        inputs = BuildInputs(
            region, account, request.base_image, requirement, wheel.name if wheel else None, wheel_sha256=sha256
        )
        plan = plan_image_build(inputs, repository=repository)
        if plan.base_vllm_supported is False:
            raise UsageError(
                f"The base image {plan.base_image} carries vLLM {plan.base_vllm_version}, outside the "
                "range the Turing clamp supports; the build's own check would fail.",
                hint="Pass --base-image with a supported AWS vLLM SageMaker image.",
            )
        role_spec = RoleSpec(
            role_name=f"{plan.project}-{region}",
            service="codebuild.amazonaws.com",
            policy_name="gemmaserve-image-build",
            account=account,
            policy=codebuild_role_policy(
                region=region,
                account=account,
                project=plan.project,
                base_image=plan.base_image,
                target_image=plan.target_image,
                wheel_s3_uri=plan.wheel_s3_uri,
            ),
            description="gemmaserve CodeBuild role: build and push the derived T4 image (least privilege)",
        )
        role = ensure_role(factory("iam", region), role_spec, region=region, dry_run=dry_run)
        result = ImageBuildResult(plan=plan, role=role)
        if dry_run:
            return result
        ensure_bucket(factory("s3", region), account=account, region=region)  # the build writes its record there
        if wheel is not None and sha256 is not None:
            upload_wheel(factory("s3", region), wheel, account=account, region=region, sha256=sha256)
            report(
                progress,
                event("upload", f"Uploaded {wheel.name} (sha256 {sha256[:12]}…) to {plan.wheel_s3_uri}"),
            )
    result.repository_uri = ensure_repository(factory("ecr", region), repository, region=region)
    cb = factory("codebuild", region)
    assert role.role_arn is not None
    ensure_project(cb, plan, role.role_arn, sleep=wait)
    check(cancel)  # the last point before a build that bills per minute is started
    build = call(region, cb.start_build, projectName=plan.project)["build"]
    result.build_id = build["id"]
    report(progress, event("started", f"Started CodeBuild build {build['id']} for {plan.target_image}"))
    if request.follow:
        try:
            result = follow_build(cb, result, deps, timeout_s=request.timeout_s, poll_s=poll_s, origin=begun)
        except (KeyboardInterrupt, Cancelled):
            # Stopping our follow does not stop the build: say so, and how to stop it.
            report(
                progress,
                event(
                    "stopped",
                    f"Stopped following build {result.build_id}; it goes on in CodeBuild (billed per build minute). "
                    f"Stop it with: aws codebuild stop-build --id {result.build_id} --region {region}",
                ),
            )
            raise
        save_record(
            ImageBuildRecord(
                image_uri=plan.target_image,
                region=region,
                build_id=result.build_id or "",
                built_at=now(),
                base_image=plan.base_image,
                base_vllm_version=plan.base_vllm_version,
                base_cuda_version=plan.base_cuda_version,
                gemmaserve_source=plan.gemmaserve_source,
                clamp_verified=True,
            )
        )
        return result
    result.status = build.get("buildStatus")
    return result


def follow_build(
    cb: Any, result: ImageBuildResult, deps: Deps, *, timeout_s: float, poll_s: float, origin: datetime | None = None
) -> ImageBuildResult:
    """Poll the build to its end, reporting each CodeBuild phase.

    ``done`` is seconds since ``origin`` (default: now), ``total`` the moment the follow gives up on that
    scale (``timeout_s`` after it began). Between polls it waits as ``deps`` says (a cancel raises
    :class:`Cancelled`).
    """
    now, progress = deps.now, deps.progress
    started = now()
    origin = origin or started
    deadline_s = (started - origin).total_seconds() + timeout_s
    last_phase = None
    while True:
        build = call(result.plan.region, cb.batch_get_builds, ids=[result.build_id])["builds"][0]
        phase = build.get("currentPhase")
        if phase != last_phase:
            done = (now() - origin).total_seconds()
            report(progress, ProgressEvent(str(phase), f"CodeBuild phase: {phase}", done=done, total=deadline_s))
            last_phase = phase
        status = build.get("buildStatus")
        if status and status != "IN_PROGRESS":
            result.status = status
            result.phases = [
                {"phase": p.get("phaseType"), "status": p.get("phaseStatus"), "seconds": p.get("durationInSeconds")}
                for p in build.get("phases", [])
            ]
            result.logs_url = (build.get("logs") or {}).get("deepLink")
            if status != "SUCCEEDED":
                raise AwsError(
                    f"Image build {result.build_id} ended {status}.",
                    hint=f"Read its log: {result.logs_url or 'CodeBuild console, project ' + result.plan.project}",
                    region=result.plan.region,
                    build_id=result.build_id,
                )
            result.image_uri = result.plan.target_image
            return result
        if (now() - started).total_seconds() >= timeout_s:
            raise SageMakerTimedOut(
                f"Image build {result.build_id} still running after {timeout_s / 60:.0f} min.",
                region=result.plan.region,
                build_id=result.build_id,
            )
        pause(poll_s, cancel=deps.cancel, sleep=deps.sleep)
