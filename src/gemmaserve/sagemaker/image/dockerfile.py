"""The derived T4 image: what it is, how it is rendered, and the record of what was pushed.

A Dockerfile FROM the pinned AWS vLLM SageMaker image plus gemmaserve's Turing clamp, and the
CodeBuild buildspec that builds and pushes it (pure text rendering; :mod:`.codebuild` runs it).
The base's entrypoint and every ``SM_VLLM_*`` setting keep working (no ENTRYPOINT change), so one
image serves T4 and L4 variants. The build fails unless the clamp verifies and the image's torch
carries sm_75 kernels. gemmaserve is not on the package index: it goes in as a wheel built from
the user's checkout (fetched by the build from S3 and checked against its SHA-256), or as a
requirement the user names.

The build record is what says afterwards that the clamp was proven inside the build (``gemmaserve
turing status --capability sm_75`` must pass or nothing is pushed), with the base image, its vLLM
and CUDA, and where gemmaserve came from; a tag's text proves nothing. It is kept in two places:
one JSON file in the state directory of the host that followed the build (written atomically),
and the object the build itself writes after its push, read from inside the pushed image, in the
account's build bucket (:func:`record_location`), which preflight reads from any host.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from gemmaserve import __version__
from gemmaserve.errors import AwsError, UsageError
from gemmaserve.sagemaker.aws import call, is_not_found
from gemmaserve.sagemaker.spec.container import (
    DEFAULT_IMAGE_TAG,
    TURING_CLAMP_LABEL,
    TURING_TAG_MARK,
)

DEFAULT_REPOSITORY = "gemmaserve-vllm"
# torch.cuda.get_arch_list() needs only a CUDA build of torch, not a visible GPU (it checks
# _is_compiled(), torch 2.13), so it runs on a GPU-less build host; an empty list fails too.
ARCH_CHECK = (
    "import sys, torch; arch = torch.cuda.get_arch_list(); "
    "print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'arch', arch); "
    "sys.exit(0 if 'sm_75' in arch else 'torch in this image has no sm_75 kernels: a T4 cannot run it')"
)


def derived_image_tag(base_tag: str = DEFAULT_IMAGE_TAG, version: str = __version__) -> str:
    """Keeps the base tag as prefix (preflight reads the CUDA level from it) and marks the clamp."""
    return f"{base_tag}-gemmaserve{version}-{TURING_TAG_MARK}"


def wheel_filename(version: str = __version__) -> str:
    """The wheel ``pip wheel`` makes of this checkout (pure Python: py3-none-any)."""
    return f"gemmaserve-{version}-py3-none-any.whl"


def render_dockerfile(base_image: str, *, wheel_name: str | None = None, requirement: str | None = None) -> str:
    """``wheel_name``: a wheel in the build context (from the checkout); else ``requirement`` (a pip spec)."""
    if (wheel_name is None) == (requirement is None):
        raise UsageError(
            "The image needs gemmaserve from exactly one place: a wheel of this checkout, or a requirement.",
            hint="Give --requirement, or run from a gemmaserve checkout.",
        )
    source = wheel_name or requirement or ""
    install = f"/tmp/{wheel_name}" if wheel_name else f"'{requirement}'"
    copy = [f"COPY {wheel_name} /tmp/{wheel_name}"] if wheel_name else []
    return "\n".join(
        [
            f"FROM {base_image}",
            f'LABEL {TURING_CLAMP_LABEL}="verified" io.gemmaserve.base-image="{base_image}" '
            f'io.gemmaserve.source="{source}"',
            *copy,
            "# Keep the image's torch, vLLM and Triton exactly: gemmaserve must not move them.",
            "RUN python3 -m pip freeze | grep -iE '^(torch|vllm|triton)==' > /tmp/gemmaserve-keep.txt \\",
            f"    && python3 -m pip install --no-cache-dir -c /tmp/gemmaserve-keep.txt {install} \\",
            "    && rm /tmp/gemmaserve-keep.txt" + (f" /tmp/{wheel_name}" if wheel_name else ""),
            "# The clamp is the vllm.general_plugins entry point pip just installed. The build host has no",
            "# GPU, so state the T4's capability: status exits non-zero unless this image's vLLM is a",
            "# supported release whose kernel source has the shape the plugin clamps, and the plugin imports.",
            "RUN gemmaserve turing status --capability sm_75",
            f'RUN python3 -c "{ARCH_CHECK}"',
            "",
        ]
    )


# Run inside the pushed image: the build record states the vLLM and CUDA the image really has.
RECORD_SCRIPT = (
    "import datetime, json, os, torch, vllm; print(json.dumps({"
    "'image_uri': os.environ['TARGET_IMAGE'], 'region': os.environ['AWS_REGION'], "
    "'build_id': os.environ['CODEBUILD_BUILD_ID'], "
    "'built_at': datetime.datetime.now(datetime.timezone.utc).isoformat(), "
    "'base_image': os.environ['BASE_IMAGE'], 'base_vllm_version': vllm.__version__, "
    "'base_cuda_version': torch.version.cuda, 'gemmaserve_source': os.environ['GEMMASERVE_SOURCE'], "
    "'clamp_verified': True}))"
)


class BuildSource(Protocol):
    """What :func:`render_buildspec` reads of a build's plan (``codebuild.ImageBuildPlan``)."""

    @property
    def dockerfile(self) -> str: ...
    @property
    def base_image(self) -> str: ...
    @property
    def target_image(self) -> str: ...
    @property
    def wheel_name(self) -> str | None: ...
    @property
    def wheel_s3_uri(self) -> str | None: ...
    @property
    def wheel_sha256(self) -> str | None: ...
    @property
    def record_s3_uri(self) -> str | None: ...
    @property
    def gemmaserve_source(self) -> str: ...


def render_buildspec(plan: BuildSource) -> str:
    """A CodeBuild buildspec (0.2) that logs in to both registries, builds, and pushes only on success.

    With a wheel, it first copies it from ``wheel_s3_uri`` and refuses it unless its SHA-256 matches.
    With ``record_s3_uri``, after the push it writes the build record there, read from the image itself.
    """
    dockerfile, base_image, target_image = plan.dockerfile, plan.base_image, plan.target_image
    wheel_name, wheel_s3_uri, wheel_sha256 = plan.wheel_name, plan.wheel_s3_uri, plan.wheel_sha256
    record_s3_uri, gemmaserve_source = plan.record_s3_uri, plan.gemmaserve_source
    base_registry = base_image.split("/", 1)[0]
    target_registry = target_image.split("/", 1)[0]
    encoded = base64.b64encode(dockerfile.encode()).decode()
    fetch = (
        [
            f"      - aws s3 cp {wheel_s3_uri} {wheel_name}",
            f'      - echo "{wheel_sha256}  {wheel_name}" | sha256sum -c -',
        ]
        if wheel_name and wheel_s3_uri and wheel_sha256
        else []
    )
    record = (
        [
            "      - docker run --rm --entrypoint python3 -e TARGET_IMAGE -e AWS_REGION -e CODEBUILD_BUILD_ID "
            '-e BASE_IMAGE -e GEMMASERVE_SOURCE "$TARGET_IMAGE" -c "$RECORD_SCRIPT" > build-record.json',
            f"      - aws s3 cp build-record.json {record_s3_uri}",
        ]
        if record_s3_uri
        else []
    )
    return "\n".join(
        [
            "version: 0.2",
            "env:",
            "  variables:",
            f'    DOCKERFILE_B64: "{encoded}"',
            f'    TARGET_IMAGE: "{target_image}"',
            f'    BASE_IMAGE: "{base_image}"',
            f"    GEMMASERVE_SOURCE: {json.dumps(gemmaserve_source)}",
            f"    RECORD_SCRIPT: {json.dumps(RECORD_SCRIPT)}",
            "phases:",
            "  pre_build:",
            "    commands:",
            f"      - aws ecr get-login-password --region {_registry_region(base_registry)} | docker login "
            f"--username AWS --password-stdin {base_registry}",
            f"      - aws ecr get-login-password --region {_registry_region(target_registry)} | docker login "
            f"--username AWS --password-stdin {target_registry}",
            '      - echo "$DOCKERFILE_B64" | base64 -d > Dockerfile',
            *fetch,
            "  build:",
            "    on-failure: ABORT",
            "    commands:",
            '      - docker build --progress=plain -t "$TARGET_IMAGE" .',
            "  post_build:",
            "    commands:",
            '      - test "$CODEBUILD_BUILD_SUCCEEDING" = "1"',
            '      - docker push "$TARGET_IMAGE"',
            *record,
            "",
        ]
    )


def _registry_region(registry: str) -> str:
    parts = registry.split(".")
    return parts[3] if len(parts) > 3 else "us-east-1"


# The build record: what was pushed, and the lookup preflight makes in it.

RECORD_FILE = "sagemaker-images.json"
# S3 error codes of a record that is not there (S3 answers with these, not ResourceNotFound).
_ABSENT_CODES = ("NoSuchKey", "NoSuchBucket", "404")


class ImageBuildRecord(BaseModel):
    image_uri: str
    region: str
    build_id: str
    built_at: datetime
    base_image: str
    base_vllm_version: str | None  # None when the base is not the pinned one (the build checked it)
    base_cuda_version: str | None
    gemmaserve_source: str  # the wheel built from a checkout, or the requirement given
    clamp_verified: bool


def _path() -> Path:
    from gemmaserve.state import state_dir

    return state_dir() / RECORD_FILE


def load_records() -> list[ImageBuildRecord]:
    path = _path()
    if not path.exists():
        return []
    try:
        items = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # unreadable: no image is trusted, preflight says unknown
    return [ImageBuildRecord.model_validate(item) for item in items if isinstance(item, dict)]


def save_record(record: ImageBuildRecord) -> None:
    from gemmaserve.fileio import write_atomic

    records = [item for item in load_records() if item.image_uri != record.image_uri] + [record]
    write_atomic(_path(), json.dumps([item.model_dump(mode="json") for item in records], indent=2) + "\n")


def find_record(image_uri: str) -> ImageBuildRecord | None:
    for record in reversed(load_records()):
        if record.image_uri == image_uri:
            return record
    return None


def build_bucket(account: str, region: str) -> str:
    return f"gemmaserve-build-{account}-{region}"


def record_location(image_uri: str) -> str:
    """``s3://gemmaserve-build-ACCOUNT-REGION/records/REPO/TAG.json`` for an ECR image URI."""
    host, _, rest = image_uri.partition("/")
    parts = host.split(".")
    repository, _, tag = rest.partition(":")
    return f"s3://{build_bucket(parts[0], parts[3])}/records/{repository}/{tag or 'latest'}.json"


def fetch_remote_record(s3: Any, image_uri: str) -> ImageBuildRecord | None:
    """The record the build wrote for ``image_uri``, or None when there is none. AwsError when unreadable."""
    location = record_location(image_uri)
    bucket, _, key = location.removeprefix("s3://").partition("/")
    where = image_uri.split("/", 1)[0].split(".")[3]
    try:
        body = call(where, s3.get_object, Bucket=bucket, Key=key)["Body"].read()
    except AwsError as error:
        if is_not_found(error) or error.fields.get("aws_error_code") in _ABSENT_CODES:
            return None
        raise
    record = ImageBuildRecord.model_validate(json.loads(body))
    return record if record.image_uri == image_uri else None
