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
  ``container`` (pinned image, AMIs, ``SM_VLLM_*`` ↔ flags, names, tags, secret masking), ``checks`` (every
  check of preflight and of the wait, named once)
- ``deployment/``: ``preflight``, ``endpoint`` (plan, create, fall back across regions), ``update``
  (blue/green) and ``update_gate``
- ``operations/``: a running endpoint: ``status`` (its state and the wait to InService), ``logs``,
  ``runtime`` (invoke and stream), ``autoscale``, ``inventory`` (list, expired, orphans), ``teardown``
  (delete, the deploy journal, signals during a deploy)
- ``image/``: the derived T4 image (``dockerfile``, ``codebuild``), ``iam`` (roles), ``jumpstart``

The request models, ``api`` and its actions are also attributes of this package (a sub-package must not
take an exported action's name: once imported it would replace the action, which is why the deploy job's
sub-package is ``deployment``). All load on first use: importing the package loads neither boto3 nor
botocore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.sagemaker import api as api
    from gemmaserve.sagemaker.api import DeployOutcome as DeployOutcome
    from gemmaserve.sagemaker.api import Endpoint as Endpoint
    from gemmaserve.sagemaker.api import PreparedDeploy as PreparedDeploy
    from gemmaserve.sagemaker.api import SageMakerSession as SageMakerSession
    from gemmaserve.sagemaker.api import autoscale as autoscale
    from gemmaserve.sagemaker.api import cleanup as cleanup
    from gemmaserve.sagemaker.api import create_execution_role as create_execution_role
    from gemmaserve.sagemaker.api import delete as delete
    from gemmaserve.sagemaker.api import deploy as deploy
    from gemmaserve.sagemaker.api import image_build as image_build
    from gemmaserve.sagemaker.api import image_render as image_render
    from gemmaserve.sagemaker.api import invoke as invoke
    from gemmaserve.sagemaker.api import invoke_streaming as invoke_streaming
    from gemmaserve.sagemaker.api import jumpstart as jumpstart
    from gemmaserve.sagemaker.api import list_endpoints as list_endpoints
    from gemmaserve.sagemaker.api import logs as logs
    from gemmaserve.sagemaker.api import preflight as preflight
    from gemmaserve.sagemaker.api import prepare_deploy as prepare_deploy
    from gemmaserve.sagemaker.api import status as status
    from gemmaserve.sagemaker.api import update as update
    from gemmaserve.sagemaker.api import wait as wait
    from gemmaserve.sagemaker.spec.requests import AutoscaleRequest as AutoscaleRequest
    from gemmaserve.sagemaker.spec.requests import CleanupRequest as CleanupRequest
    from gemmaserve.sagemaker.spec.requests import DeleteRequest as DeleteRequest
    from gemmaserve.sagemaker.spec.requests import DeployRequest as DeployRequest
    from gemmaserve.sagemaker.spec.requests import ImageBuildRequest as ImageBuildRequest
    from gemmaserve.sagemaker.spec.requests import ImageRenderRequest as ImageRenderRequest
    from gemmaserve.sagemaker.spec.requests import InvokeRequest as InvokeRequest
    from gemmaserve.sagemaker.spec.requests import JumpstartRequest as JumpstartRequest
    from gemmaserve.sagemaker.spec.requests import ListRequest as ListRequest
    from gemmaserve.sagemaker.spec.requests import LogsRequest as LogsRequest
    from gemmaserve.sagemaker.spec.requests import PreflightRequest as PreflightRequest
    from gemmaserve.sagemaker.spec.requests import RoleCreateRequest as RoleCreateRequest
    from gemmaserve.sagemaker.spec.requests import StatusRequest as StatusRequest
    from gemmaserve.sagemaker.spec.requests import UpdateRequest as UpdateRequest
    from gemmaserve.sagemaker.spec.requests import WaitRequest as WaitRequest

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".": ("api",),
        ".api": (
            "DeployOutcome",
            "Endpoint",
            "PreparedDeploy",
            "SageMakerSession",
            "autoscale",
            "cleanup",
            "create_execution_role",
            "delete",
            "deploy",
            "image_build",
            "image_render",
            "invoke",
            "invoke_streaming",
            "jumpstart",
            "list_endpoints",
            "logs",
            "preflight",
            "prepare_deploy",
            "status",
            "update",
            "wait",
        ),
        ".spec.requests": (
            "PreflightRequest",
            "DeployRequest",
            "UpdateRequest",
            "StatusRequest",
            "WaitRequest",
            "LogsRequest",
            "InvokeRequest",
            "DeleteRequest",
            "ListRequest",
            "CleanupRequest",
            "AutoscaleRequest",
            "JumpstartRequest",
            "RoleCreateRequest",
            "ImageRenderRequest",
            "ImageBuildRequest",
        ),
    },
)
