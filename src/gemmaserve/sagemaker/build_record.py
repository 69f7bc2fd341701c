"""The record ``image build`` keeps of each derived image it pushed, and the lookup preflight makes in it.

The derived image's clamp is proven inside the build (``gemmaserve turing status --capability
sm_75`` must pass or nothing is pushed); this record is what says so afterwards, with the base
image, its vLLM and CUDA, and where gemmaserve came from. A tag's text proves nothing. Kept in
two places: one JSON file in the state directory of the host that followed the build (written
atomically), and the object the build itself writes after its push, read from inside the pushed
image, in the account's build bucket (``record_location``), which preflight reads from any host.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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
    from gemmaserve.errors import AwsError
    from gemmaserve.sagemaker.aws import call, is_not_found

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
