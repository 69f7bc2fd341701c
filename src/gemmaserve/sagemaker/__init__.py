"""SageMaker real-time endpoints for Gemma 4 on vLLM: preflight, deploy, watch, invoke, clean up.

Pure parts (env mapping, names, tags, quota arithmetic, diagnosis rules) are apart from the adapters,
which receive boto3 clients from :mod:`.aws`, the AWS boundary (the only module that builds sessions and
clients and the only one that translates botocore errors). Nothing here prints. The actions live in
:mod:`.api`, one per command, each taking its request model from :mod:`.requests`::

    from gemmaserve.sagemaker import DeployRequest, api
    outcome = api.deploy(DeployRequest(model="e2b", instance=["ml.g6.xlarge"], dry_run=True))

The modules, by concern:

- actions and their inputs: ``api``, ``requests``, ``inputs`` (the service's own rules, checked first)
- the AWS boundary: ``aws`` (sessions, clients, botocore errors → gemmaserve errors)
- what a deploy sends: ``container`` (pinned image, AMIs), ``env_mapping`` (``SM_VLLM_*`` ↔ flags),
  ``names``, ``tags``, ``secrets`` (masking)
- before a deploy: ``preflight``, ``quota``, ``pricing``, ``iam`` (roles)
- a deploy: ``endpoint`` (plan, create, tear down), ``fallback`` (across regions), ``interrupts``
  (signals during a deploy), ``startup`` (the wait to InService and its early diagnosis)
- a running endpoint: ``status``, ``logs``, ``runtime`` (invoke and stream), ``autoscale``
- cleaning up: ``delete``, ``inventory`` (list, expired, orphans)
- the derived T4 image: ``image`` (Dockerfile, buildspec, build record), ``codebuild`` (build and push)
- ``jumpstart``: the public hub's Gemma 4 entries

The request models, ``api`` and the actions whose names no submodule takes (``deploy``, ``wait``,
``cleanup``, …) are also attributes of this package; ``api.preflight``, ``api.status``, ``api.logs``,
``api.delete``, ``api.autoscale`` and ``api.jumpstart`` share their names with modules here (so a new
module must not take an exported action's name: once imported it would replace the action). All load on
first use: importing the package loads neither boto3 nor botocore.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmaserve.sagemaker import api
    from gemmaserve.sagemaker.api import (
        DeployOutcome,
        PreparedDeploy,
        cleanup,
        create_execution_role,
        deploy,
        image_build,
        image_render,
        invoke,
        invoke_streaming,
        list_endpoints,
        prepare_deploy,
        wait,
    )
    from gemmaserve.sagemaker.requests import (
        AutoscaleRequest,
        CleanupRequest,
        DeleteRequest,
        DeployRequest,
        ImageBuildRequest,
        ImageRenderRequest,
        InvokeRequest,
        JumpstartRequest,
        ListRequest,
        LogsRequest,
        PreflightRequest,
        RoleCreateRequest,
        StatusRequest,
        WaitRequest,
    )

_ACTIONS = (
    "DeployOutcome",
    "PreparedDeploy",
    "cleanup",
    "create_execution_role",
    "deploy",
    "image_build",
    "image_render",
    "invoke",
    "invoke_streaming",
    "list_endpoints",
    "prepare_deploy",
    "wait",
)
_REQUESTS = (
    "AutoscaleRequest",
    "CleanupRequest",
    "DeleteRequest",
    "DeployRequest",
    "ImageBuildRequest",
    "ImageRenderRequest",
    "InvokeRequest",
    "JumpstartRequest",
    "ListRequest",
    "LogsRequest",
    "PreflightRequest",
    "RoleCreateRequest",
    "StatusRequest",
    "WaitRequest",
)
_EXPORTS = {
    "api": "gemmaserve.sagemaker",
    **dict.fromkeys(_ACTIONS, "gemmaserve.sagemaker.api"),
    **dict.fromkeys(_REQUESTS, "gemmaserve.sagemaker.requests"),
}

__all__ = [
    "AutoscaleRequest",
    "CleanupRequest",
    "DeleteRequest",
    "DeployOutcome",
    "DeployRequest",
    "ImageBuildRequest",
    "ImageRenderRequest",
    "InvokeRequest",
    "JumpstartRequest",
    "ListRequest",
    "LogsRequest",
    "PreflightRequest",
    "PreparedDeploy",
    "RoleCreateRequest",
    "StatusRequest",
    "WaitRequest",
    "api",
    "cleanup",
    "create_execution_role",
    "deploy",
    "image_build",
    "image_render",
    "invoke",
    "invoke_streaming",
    "list_endpoints",
    "prepare_deploy",
    "wait",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "api":
        return importlib.import_module("gemmaserve.sagemaker.api")
    return getattr(importlib.import_module(module), name)
