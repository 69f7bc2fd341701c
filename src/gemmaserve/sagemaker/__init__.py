"""SageMaker real-time endpoints for Gemma 4 on vLLM: preflight, deploy, watch, invoke, clean up.

Pure parts (env mapping, names, tags, input rules, diagnosis rules) are apart from the adapters, which
receive boto3 clients from :mod:`.aws`, the AWS boundary (the only module that builds sessions and clients
and the only one that translates botocore errors). Nothing here prints. The actions live in :mod:`.api`,
one per command, each taking its request model from :mod:`.spec.requests`::

    from gemmaserve.sagemaker import DeployRequest, SageMakerSession, api
    outcome = api.deploy(DeployRequest(model="e2b", instance=["ml.g6.xlarge"], dry_run=True))
    state = SageMakerSession().endpoint("gemma-4-e2b-l4", region="us-east-1").status()

The modules, by job:

- ``api``: the actions; ``aws``: the AWS boundary (sessions, clients, botocore errors, regions, prices,
  quotas)
- ``spec/``: what a deploy is: ``requests``, ``inputs`` (the service's own rules, checked first),
  ``container`` (pinned image, AMIs, ``SM_VLLM_*`` ↔ flags, names, tags, secret masking)
- ``deployment/``: ``preflight``, ``endpoint`` (plan, create, fall back across regions), ``update``
  (blue/green) and ``update_gate``
- ``operations/``: a running endpoint: ``status`` (its state and the wait to InService), ``logs``,
  ``runtime`` (invoke and stream), ``autoscale``, ``inventory`` (list, expired, orphans), ``teardown``
  (delete, the deploy journal, signals during a deploy)
- ``image/``: the derived T4 image (``dockerfile``, ``codebuild``), ``iam`` (roles), ``jumpstart``

The request models, ``api`` and its actions are also attributes of this package (a sub-package must not
take an exported action's name: once imported it would replace the action, which is why the deploy job's
sub-package is ``deployment``). All load on
first use: importing the package loads neither boto3 nor botocore.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmaserve.sagemaker import api
    from gemmaserve.sagemaker.api import (
        DeployOutcome,
        Endpoint,
        PreparedDeploy,
        SageMakerSession,
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
    from gemmaserve.sagemaker.spec.requests import (
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

__all__ = [
    "AutoscaleRequest",
    "CleanupRequest",
    "DeleteRequest",
    "DeployOutcome",
    "DeployRequest",
    "Endpoint",
    "ImageBuildRequest",
    "ImageRenderRequest",
    "InvokeRequest",
    "JumpstartRequest",
    "ListRequest",
    "LogsRequest",
    "PreflightRequest",
    "PreparedDeploy",
    "RoleCreateRequest",
    "SageMakerSession",
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
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "api":
        return importlib.import_module("gemmaserve.sagemaker.api")
    # the request models live in spec.requests, the rest of the names in api
    home = "gemmaserve.sagemaker.spec.requests" if name.endswith("Request") else "gemmaserve.sagemaker.api"
    return getattr(importlib.import_module(home), name)
