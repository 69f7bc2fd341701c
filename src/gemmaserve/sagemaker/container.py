"""The pinned AWS vLLM SageMaker image's URIs, the host AMIs' CUDA levels, and the rule between them (pure).

The pinned image itself (tag, vLLM, CUDA, source) is recorded once, in :mod:`gemmaserve.pinned_image`.
It is both the stock serving image and the base of the derived T4 image, so its vLLM must lie
inside the Turing clamp's supported range (``gemmaserve.turing.versions``); a test holds that.
AMI driver/CUDA levels: the ``InferenceAmiVersion`` documentation of CreateEndpointConfig.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel

from gemmaserve.pinned_image import PINNED_IMAGE

DLC_ACCOUNT = "763104351884"
DEFAULT_IMAGE_REPOSITORY = PINNED_IMAGE.repository
DEFAULT_IMAGE_TAG = PINNED_IMAGE.tag
DEFAULT_IMAGE_CUDA = (13, 0)
DEFAULT_IMAGE_SOURCE = PINNED_IMAGE.source
# Regions where the DLC account is not 763104351884 (opt-in and China regions).
_DLC_ACCOUNT_BY_REGION = {"cn-north-1": "727897471807", "cn-northwest-1": "727897471807"}

# Labels the derived T4 image carries (see image.py) so preflight can tell it from the stock one.
TURING_CLAMP_LABEL = "io.gemmaserve.turing-clamp"
TURING_TAG_MARK = "turing"  # for people reading tags only: no check trusts a tag's text

DEFAULT_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"


class AmiLevel(BaseModel):
    name: str
    driver_major: int
    cuda: tuple[int, int]


AMI_LEVELS: dict[str, AmiLevel] = {
    level.name: level
    for level in (
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-2", driver_major=535, cuda=(12, 2)),
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-2-1", driver_major=535, cuda=(12, 2)),
        AmiLevel(name="al2-ami-sagemaker-inference-gpu-3-1", driver_major=550, cuda=(12, 4)),
        AmiLevel(name="al2023-ami-sagemaker-inference-gpu-4-1", driver_major=580, cuda=(13, 0)),
    )
}
# Without InferenceAmiVersion SageMaker picks by family (same documentation page):
# ml.g4dn / ml.g5 / ml.p4d get driver 470 (CUDA 11.4); ml.g6 / ml.p5 get 535 (CUDA 12.2).
_DEFAULT_HOST_CUDA_BY_FAMILY = {
    "g4dn": (11, 4),
    "g5": (11, 4),
    "p4d": (11, 4),
    "g6": (12, 2),
    "g6e": (12, 2),
    "p5": (12, 2),
}


class CudaVerdict(StrEnum):
    OK = "ok"
    MINOR_NEWER = "minor-newer"  # same major: runs through CUDA minor-version compatibility, PTX JIT excepted
    TOO_NEW = "too-new"
    UNKNOWN = "unknown"


def default_image_uri(region: str) -> str:
    account = _DLC_ACCOUNT_BY_REGION.get(region, DLC_ACCOUNT)
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{account}.dkr.ecr.{region}{suffix}/{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}"


def image_for_region(image_uri: str | None, region: str) -> str:
    """The image to use in ``region``: the default, or the user's with ``{region}`` filled in."""
    if image_uri is None:
        return default_image_uri(region)
    return image_uri.replace("{region}", region)


def image_region(image_uri: str) -> str | None:
    match = re.match(r"^\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", image_uri)
    return match.group(1) if match else None


def image_cuda_version(image_uri: str) -> tuple[int, int] | None:
    """The image's CUDA version from its tag (``cu130``, ``cu129``, ``cuda13.0``) or the pin; None if unknown."""
    tag = image_uri.rsplit(":", 1)[-1] if ":" in image_uri.rsplit("/", 1)[-1] else ""
    if image_uri.endswith(f"/{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}") or tag.startswith(
        DEFAULT_IMAGE_TAG + "-"
    ):
        return DEFAULT_IMAGE_CUDA  # the pin, or an image derived from it (image.py keeps the base tag as prefix)
    match = re.search(r"cu(\d{2})(\d)(?!\d)", tag) or re.search(r"cuda-?(\d{2})\.(\d)", tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    return None


def host_cuda_version(instance_type: str, ami_version: str | None) -> tuple[int, int] | None:
    if ami_version:
        level = AMI_LEVELS.get(ami_version)
        return level.cuda if level else None
    family = instance_type.removeprefix("ml.").split(".")[0]
    return _DEFAULT_HOST_CUDA_BY_FAMILY.get(family)


def cuda_verdict(image_cuda: tuple[int, int] | None, host_cuda: tuple[int, int] | None) -> CudaVerdict:
    if image_cuda is None or host_cuda is None:
        return CudaVerdict.UNKNOWN
    if image_cuda <= host_cuda:
        return CudaVerdict.OK
    if image_cuda[0] == host_cuda[0]:
        return CudaVerdict.MINOR_NEWER
    return CudaVerdict.TOO_NEW


def ami_for_cuda(image_cuda: tuple[int, int] | None) -> str:
    """The lowest AMI whose CUDA covers the image (the newest when the image's CUDA is unknown)."""
    if image_cuda is not None:
        for level in sorted(AMI_LEVELS.values(), key=lambda item: item.cuda):
            if level.cuda >= image_cuda:
                return level.name
    return DEFAULT_AMI


def image_claims_turing_clamp(
    image_uri: str, labels: dict[str, str] | None = None, build_verified: bool | None = None
) -> bool | None:
    """Whether the image carries our Turing clamp, from what the build wrote, never from the tag's text.

    ``labels``: the image's labels, when read; ``build_verified``: the build record's verdict for
    this URI (``image build`` writes one after the in-image check passed), when there is one.
    The stock AWS image is known not to; anything else is unknown (None).
    """
    if labels is not None:
        return labels.get(TURING_CLAMP_LABEL) == "verified"
    if build_verified is not None:
        return build_verified
    if image_uri.rsplit("/", 1)[-1].startswith(f"{DEFAULT_IMAGE_REPOSITORY}:") and image_uri.split("/", 1)[0].split(
        "."
    )[0] in (DLC_ACCOUNT, *_DLC_ACCOUNT_BY_REGION.values()):
        return False  # an AWS vLLM image: stock vLLM fails on T4 with OutOfResources
    return None
