"""Every action gemmaserve offers, by its request model: the list both front ends and their agreement test walk.

Each entry is ``module:RequestClass``, imported only when asked for, so that listing the actions costs
nothing at CLI start-up. The command path is the request's ``action`` (``"serve start"``) and the MCP tool
is the same words joined by ``_`` (``serve_start``).
"""

from __future__ import annotations

import importlib

from gemmaserve.request_model import ActionRequest

# Where each action's request model lives, in the order the front ends list them.
REQUESTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    "gemmaserve.plan": ("PlanRequest",),
    "gemmaserve.envinfo": ("EnvRequest",),
    "gemmaserve.host.doctor": ("DoctorRequest",),
    "gemmaserve.serve.requests": ("StartRequest", "StatusRequest", "StopRequest", "LogsRequest"),
    "gemmaserve.bench.requests": ("MeasureRequest", "CombineRequest", "ReportRequest", "ImportRequest"),
    "gemmaserve.checkpoint.requests": ("InspectRequest", "GridCheckRequest", "RepackRequest", "ValidateRequest"),
    "gemmaserve.sagemaker.spec.requests": (
        *("PreflightRequest", "DeployRequest", "UpdateRequest", "StatusRequest", "WaitRequest", "LogsRequest"),
        *("InvokeRequest", "DeleteRequest", "ListRequest", "CleanupRequest", "AutoscaleRequest"),
        *("JumpstartRequest", "RoleCreateRequest", "ImageRenderRequest", "ImageBuildRequest"),
    ),
    "gemmaserve.turing.requests": (
        *("TuringStatusRequest", "ApplyRequest", "VerifyRequest", "RevertRequest", "SmemRequest"),
    ),
}
REQUESTS: tuple[str, ...] = tuple(f"{module}:{name}" for module, names in REQUESTS_BY_MODULE.items() for name in names)

# Commands with no MCP tool, and why: `mcp` is the server itself.
CLI_ONLY: dict[str, str] = {
    "mcp": "starts the MCP server; an agent is already talking to it",
}
MCP_ONLY: dict[str, str] = {}


def request_models() -> list[type[ActionRequest]]:
    """Every action's request model, in the order of :data:`REQUESTS`."""
    models = []
    for entry in REQUESTS:
        module, _, name = entry.partition(":")
        model = getattr(importlib.import_module(module), name)
        models.append(model)
    return models


def confirmation_actions() -> list[str]:
    """The actions that change or delete something and so ask first (CLI) or need ``confirm`` (MCP)."""
    return sorted(model.action for model in request_models() if model.confirmation)
