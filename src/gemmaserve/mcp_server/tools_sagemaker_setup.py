"""MCP tools that prepare SageMaker deploys: the derived T4 image, the execution role, autoscaling, JumpStart.

Same functions as ``gemmaserve sagemaker image render|build``, ``role create``,
``autoscale`` and ``jumpstart``. Changes need ``confirm``; the image build reports
progress, and cancelling it stops following the build (CodeBuild finishes or fails on its own).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    READ_ONLY,
    READ_ONLY_REMOTE,
    Cancellation,
    Confirm,
    ProgressSink,
    ToolSet,
    message_progress,
    require_confirmation,
    run_blocking,
    translate_errors,
    typed_result,
)
from gemmaserve.mcp_server.tools_sagemaker import DryRun, EndpointName, Region, _region, _regions
from gemmaserve.sagemaker.autoscale import AutoscaleResult
from gemmaserve.sagemaker.codebuild import ImageBuildPlan, ImageBuildResult
from gemmaserve.sagemaker.iam import RoleResult
from gemmaserve.sagemaker.jumpstart import JumpStartListing

# Creates or updates AWS resources in place: repeating it converges to the same state.
CONVERGING = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
BUILD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)

BaseImage = Annotated[str | None, Field(description="Base image (default: the pinned AWS vLLM image of the region).")]
Requirement = Annotated[str | None, Field(description="pip requirement for gemmaserve (default: this version).")]


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="sagemaker_image_render", title="Dockerfile of the derived T4 image", annotations=READ_ONLY)
    @translate_errors
    def sagemaker_image_render(
        region: Region = None,
        account: Annotated[str, Field(description="Account of the target ECR repository.")] = "ACCOUNT",
        base_image: BaseImage = None,
        requirement: Requirement = None,
    ) -> Annotated[CallToolResult, ImageBuildPlan]:
        """The Dockerfile and CodeBuild buildspec of the image that carries the Turing clamp; offline."""
        from gemmaserve.sagemaker import api

        plan = api.image_render(region=_region(region), account=account, base_image=base_image, requirement=requirement)
        return typed_result(plan, f"{plan.base_image} + the Turing clamp → {plan.target_image}")

    @tools.tool(name="sagemaker_image_build", title="Build the derived T4 image in CodeBuild", annotations=BUILD)
    @translate_errors
    async def sagemaker_image_build(
        ctx: Context,
        confirm: Confirm,
        region: Region = None,
        base_image: BaseImage = None,
        requirement: Requirement = None,
        follow: Annotated[bool, Field(description="Wait for the build to finish, reporting its phases.")] = True,
        timeout_s: Annotated[float, Field(ge=60)] = 5400.0,
        dry_run: DryRun = False,
    ) -> Annotated[CallToolResult, ImageBuildResult]:
        """Create the ECR repository, CodeBuild project and its role (idempotent), then build and push.

        Billed per build minute: needs confirm=true (or dry_run=true). The resulting image URI is what
        sagemaker_deploy needs as image_uri for a T4 (ml.g4dn) endpoint.
        """
        from gemmaserve.sagemaker import api

        chosen = _region(region)
        if not dry_run:
            require_confirmation(confirm, f"create/update the CodeBuild project and run a build in {chosen}")

        def work(cancellation: Cancellation, report: ProgressSink) -> ImageBuildResult:
            return api.image_build(
                region=chosen,
                base_image=base_image,
                requirement=requirement,
                dry_run=dry_run,
                follow=follow,
                timeout_s=timeout_s,
                factory=deps.clients(),
                progress=message_progress(report, cancellation),
                now=deps.now,
                sleep=deps.sleeper(cancellation),
            )

        result = await run_blocking(ctx, work)
        summary = (
            f"Target image {result.plan.target_image}: build {result.build_id or '(dry run)'} {result.status or ''}"
        )
        if result.image_uri:
            summary += f". Deploy with image_uri={result.image_uri}"
        return typed_result(result, summary.strip())

    @tools.tool(name="sagemaker_role_create", title="Create the endpoint execution role", annotations=CONVERGING)
    @translate_errors
    def sagemaker_role_create(
        confirm: Confirm,
        region: Region = None,
        regions: Annotated[
            list[str] | None,
            Field(
                description="Regions the role must work in (a deploy's fallbacks); regions it already serves are kept.",
            ),
        ] = None,
        role_name: str = "gemmaserve-endpoint",
        image_uris: Annotated[list[str] | None, Field(description="Images the role may pull.")] = None,
        model_s3_uri: Annotated[str | None, Field(description="s3://bucket/prefix the endpoint may read.")] = None,
        dry_run: DryRun = False,
    ) -> Annotated[CallToolResult, RoleResult]:
        """Create (or update) the least-privilege execution role: image pull, its logs, an optional S3 prefix."""
        from gemmaserve.sagemaker import api

        if not dry_run:
            require_confirmation(confirm, f"create or update the IAM role {role_name}")
        chosen = _regions(regions, region)
        result = api.create_execution_role(
            region=chosen[0],
            regions=chosen,
            role_name=role_name,
            image_uris=image_uris,
            s3_model_uri=model_s3_uri,
            dry_run=dry_run,
            factory=deps.clients(),
        )
        verb = (
            ("would create" if result.created else "would update")
            if result.dry_run
            else ("created" if result.created else "updated")
        )
        return typed_result(result, f"Role {result.role_name} {verb}: {result.role_arn or '(no ARN yet)'}")

    @tools.tool(name="sagemaker_autoscale", title="Autoscale an endpoint", annotations=CONVERGING)
    @translate_errors
    def sagemaker_autoscale(
        endpoint_name: EndpointName,
        max_instances: Annotated[int, Field(ge=1)],
        target_invocations: Annotated[float, Field(gt=0, description="Invocations per instance per minute.")],
        confirm: Confirm,
        region: Region = None,
        min_instances: Annotated[int, Field(ge=1)] = 1,
        scale_in_cooldown_s: Annotated[int, Field(ge=0)] = 300,
        scale_out_cooldown_s: Annotated[int, Field(ge=0)] = 60,
        dry_run: DryRun = False,
    ) -> Annotated[CallToolResult, AutoscaleResult]:
        """Register the endpoint's variant with Application Auto Scaling (target tracking). More instances cost more."""
        from gemmaserve.sagemaker import api

        if not dry_run:
            require_confirmation(confirm, f"autoscale {endpoint_name} up to {max_instances} instances")
        result = api.autoscale(
            endpoint_name,
            region=_region(region),
            min_instances=min_instances,
            max_instances=max_instances,
            target_invocations_per_instance=target_invocations,
            scale_in_cooldown_s=scale_in_cooldown_s,
            scale_out_cooldown_s=scale_out_cooldown_s,
            dry_run=dry_run,
            factory=None if dry_run else deps.clients(),
        )
        verb = "Would register" if result.dry_run else "Registered"
        return typed_result(
            result,
            f"{verb} {result.resource_id}: {result.min_instances}–{result.max_instances} "
            f"instances, target {result.target_invocations_per_instance:g}/instance/min",
        )

    @tools.tool(name="sagemaker_jumpstart", title="Gemma 4 in the JumpStart hub", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def sagemaker_jumpstart(
        region: Region = None,
        name_filter: Annotated[str, Field(min_length=1)] = "gemma",
    ) -> Annotated[CallToolResult, JumpStartListing]:
        """The public JumpStart hub's Gemma 4 entries and the instance types each supports."""
        from gemmaserve.sagemaker import api

        listing = api.jumpstart(region=_region(region), name_filter=name_filter, factory=deps.clients())
        names = ", ".join(f"{m.hub_content_name} (default {m.default_instance_type})" for m in listing.models)
        return typed_result(listing, f"{len(listing.models)} Gemma 4 entries in {listing.region}: {names or 'none'}")
