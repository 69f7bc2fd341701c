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

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.checkpoint.gridcheck import GridCheckReport as GridCheckReport
    from gemmaserve.checkpoint.gridcheck import checkpoint_grid_check as checkpoint_grid_check
    from gemmaserve.checkpoint.gridcheck import grid_check as grid_check
    from gemmaserve.checkpoint.inspect import InspectReport as InspectReport
    from gemmaserve.checkpoint.inspect import checkpoint_inspect as checkpoint_inspect
    from gemmaserve.checkpoint.inspect import inspect_checkpoint as inspect_checkpoint
    from gemmaserve.checkpoint.repack import RepackReport as RepackReport
    from gemmaserve.checkpoint.repack import checkpoint_repack as checkpoint_repack
    from gemmaserve.checkpoint.repack import repack_checkpoint as repack_checkpoint
    from gemmaserve.checkpoint.requests import GridCheckRequest as GridCheckRequest
    from gemmaserve.checkpoint.requests import InspectRequest as InspectRequest
    from gemmaserve.checkpoint.requests import RepackRequest as RepackRequest
    from gemmaserve.checkpoint.requests import ValidateRequest as ValidateRequest
    from gemmaserve.checkpoint.validate import ValidateReport as ValidateReport
    from gemmaserve.checkpoint.validate import checkpoint_validate as checkpoint_validate
    from gemmaserve.checkpoint.validate import validate_checkpoint as validate_checkpoint

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".requests": ("GridCheckRequest", "InspectRequest", "RepackRequest", "ValidateRequest"),
        ".inspect": ("InspectReport", "checkpoint_inspect", "inspect_checkpoint"),
        ".gridcheck": ("GridCheckReport", "checkpoint_grid_check", "grid_check"),
        ".repack": ("RepackReport", "checkpoint_repack", "repack_checkpoint"),
        ".validate": ("ValidateReport", "checkpoint_validate", "validate_checkpoint"),
    },
)
