"""MCP tools that prepare SageMaker deploys: the derived T4 image, the execution role, autoscaling, JumpStart.

Same functions and request models as ``gemmaserve sagemaker image render|build``, ``role create``,
``autoscale`` and ``jumpstart``. Changes need ``confirm``; the image build reports progress, and
cancelling it stops following the build (CodeBuild finishes or fails on its own).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result
from gemmaserve.mcp_server.tools_sagemaker import sagemaker_session
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.sagemaker.image.codebuild import ImageBuildPlan, ImageBuildResult
from gemmaserve.sagemaker.image.iam import RoleResult
from gemmaserve.sagemaker.image.jumpstart import JumpStartListing
from gemmaserve.sagemaker.operations.autoscale import AutoscaleResult
from gemmaserve.sagemaker.spec.requests import (
    AutoscaleRequest,
    ImageBuildRequest,
    ImageRenderRequest,
    JumpstartRequest,
    RoleCreateRequest,
)


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(ImageRenderRequest, title="Dockerfile of the derived T4 image", result=ImageBuildPlan)
    def sagemaker_image_render(request: ImageRenderRequest) -> CallToolResult:
        """The Dockerfile and CodeBuild buildspec of the image that carries the Turing clamp; offline."""
        from gemmaserve.sagemaker import api

        return typed_result(api.image_render(request))

    @tools.action(ImageBuildRequest, title="Build the derived T4 image in CodeBuild", result=ImageBuildResult)
    async def sagemaker_image_build(request: ImageBuildRequest, ctx: Context) -> CallToolResult:
        """Create the ECR repository, CodeBuild project and its role (idempotent), then build and push.

        Billed per build minute: needs confirm=true (or dry_run=true). The resulting image URI is what
        sagemaker_deploy needs as image for a T4 (ml.g4dn) endpoint.
        """
        from gemmaserve.sagemaker import api

        def work(*, progress: ProgressCallback, cancel: CancelToken) -> ImageBuildResult:
            session = sagemaker_session(deps).but(progress=progress, cancel=cancel)
            return api.image_build(request, session)

        return typed_result(await run_blocking(ctx, work))

    @tools.action(RoleCreateRequest, title="Create the endpoint execution role", result=RoleResult)
    def sagemaker_role_create(request: RoleCreateRequest) -> CallToolResult:
        """Create (or update) the least-privilege execution role: image pull, its logs, an optional S3 prefix."""
        from gemmaserve.sagemaker import api

        return typed_result(api.create_execution_role(request, sagemaker_session(deps)))

    @tools.action(AutoscaleRequest, title="Autoscale an endpoint", result=AutoscaleResult)
    def sagemaker_autoscale(request: AutoscaleRequest) -> CallToolResult:
        """Register the endpoint's variant with Application Auto Scaling (target tracking). More instances cost more."""
        session = sagemaker_session(deps, dry_run=request.dry_run)
        return typed_result(session.endpoint_for(request).autoscale(request))

    @tools.action(JumpstartRequest, title="Gemma 4 in the JumpStart hub", result=JumpStartListing)
    def sagemaker_jumpstart(request: JumpstartRequest) -> CallToolResult:
        """The public JumpStart hub's Gemma 4 entries and the instance types each supports."""
        from gemmaserve.sagemaker import api

        return typed_result(api.jumpstart(request, sagemaker_session(deps)))
