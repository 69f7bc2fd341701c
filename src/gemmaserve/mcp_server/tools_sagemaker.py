"""MCP tools over :mod:`gemmaserve.sagemaker.api`, the same functions ``gemmaserve sagemaker …`` calls.

Each tool's arguments are its request model's fields (:mod:`gemmaserve.sagemaker.spec.requests`), named as
the CLI's long options. The deploy interlock is the library's, and here it is not negotiable: an agent
cannot skip preflight or accept an unknown finding (``skip_preflight``/``accept_unknown`` are refused),
so a T4 deploy without the clamp image, a missing quota or an unknown role is refused before anything
is created. Deploy and wait report progress and stop on cancellation; deploy then deletes what it created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import ToolSet, run_blocking, typed_result
from gemmaserve.progress import CancelToken, ProgressCallback
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.api import DeployOutcome
from gemmaserve.sagemaker.deployment.preflight import PreflightReport
from gemmaserve.sagemaker.deployment.update import UpdateResult
from gemmaserve.sagemaker.operations.inventory import CleanupReport, Inventory
from gemmaserve.sagemaker.operations.logs import EndpointLogs
from gemmaserve.sagemaker.operations.runtime import InvokeResult
from gemmaserve.sagemaker.operations.status import EndpointState
from gemmaserve.sagemaker.operations.teardown import DeleteReport
from gemmaserve.sagemaker.spec.requests import (
    CleanupRequest,
    DeleteRequest,
    DeployRequest,
    InvokeRequest,
    ListRequest,
    LogsRequest,
    PreflightRequest,
    StatusRequest,
    UpdateRequest,
    WaitRequest,
)

if TYPE_CHECKING:
    from gemmaserve.sagemaker.api import SageMakerSession


def sagemaker_session(deps: ServerDeps, *, dry_run: bool = False) -> SageMakerSession:
    """The library session over the server's seams (no AWS client for a dry run: it prices from the catalog)."""
    from gemmaserve.sagemaker.api import SageMakerSession

    return SageMakerSession(
        factory=None if dry_run else deps.clients(),
        clock=deps.now,
        sleep=deps.sleep,  # None: real time; a test's scripted sleep, the library checks the token around it
        check_model=deps.model_checker(),
    )


async def follow(
    ctx: Context,
    deps: ServerDeps,
    request: DeployRequest | UpdateRequest,
    action: Callable[[Any, SageMakerSession], ActionResult],
    label: str,
) -> CallToolResult:
    """Run a deploy or an update (``action``) as blocking work with the call's progress and cancellation,
    named ``label`` while it runs, and return its result."""

    def work(*, progress: ProgressCallback, cancel: CancelToken) -> ActionResult:
        session = sagemaker_session(deps, dry_run=request.dry_run).but(progress=progress, cancel=cancel)
        return action(request, session)

    return typed_result(await run_blocking(ctx, work, label=label))


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.action(PreflightRequest, title="Will this SageMaker deploy work?", result=PreflightReport)
    def sagemaker_preflight(request: PreflightRequest) -> CallToolResult:
        """Quota, memory fit (host RAM is hard), image CUDA vs AMI, the Turing clamp on T4, role and model id.

        Each finding is ok / warn / fail / unknown with its fix; `ok` of the report is false when any
        finding failed or could not be checked. Same as `gemmaserve sagemaker preflight --json`.
        """
        from gemmaserve.sagemaker import api

        return typed_result(api.preflight(request, sagemaker_session(deps)))

    @tools.action(DeployRequest, title="Deploy a SageMaker endpoint", result=DeployOutcome)
    async def sagemaker_deploy(request: DeployRequest, ctx: Context) -> CallToolResult:
        """Create Model → EndpointConfig → Endpoint (tagged, with a TTL) and wait for InService. Costs money.

        Preflight always runs first and the deploy is refused, with each failed check and its fix, unless
        every check passes now (on a T4 that includes the Turing clamp image); the CLI's --skip-preflight
        and --accept-unknown are not offered here. Call with dry_run=true first to see the exact AWS calls and
        $/hour, then confirm=true once the user agreed. Reports progress; if the request is cancelled,
        whatever this call created is deleted. Same as `gemmaserve sagemaker deploy --yes --json`.
        """
        from gemmaserve.sagemaker import api

        return await follow(
            ctx, deps, request, api.deploy, f"sagemaker_deploy {request.endpoint_name or request.model}"
        )

    @tools.action(UpdateRequest, title="Update a live SageMaker endpoint", result=UpdateResult)
    async def sagemaker_update(request: UpdateRequest, ctx: Context) -> CallToolResult:
        """Blue/green update of a live endpoint with traffic shifting, alarms and a quality and speed gate. Costs money.

        Preflight of the new variant runs first (nothing is created unless it passes). SageMaker shifts traffic
        (canary by default) and rolls back when an alarm fires; gemmaserve measures old / new / old during the
        bake and rolls back on worse answers or a slower decode. Call with dry_run=true first to see the calls
        and the extra $/hour, then confirm=true once the user agreed. A cancel before UpdateEndpoint deletes
        what was made; after it, the update is rolled back. Same as `gemmaserve sagemaker update --yes --json`.
        """
        from gemmaserve.sagemaker import api

        return await follow(ctx, deps, request, api.update, f"sagemaker_update {request.endpoint_name}")

    @tools.action(StatusRequest, title="Endpoint status", result=EndpointState)
    def sagemaker_status(request: StatusRequest) -> CallToolResult:
        """Creating / InService / Failed / NotFound, placed instance type, image, elapsed time, failure reason."""

        return typed_result(sagemaker_session(deps).endpoint_for(request).status())

    @tools.action(WaitRequest, title="Wait for InService", result=EndpointState)
    async def sagemaker_wait(request: WaitRequest, ctx: Context) -> CallToolResult:
        """Wait for InService; fail early on CannotStartContainerError, crashes, capacity waits and /ping stalls.

        Reports each status change as progress; cancelling stops the wait (the endpoint is left as it is).
        """

        def work(*, progress: ProgressCallback, cancel: CancelToken) -> EndpointState:
            session = sagemaker_session(deps).but(progress=progress, cancel=cancel)
            return session.endpoint_for(request).wait(request)

        state = await run_blocking(ctx, work, label=f"sagemaker_wait {request.endpoint_name}")
        return typed_result(state)

    @tools.action(LogsRequest, title="Endpoint log and engine facts", result=EndpointLogs)
    def sagemaker_logs(request: LogsRequest) -> CallToolResult:
        """The endpoint's CloudWatch log lines, filtered, with the vLLM engine facts parsed from them."""

        return typed_result(sagemaker_session(deps).endpoint_for(request).logs(request))

    @tools.action(InvokeRequest, title="One chat request to an endpoint", result=InvokeResult)
    def sagemaker_invoke(request: InvokeRequest) -> CallToolResult:
        """Send one OpenAI-style chat request; returns the text, finish reason, usage and latency."""

        return typed_result(sagemaker_session(deps).endpoint_for(request).invoke(request))

    @tools.action(DeleteRequest, title="Delete an endpoint, its config and model", result=DeleteReport)
    def sagemaker_delete(request: DeleteRequest) -> CallToolResult:
        """Delete the endpoint, then its config, then its model(s); pieces already gone are fine.

        Refuses resources without gemmaserve's tags unless force=true (only when the user said so); never
        deletes a config or model another endpoint uses (listed as skipped). Needs confirm=true (or
        dry_run=true). Same as `gemmaserve sagemaker delete --yes --json`.
        """

        return typed_result(sagemaker_session(deps).endpoint_for(request).delete(request))

    @tools.action(ListRequest, title="Endpoints gemmaserve created", result=Inventory)
    def sagemaker_list(request: ListRequest) -> CallToolResult:
        """Every endpoint gemmaserve created (age, status, owner, expiry, hourly cost) and leftover models/configs.

        `complete` is false when a region could not be read: then an absence proves nothing, and the
        total is a lower bound (also when an endpoint's price is unknown).
        """
        from gemmaserve.sagemaker import api

        return typed_result(api.list_endpoints(request, sagemaker_session(deps)))

    @tools.action(CleanupRequest, title="Delete expired endpoints", result=CleanupReport)
    def sagemaker_cleanup(request: CleanupRequest) -> CallToolResult:
        """Delete every gemmaserve endpoint whose TTL has passed (expired=true; never those tagged keep), and
        our models/configs that no endpoint uses (orphans=true).

        Needs confirm=true (or dry_run=true). Same as `gemmaserve sagemaker cleanup --expired --yes --json`.
        """
        from gemmaserve.sagemaker import api

        return typed_result(api.cleanup(request, sagemaker_session(deps)))
