"""Checkpoint tools: inspect from headers, grid-check 4-bit builds, repack losslessly, validate.

The actions take their request model (:mod:`gemmaserve.checkpoint.requests`) and return a pydantic
report; they never print, and the CLI and the MCP server call these same functions::

    from gemmaserve.checkpoint import InspectRequest, checkpoint_inspect
    report = checkpoint_inspect(InspectRequest(source="google/gemma-4-E2B-it-qat-w4a16-ct"))

The keyword functions under them (``inspect_checkpoint``, ``grid_check``, …) stay for code that has
loose values. Names are imported on first use: the requests are pydantic only, while the actions bring
numpy (and numba, where installed), which ``gemmaserve checkpoint --help`` must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmaserve.checkpoint.gridcheck import GridCheckReport, checkpoint_grid_check, grid_check
    from gemmaserve.checkpoint.inspect import InspectReport, checkpoint_inspect, inspect_checkpoint
    from gemmaserve.checkpoint.repack import RepackReport, checkpoint_repack, repack_checkpoint
    from gemmaserve.checkpoint.requests import GridCheckRequest, InspectRequest, RepackRequest, ValidateRequest
    from gemmaserve.checkpoint.validate import ValidateReport, checkpoint_validate, validate_checkpoint

_EXPORTS = {
    "gemmaserve.checkpoint.requests": ("GridCheckRequest", "InspectRequest", "RepackRequest", "ValidateRequest"),
    "gemmaserve.checkpoint.inspect": ("InspectReport", "checkpoint_inspect", "inspect_checkpoint"),
    "gemmaserve.checkpoint.gridcheck": ("GridCheckReport", "checkpoint_grid_check", "grid_check"),
    "gemmaserve.checkpoint.repack": ("RepackReport", "checkpoint_repack", "repack_checkpoint"),
    "gemmaserve.checkpoint.validate": ("ValidateReport", "checkpoint_validate", "validate_checkpoint"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "GridCheckReport",
    "GridCheckRequest",
    "InspectReport",
    "InspectRequest",
    "RepackReport",
    "RepackRequest",
    "ValidateReport",
    "ValidateRequest",
    "checkpoint_grid_check",
    "checkpoint_inspect",
    "checkpoint_repack",
    "checkpoint_validate",
    "grid_check",
    "inspect_checkpoint",
    "repack_checkpoint",
    "validate_checkpoint",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        # Not ours to answer: lets ``from gemmaserve.checkpoint import grid`` find the submodule.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
