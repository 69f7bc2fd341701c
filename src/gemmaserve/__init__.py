"""gemmaserve: put Gemma 4 into service with vLLM on the cheapest NVIDIA GPU that holds it.

The package is one library with thin front ends (``gemmaserve.cli``,
``gemmaserve.mcp_server``). Importing it must stay cheap: no torch, triton,
boto3 or aiohttp at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.errors import GemmaserveError as GemmaserveError
    from gemmaserve.findings import Finding as Finding
    from gemmaserve.plan import PlanRequest as PlanRequest
    from gemmaserve.plan import PlanTable as PlanTable
    from gemmaserve.progress import Cancelled as Cancelled
    from gemmaserve.progress import CancelToken as CancelToken
    from gemmaserve.progress import ProgressEvent as ProgressEvent
    from gemmaserve.request_model import ServingSettings as ServingSettings

__version__ = "0.1.0"

# The Python API's front door: the shared vocabularies, imported on first use. The plan action is
# ``gemmaserve.plan.plan(PlanRequest(...))``; each noun's package exports its own actions and request
# models (``gemmaserve.serve``, ``gemmaserve.sagemaker``…).
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".plan": ("PlanRequest", "PlanTable"),
        ".request_model": ("ServingSettings",),
        ".progress": ("ProgressEvent", "CancelToken", "Cancelled"),
        ".findings": ("Finding",),
        ".errors": ("GemmaserveError",),
    },
    defined=("__version__",),
)
