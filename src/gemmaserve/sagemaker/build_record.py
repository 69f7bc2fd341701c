"""The record ``image build`` keeps of each derived image it pushed, and the lookup preflight makes in it.

The derived image's clamp is proven inside the build (``gemmaserve turing status --capability
sm_75`` must pass or nothing is pushed); this record is what says so afterwards, with the base
image, its vLLM and CUDA, and where gemmaserve came from. A tag's text proves nothing. Stored as
one JSON file in the state directory, written atomically.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

RECORD_FILE = "sagemaker-images.json"


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
