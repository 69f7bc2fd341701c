"""Every action gemmaserve offers, by its request model: the list both front ends and their agreement test walk.

Each entry is ``module:RequestClass``, imported only when asked for, so that listing the actions costs
nothing at CLI start-up. The command path is the request's ``action`` (``"serve start"``) and the MCP tool
is the same words joined by ``_`` (``serve_start``).
"""

from __future__ import annotations

import importlib

from gemmaserve.request_model import ActionRequest

BENCH: tuple[str, ...] = (
    "gemmaserve.bench.requests:MeasureRequest",
    "gemmaserve.bench.requests:CombineRequest",
    "gemmaserve.bench.requests:ReportRequest",
    "gemmaserve.bench.requests:ImportRequest",
)
CHECKPOINT: tuple[str, ...] = (
    "gemmaserve.checkpoint.requests:InspectRequest",
    "gemmaserve.checkpoint.requests:GridCheckRequest",
    "gemmaserve.checkpoint.requests:RepackRequest",
    "gemmaserve.checkpoint.requests:ValidateRequest",
)
HOST: tuple[str, ...] = (
    "gemmaserve.envinfo:EnvRequest",
    "gemmaserve.host.doctor:DoctorRequest",
)
SERVE: tuple[str, ...] = (
    "gemmaserve.serve.requests:StartRequest",
    "gemmaserve.serve.requests:StatusRequest",
    "gemmaserve.serve.requests:StopRequest",
    "gemmaserve.serve.requests:LogsRequest",
)
SAGEMAKER: tuple[str, ...] = (
    "gemmaserve.sagemaker.spec.requests:PreflightRequest",
    "gemmaserve.sagemaker.spec.requests:DeployRequest",
    "gemmaserve.sagemaker.spec.requests:UpdateRequest",
    "gemmaserve.sagemaker.spec.requests:StatusRequest",
    "gemmaserve.sagemaker.spec.requests:WaitRequest",
    "gemmaserve.sagemaker.spec.requests:LogsRequest",
    "gemmaserve.sagemaker.spec.requests:InvokeRequest",
    "gemmaserve.sagemaker.spec.requests:DeleteRequest",
    "gemmaserve.sagemaker.spec.requests:ListRequest",
    "gemmaserve.sagemaker.spec.requests:CleanupRequest",
    "gemmaserve.sagemaker.spec.requests:AutoscaleRequest",
    "gemmaserve.sagemaker.spec.requests:JumpstartRequest",
    "gemmaserve.sagemaker.spec.requests:RoleCreateRequest",
    "gemmaserve.sagemaker.spec.requests:ImageRenderRequest",
    "gemmaserve.sagemaker.spec.requests:ImageBuildRequest",
)
TURING: tuple[str, ...] = (
    "gemmaserve.turing.requests:TuringStatusRequest",
    "gemmaserve.turing.requests:ApplyRequest",
    "gemmaserve.turing.requests:VerifyRequest",
    "gemmaserve.turing.requests:RevertRequest",
    "gemmaserve.turing.requests:SmemRequest",
)
REQUESTS: tuple[str, ...] = ("gemmaserve.plan:PlanRequest", *HOST, *SERVE, *BENCH, *CHECKPOINT, *SAGEMAKER, *TURING)

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
