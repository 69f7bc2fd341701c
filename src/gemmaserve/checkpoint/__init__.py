"""Checkpoint tools: inspect from headers, grid-check 4-bit builds, repack losslessly, validate.

Each entry point returns a pydantic report and never prints; the CLI and the
MCP server call these same functions.
"""

from __future__ import annotations

from gemmaserve.checkpoint.gridcheck import GridCheckReport, grid_check
from gemmaserve.checkpoint.inspect import InspectReport, inspect_checkpoint
from gemmaserve.checkpoint.repack import RepackReport, repack_checkpoint
from gemmaserve.checkpoint.validate import ValidateReport, validate_checkpoint

__all__ = [
    "GridCheckReport",
    "InspectReport",
    "RepackReport",
    "ValidateReport",
    "grid_check",
    "inspect_checkpoint",
    "repack_checkpoint",
    "validate_checkpoint",
]
