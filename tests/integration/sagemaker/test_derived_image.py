"""The derived T4 image: a base whose vLLM the clamp supports, gemmaserve from a wheel of this checkout (never
the package index), and a clamp verdict read from the build record, never from a tag's text."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY

from gemmaserve.progress import Cancelled, CancelToken
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.aws import Deps
from gemmaserve.sagemaker.image.codebuild import BuildInputs, build_image, build_wheel_from_checkout, plan_image_build
from gemmaserve.sagemaker.image.dockerfile import ImageBuildRecord, find_record, save_record
from gemmaserve.sagemaker.spec.container import PINNED_IMAGE, default_image_uri, image_cuda_version
from gemmaserve.sagemaker.spec.requests import ImageBuildRequest, PreflightRequest
from gemmaserve.turing.versions import is_supported
from tests.support.sagemaker.helpers import Lines, StubbedCodeBuild

REGION = "us-east-1"
ACCOUNT = "123456789012"


# gemmaserve from a git requirement: no wheel is built or uploaded
FROM_GIT = ImageBuildRequest(region=REGION, requirement="gemmaserve @ git+https://github.com/example/gemmaserve")


def nothing_recorded() -> bool:
    """No build record for the default target image (a stopped build must not leave one)."""
    return find_record(plan_image_build(BuildInputs(region=REGION, account=ACCOUNT)).target_image) is None


def test_the_pinned_base_carries_a_vllm_the_clamp_supports() -> None:
    assert is_supported(PINNED_IMAGE.vllm_version), PINNED_IMAGE
    plan = plan_image_build(BuildInputs(region=REGION, account=ACCOUNT))
    assert plan.base_image == default_image_uri(REGION) and plan.base_vllm_supported is True
    assert plan.base_vllm_version == PINNED_IMAGE.vllm_version and plan.base_cuda_version == PINNED_IMAGE.cuda_version
    assert image_cuda_version(plan.base_image) == tuple(int(x) for x in PINNED_IMAGE.cuda_version.split(".")[:2])


def test_by_default_gemmaserve_goes_in_as_a_wheel_not_from_the_index() -> None:
    plan = plan_image_build(
        BuildInputs(
            region=REGION, account=ACCOUNT, wheel_name="gemmaserve-0.1.0-py3-none-any.whl", wheel_sha256="ab" * 32
        )
    )
    assert "COPY gemmaserve-0.1.0-py3-none-any.whl /tmp/" in plan.dockerfile
    assert (
        "gemmaserve==" not in plan.dockerfile
        and "pip install --no-cache-dir -c /tmp/gemmaserve-keep.txt /tmp/gemmaserve-0.1.0-py3-none-any.whl"
        in plan.dockerfile
    )
    assert f'echo "{"ab" * 32}  gemmaserve-0.1.0-py3-none-any.whl" | sha256sum -c -' in plan.buildspec
    assert (
        plan.wheel_s3_uri == f"s3://gemmaserve-build-{ACCOUNT}-{REGION}/wheels/{'ab' * 32}/"
        "gemmaserve-0.1.0-py3-none-any.whl"
    )


def _preflight_clamp(image: str, factory: Any) -> str:
    request = PreflightRequest(model="gemma-4-e2b", instance=["ml.g4dn.xlarge"], regions=[REGION], image=image)
    report = api.preflight(request, SageMakerSession(factory=factory, check_model=None))
    return next(f.status.value for f in report.findings if f.check == "turing-clamp")


def test_a_tag_that_says_turing_proves_nothing(moto_factory: Any) -> None:
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/gemmaserve-vllm:stock-vllm-tagged-turing"
    assert _preflight_clamp(image, moto_factory) == "unknown"
    assert _preflight_clamp(default_image_uri(REGION), moto_factory) == "fail"
    save_record(
        ImageBuildRecord(
            image_uri=image,
            region=REGION,
            build_id="b:1",
            built_at=datetime.now(UTC),
            base_image=default_image_uri(REGION),
            base_vllm_version=PINNED_IMAGE.vllm_version,
            base_cuda_version=PINNED_IMAGE.cuda_version,
            gemmaserve_source="wheel:x",
            clamp_verified=True,
        )
    )
    assert _preflight_clamp(image, moto_factory) == "ok"


def test_the_wheel_is_built_from_this_checkout_without_touching_it(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    before = {p.name for p in root.iterdir()}
    wheel = build_wheel_from_checkout(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        shipped = archive.read("gemmaserve/sagemaker/operations/teardown.py")
    assert shipped == (root / "src" / "gemmaserve" / "sagemaker" / "operations" / "teardown.py").read_bytes()
    assert "gemmaserve/catalog/models.toml" in names
    assert {p.name for p in root.iterdir()} == before


def test_image_build_uploads_the_wheel_checks_its_hash_and_records_the_build(moto_factory: Any, tmp_path: Path) -> None:
    wheel = tmp_path / "gemmaserve-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:  # the smallest wheel the request accepts; its bytes are what matter
        archive.writestr("gemmaserve-0.1.0.dist-info/METADATA", "Name: gemmaserve\nVersion: 0.1.0\n")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    factory = StubbedCodeBuild(moto_factory)
    stub = factory.stub
    stub.add_response("batch_get_projects", {"projects": []}, {"names": ["gemmaserve-turing-image"]})
    stub.add_response(
        "create_project",
        {"project": {"name": "gemmaserve-turing-image"}},
        {
            "name": "gemmaserve-turing-image",
            "source": ANY,
            "artifacts": ANY,
            "environment": ANY,
            "serviceRole": ANY,
            "timeoutInMinutes": 90,
            "tags": ANY,
        },
    )
    stub.add_response("start_build", {"build": {"id": "gemmaserve-turing-image:7", "buildStatus": "IN_PROGRESS"}})
    stub.add_response(
        "batch_get_builds",
        {
            "builds": [
                {
                    "id": "gemmaserve-turing-image:7",
                    "buildStatus": "SUCCEEDED",
                    "currentPhase": "COMPLETED",
                    "phases": [],
                }
            ]
        },
    )
    result = build_image(ImageBuildRequest(region=REGION, wheel=wheel), Deps(factory=factory, sleep=lambda s: None))
    stub.assert_no_pending_responses()
    body = (
        moto_factory("s3", REGION)
        .get_object(Bucket=f"gemmaserve-build-{ACCOUNT}-{REGION}", Key=f"wheels/{sha}/{wheel.name}")["Body"]
        .read()
    )
    assert body == wheel.read_bytes()
    assert result.plan.wheel_sha256 == sha and f"{sha}  {wheel.name}" in result.plan.buildspec
    dockerfile = base64.b64decode(result.plan.buildspec.split('DOCKERFILE_B64: "')[1].split('"')[0]).decode()
    assert f"COPY {wheel.name}" in dockerfile
    policy = moto_factory("iam", REGION).get_role_policy(
        RoleName=f"gemmaserve-turing-image-{REGION}", PolicyName="gemmaserve-image-build"
    )["PolicyDocument"]
    read = next(s for s in policy["Statement"] if s["Sid"] == "ReadWheel")
    assert read["Resource"] == f"arn:aws:s3:::gemmaserve-build-{ACCOUNT}-{REGION}/wheels/{sha}/{wheel.name}"
    record = find_record(result.plan.target_image)
    assert record is not None and record.clamp_verified and record.base_vllm_version == PINNED_IMAGE.vllm_version
    assert record.gemmaserve_source == f"wheel:{wheel.name} sha256:{sha}"


def _a_build_that_keeps_running(moto_factory: Any) -> StubbedCodeBuild:
    """A new project whose build (id ``gemmaserve-turing-image:9``) starts and stays IN_PROGRESS in its BUILD phase."""
    factory = StubbedCodeBuild(moto_factory)
    factory.expect_a_new_project()
    factory.stub.add_response(
        "start_build", {"build": {"id": "gemmaserve-turing-image:9", "buildStatus": "IN_PROGRESS"}}
    )
    factory.stub.add_response(
        "batch_get_builds",
        {"builds": [{"id": "gemmaserve-turing-image:9", "buildStatus": "IN_PROGRESS", "currentPhase": "BUILD"}]},
    )
    return factory


def test_ctrl_c_while_following_a_build_says_how_to_stop_it(moto_factory: Any) -> None:
    factory = _a_build_that_keeps_running(moto_factory)

    def ctrl_c(_: float) -> None:
        raise KeyboardInterrupt

    progress = Lines()
    with pytest.raises(KeyboardInterrupt):
        build_image(
            FROM_GIT,
            Deps(factory=factory, sleep=ctrl_c, progress=progress),
        )
    assert "aws codebuild stop-build --id gemmaserve-turing-image:9 --region us-east-1" in progress[-1]
    assert nothing_recorded()


def test_cancel_while_following_a_build_stops_following_like_ctrl_c(moto_factory: Any) -> None:
    factory = _a_build_that_keeps_running(moto_factory)
    stub = factory.stub
    token = CancelToken()
    progress = Lines()
    with pytest.raises(Cancelled):
        build_image(
            FROM_GIT,
            Deps(factory=factory, sleep=lambda _s: token.cancel(), progress=progress, cancel=token),
        )
    stub.assert_no_pending_responses()  # no poll after the cancel
    assert [event.phase for event in progress.events] == ["started", "BUILD", "stopped"]
    assert "aws codebuild stop-build --id gemmaserve-turing-image:9 --region us-east-1" in progress[-1]
    assert nothing_recorded()


def test_cancel_before_the_build_starts_starts_none(moto_factory: Any) -> None:
    factory = StubbedCodeBuild(moto_factory)
    stub = factory.expect_a_new_project()
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        build_image(
            FROM_GIT,
            Deps(factory=factory, sleep=lambda _s: None, cancel=token),
        )
    stub.assert_no_pending_responses()  # the (idempotent) project is in place; start_build was never called


def test_the_build_writes_its_record_from_inside_the_image(tmp_path: Path) -> None:
    """The buildspec's record step, run for real with stand-ins for the image's torch and vllm modules."""
    import json
    import os
    import subprocess
    import sys

    from gemmaserve.sagemaker.image.dockerfile import RECORD_SCRIPT

    plan = plan_image_build(
        BuildInputs(
            region=REGION, account=ACCOUNT, wheel_name="gemmaserve-0.1.0-py3-none-any.whl", wheel_sha256="cd" * 32
        )
    )
    assert f"aws s3 cp build-record.json {plan.record_s3_uri}" in plan.buildspec
    assert f"RECORD_SCRIPT: {json.dumps(RECORD_SCRIPT)}" in plan.buildspec
    (tmp_path / "vllm.py").write_text('__version__ = "0.27.0+amzn2023.4bdc8a78"\n')
    (tmp_path / "torch.py").write_text("class version:\n    cuda = '13.0'\n")
    env = dict(
        os.environ,
        PYTHONPATH=str(tmp_path),
        TARGET_IMAGE=plan.target_image,
        AWS_REGION=REGION,
        CODEBUILD_BUILD_ID="gemmaserve-turing-image:3",
        BASE_IMAGE=plan.base_image,
        GEMMASERVE_SOURCE=plan.gemmaserve_source,
    )
    completed = subprocess.run(
        [sys.executable, "-c", RECORD_SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    record = ImageBuildRecord.model_validate(json.loads(completed.stdout))
    assert record.image_uri == plan.target_image and record.base_vllm_version == "0.27.0+amzn2023.4bdc8a78"
    assert record.base_cuda_version == "13.0" and record.clamp_verified


def test_preflight_on_another_host_reads_the_record_the_build_wrote(moto_factory: Any) -> None:
    from gemmaserve.sagemaker.deployment.preflight import PreflightDeps, run_preflight
    from gemmaserve.sagemaker.image.dockerfile import record_location
    from gemmaserve.sagemaker.spec.requests import PreflightRequest

    image = plan_image_build(BuildInputs(region=REGION, account=ACCOUNT)).target_image

    def clamp() -> Any:
        request = PreflightRequest.parse(
            {"model": "gemma-4-e2b", "encoding": "qat-w4a16", "instance": ["ml.g4dn.xlarge"], "region": REGION,
             "image": image}
        )  # fmt: skip
        report = run_preflight(request, PreflightDeps(moto_factory), regions=[REGION])
        return next(f for f in report.findings if f.check == "turing-clamp")

    missing = clamp()
    assert missing.status.value == "unknown" and "No build record at s3://" in missing.detail
    bucket, _, key = record_location(image).removeprefix("s3://").partition("/")
    s3 = moto_factory("s3", REGION)
    s3.create_bucket(Bucket=bucket)
    record = ImageBuildRecord(
        image_uri=image,
        region=REGION,
        build_id="gemmaserve-turing-image:3",
        built_at=datetime.now(UTC),
        base_image=default_image_uri(REGION),
        base_vllm_version="0.27.0+amzn2023.4bdc8a78",
        base_cuda_version="13.0",
        gemmaserve_source="wheel:x",
        clamp_verified=True,
    )
    s3.put_object(Bucket=bucket, Key=key, Body=record.model_dump_json().encode())
    found = clamp()
    assert found.status.value == "ok" and "build gemmaserve-turing-image:3 verified it" in found.detail
    policy_record = next(
        s
        for s in __import__("gemmaserve.sagemaker.image.codebuild", fromlist=["x"]).codebuild_role_policy(
            region=REGION, account=ACCOUNT, project="p", base_image=default_image_uri(REGION), target_image=image
        )["Statement"]
        if s["Sid"] == "WriteBuildRecord"
    )
    assert policy_record["Resource"] == f"arn:aws:s3:::{bucket}/{key}"


def test_image_build_dry_run_shows_the_role_and_its_policy(aws_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.sagemaker.helpers import run

    args = ["sagemaker", "image", "build", "--dry-run", "--region", REGION, "--requirement", "gemmaserve==0.1.0"]
    code, out, err = run(args, capsys)
    assert code == 0, err
    assert f"Build role: gemmaserve-turing-image-{REGION} (would be created), trusted by codebuild.amazonaws.com" in out
    policy = json.loads(out.split("Its inline policy gemmaserve-image-build:\n", 1)[1].split("\nBuild:", 1)[0])
    assert {statement["Sid"] for statement in policy["Statement"]} >= {"PullBase", "PushTarget", "BuildLogs"}
    assert aws_env("iam", REGION).list_roles()["Roles"] == []  # a dry run creates nothing
