"""The AWS vLLM SageMaker image gemmaserve deploys, as its publisher records it: the one place it is pinned (pure).

Core, not ``sagemaker/``: the plan reads the image's vLLM (``vllm_releases.sagemaker_image_series``) to size a
SageMaker target by that release's rules, and the SageMaker package builds its URIs from it
(``sagemaker/spec/container.py``).
"""

from __future__ import annotations

from pydantic import BaseModel


class PinnedImage(BaseModel):
    """An AWS vLLM SageMaker image as its publisher records it."""

    repository: str
    tag: str
    vllm_version: str  # as the image's wheel reports it
    cuda_version: str
    python_version: str
    released: str
    source: str


PINNED_IMAGE = PinnedImage(
    repository="vllm",
    tag="server-sagemaker-cuda-v2.3",
    vllm_version="0.27.0+amzn2023.4bdc8a78",
    cuda_version="13.0.2",
    python_version="3.12",
    released="2026-08-17",
    source="aws/deep-learning-containers docs/vllm/changelog/index.md (v2.3.0 — 2026-08-17: vLLM source 4bdc8a7, "
    "CUDA 13.0.2, Python 3.12) and docs/src/data/vllm-server/0.27.0+amzn2023.4bdc8a78-gpu-sagemaker.yml "
    "(cuda: cu130, platform: sagemaker), commit e0ecedea of 2026-08-21; "
    "https://aws.github.io/deep-learning-containers/vllm/changelog/",
)
