"""gemmaserve: put Gemma 4 into service with vLLM on the cheapest NVIDIA GPU that holds it.

The package is one library with thin front ends (``gemmaserve.cli``,
``gemmaserve.mcp_server``). Importing it must stay cheap: no torch, triton,
boto3 or aiohttp at import time.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# The Python API's front door: the shared vocabularies, imported on first use. The plan action is
# ``gemmaserve.plan.plan(PlanRequest(...))``; each noun's package exports its own actions and request
# models (``gemmaserve.serve``, ``gemmaserve.sagemaker``…).
_EXPORTS = {
    "PlanRequest": "gemmaserve.plan",
    "PlanTable": "gemmaserve.plan",
    "ServingSettings": "gemmaserve.request_model",
    "ProgressEvent": "gemmaserve.progress",
    "CancelToken": "gemmaserve.progress",
    "Cancelled": "gemmaserve.progress",
    "Finding": "gemmaserve.findings",
    "GemmaserveError": "gemmaserve.errors",
}

__all__ = [
    "CancelToken",
    "Cancelled",
    "Finding",
    "GemmaserveError",
    "PlanRequest",
    "PlanTable",
    "ProgressEvent",
    "ServingSettings",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gemmaserve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
