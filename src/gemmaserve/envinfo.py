"""Versions of gemmaserve and of the packages it uses, read from installed metadata (no imports)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from gemmaserve import __version__
from gemmaserve.request_model import READS, ActionRequest
from gemmaserve.result_model import ActionResult

PACKAGES = (
    "boto3",
    "botocore",
    "aiohttp",
    "uvloop",
    "click",
    "rich",
    "pydantic",
    "mcp",
    "huggingface_hub",
    "safetensors",
    "numpy",
    "triton",
    "torch",
    "vllm",
    "matplotlib",
)


class EnvRequest(ActionRequest, action="env", effect=READS):
    """``gemmaserve env``: nothing to choose."""


class EnvReport(ActionResult):
    gemmaserve: str
    python: str
    executable: str
    platform: str
    packages: dict[str, str | None]


def collect_env(request: EnvRequest | None = None) -> EnvReport:
    packages: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return EnvReport(
        gemmaserve=__version__,
        python=platform.python_version(),
        executable=sys.executable,
        platform=platform.platform(),
        packages=packages,
    )
