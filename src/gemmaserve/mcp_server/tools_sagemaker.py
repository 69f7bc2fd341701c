"""MCP tools over :mod:`gemmaserve.sagemaker.api`, the same functions ``gemmaserve sagemaker …`` calls.

The deploy interlock is the library's: preflight always runs (this server offers no
way to skip it or to accept an unknown finding), so a T4 deploy without the clamp
image, a missing quota or an unknown role is refused before anything is created.
Deploy and wait report progress and stop on cancellation; deploy then deletes what it created.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from gemmaserve.mcp_server.deps import ServerDeps
from gemmaserve.mcp_server.framework import (
    DESTRUCTIVE_REMOTE,
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
from gemmaserve.sagemaker.api import DeployOutcome
from gemmaserve.sagemaker.delete import DeleteReport
from gemmaserve.sagemaker.inventory import CleanupReport, Inventory
from gemmaserve.sagemaker.logs import EndpointLogs
from gemmaserve.sagemaker.preflight import PreflightReport
from gemmaserve.sagemaker.runtime import InvokeResult
from gemmaserve.sagemaker.status import EndpointState

Model = Annotated[str, Field(description="Catalog model, e.g. gemma-4-e2b (see the plan tool).")]
Encoding = Annotated[str, Field(description="bf16, qat-w4a16, qat-q4_0-unquantized or gguf-q4_0.")]
InstanceTypes = Annotated[
    list[str],
    Field(
        min_length=1,
        max_length=5,
        description="SageMaker instance types, e.g. ['ml.g4dn.xlarge']; several (same GPU) form an InstancePools "
        "fallback in priority order.",
    ),
]
Region = Annotated[str | None, Field(description="AWS region (default: the AWS profile's, else us-east-1).")]
Regions = Annotated[list[str] | None, Field(description="Regions to try in order; default: the single default region.")]
EndpointName = Annotated[str, Field(min_length=1, max_length=63, description="The SageMaker endpoint name.")]
ListPrices = Annotated[bool, Field(description="Use the catalog's dated list prices instead of the Pricing API.")]
DryRun = Annotated[bool, Field(description="Only say what would be done; change nothing (needs no confirm).")]

INVOKE = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
DEPLOY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)


def _region(region: str | None) -> str:
    from gemmaserve.sagemaker.clients import default_region

    return default_region(region)


def _regions(regions: list[str] | None, region: str | None = None, *, sweep: bool = False) -> list[str]:
    """The CLI's rule: a sweep (every region botocore lists for SageMaker), else the list given, else the default."""
    from gemmaserve.sagemaker.inputs import commercial_regions, parse_regions

    if sweep:
        return list(commercial_regions())
    if regions:
        return parse_regions(regions)
    return [_region(region)]


def summarise_state(state: EndpointState) -> str:
    parts = [f"{state.endpoint_name} ({state.region}): {state.status.value}"]
    if state.instance_type:
        parts.append(f"on {state.instance_type}")
    if state.elapsed_s is not None:
        parts.append(f"after {state.elapsed_s / 60:.1f} min")
    if state.failure_reason:
        parts.append(f"— {state.failure_reason}")
    return " ".join(parts)


def summarise_deploy(outcome: DeployOutcome) -> str:
    plan = outcome.plan
    price = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    where = plan.instance_types[0]
    if plan.price_range is not None:
        where = "an instance pool of " + " > ".join(plan.instance_types)
        price = f"${plan.price_range.low_usd_per_hour:.3f}–{plan.price_range.high_usd_per_hour:.3f}/hour"
    head = f"Endpoint {plan.endpoint_name} in {plan.region} on {where} at {price}"
    if outcome.dry_run:
        calls = ", ".join(call.operation for call in plan.calls)
        text = f"Dry run: {head}. Would call {calls}. Container runs: vllm serve {' '.join(plan.masked_serve_args())}"
        failed = outcome.preflight.failures(accept_unknown=True) if outcome.preflight else []
        if failed:
            text += ". A deploy would be refused: " + "; ".join(f"{f.check}: {f.detail}" for f in failed)
        return text
    state = outcome.result.state if outcome.result else None
    tail = summarise_state(state) if state else "created; not waited for (call sagemaker_wait)"
    return f"{head}. {tail}. It bills until deleted: sagemaker_delete {plan.endpoint_name}."


def register(tools: ToolSet, deps: ServerDeps) -> None:
    @tools.tool(name="sagemaker_preflight", title="Will this SageMaker deploy work?", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def sagemaker_preflight(
        model: Model,
        instance_types: InstanceTypes,
        encoding: Encoding = "qat-w4a16",
        regions: Regions = None,
        region: Region = None,
        image_uri: Annotated[str | None, Field(description="Container image ({region} is filled in).")] = None,
        role_arn: Annotated[str | None, Field(description="The execution role ARN to check.")] = None,
        inference_ami_version: str | None = None,
        max_model_len: Annotated[int, Field(ge=16)] = 8192,
        gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.9,
    ) -> Annotated[CallToolResult, PreflightReport]:
        """Quota, memory fit (host RAM is hard), image CUDA vs AMI, the Turing clamp on T4, role and model id.

        Each finding is ok / warn / fail / unknown with its fix; `ok` of the report is false when any
        finding failed or could not be checked. Same as `gemmaserve sagemaker preflight --json`.
        """
        from gemmaserve.sagemaker import api
        from gemmaserve.sagemaker.container import DEFAULT_AMI

        report = api.preflight(
            model,
            encoding,
            list(instance_types),
            regions=_regions(regions, region),
            image_uri=image_uri,
            role_arn=role_arn,
            inference_ami_version=inference_ami_version or DEFAULT_AMI,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            check_model=deps.model_checker(),
            factory=deps.clients(),
        )
        bad = [f for f in report.findings if f.status.value in ("fail", "unknown")]
        summary = (
            "Ready to deploy."
            if report.ok
            else "Not ready: "
            + "; ".join(f"{f.check} {f.status.value}: {f.detail}" + (f" (fix: {f.fix})" if f.fix else "") for f in bad)
        )
        return typed_result(report, summary)

    @tools.tool(name="sagemaker_deploy", title="Deploy a SageMaker endpoint", annotations=DEPLOY)
    @translate_errors
    async def sagemaker_deploy(
        model: Model,
        instance_types: InstanceTypes,
        ctx: Context,
        confirm: Confirm,
        encoding: Encoding = "qat-w4a16",
        role_arn: Annotated[str | None, Field(description="Execution role ARN (required unless dry_run).")] = None,
        endpoint_name: Annotated[str | None, Field(description="Default: <model>-<gpu>.")] = None,
        regions: Regions = None,
        region: Region = None,
        image_uri: Annotated[
            str | None, Field(description="Container image; T4 needs the derived clamp image.")
        ] = None,
        inference_ami_version: str | None = None,
        language_model_only: Annotated[
            bool, Field(description="Text only: vLLM's --language-model-only skips the vision and audio towers.")
        ] = False,
        owner: Annotated[
            str | None, Field(description="The gemmaserve:owner tag (default: the server's user).")
        ] = None,
        ttl_hours: Annotated[float, Field(gt=0, description="After this, sagemaker_cleanup deletes it.")] = 4.0,
        keep: Annotated[bool, Field(description="Never expire, and keep what was created if interrupted.")] = False,
        vllm_args: Annotated[list[str] | None, Field(description="Extra `vllm serve` flag tokens.")] = None,
        env: Annotated[dict[str, str] | None, Field(description="Extra container environment (e.g. HF_TOKEN).")] = None,
        max_model_len: Annotated[int, Field(ge=16)] = 8192,
        gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=0.99)] = 0.9,
        max_num_seqs: Annotated[int | None, Field(ge=1)] = None,
        startup_timeout_s: Annotated[int, Field(ge=60, le=3600)] = 1800,
        download_timeout_s: Annotated[int, Field(ge=60, le=3600)] = 1800,
        timeout_s: Annotated[float, Field(ge=60, description="How long to wait for InService.")] = 3600.0,
        wait: Annotated[bool, Field(description="Wait for InService (with early failure diagnosis).")] = True,
        list_prices: ListPrices = False,
        dry_run: DryRun = False,
    ) -> Annotated[CallToolResult, DeployOutcome]:
        """Create Model → EndpointConfig → Endpoint (tagged, with a TTL) and wait for InService. Costs money.

        Preflight always runs first and the deploy is refused, with each failed check and its fix, unless
        every check passes now (on a T4 that includes the Turing clamp image). Call with dry_run=true
        first to see the exact AWS calls and $/hour, then confirm=true once the user agreed. Reports
        progress; if the request is cancelled, whatever this call created is deleted.
        Same as `gemmaserve sagemaker deploy --json`.
        """
        from gemmaserve.errors import UsageError
        from gemmaserve.sagemaker import api
        from gemmaserve.sagemaker.container import DEFAULT_AMI

        if not dry_run:
            if not role_arn:
                raise UsageError("deploy needs role_arn.", hint="Create one: gemmaserve sagemaker role create")
            require_confirmation(confirm, f"deploy {model} on {', '.join(instance_types)} (billed by the hour)")

        def work(cancellation: Cancellation, report: ProgressSink) -> DeployOutcome:
            return api.deploy(
                model,
                encoding,
                list(instance_types),
                regions=_regions(regions, region),
                role_arn=role_arn or "arn:aws:iam::000000000000:role/DRY-RUN",
                endpoint_name=endpoint_name,
                image_uri=image_uri,
                ttl_hours=None if keep else ttl_hours,
                keep=keep,
                dry_run=dry_run,
                wait=wait,
                timeout_s=timeout_s,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                max_num_seqs=max_num_seqs,
                vllm_args=vllm_args or None,
                env=env or {},
                inference_ami_version=inference_ami_version or DEFAULT_AMI,
                startup_timeout_s=startup_timeout_s,
                language_model_only=language_model_only,
                owner=owner,
                download_timeout_s=download_timeout_s,
                live_prices=not list_prices,
                check_model=deps.model_checker(),
                factory=None if dry_run else deps.clients(),
                progress=message_progress(report, cancellation),
                now=deps.now,
                sleep=deps.sleeper(cancellation),
            )

        outcome = await run_blocking(ctx, work)
        return typed_result(outcome, summarise_deploy(outcome))

    @tools.tool(name="sagemaker_status", title="Endpoint status", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def sagemaker_status(
        endpoint_name: EndpointName, region: Region = None
    ) -> Annotated[CallToolResult, EndpointState]:
        """Creating / InService / Failed / NotFound, placed instance type, image, elapsed time, failure reason."""
        from gemmaserve.sagemaker import api

        state = api.status(endpoint_name, region=_region(region), factory=deps.clients(), now=deps.now)
        return typed_result(state, summarise_state(state))

    @tools.tool(name="sagemaker_wait", title="Wait for InService", annotations=READ_ONLY_REMOTE)
    @translate_errors
    async def sagemaker_wait(
        endpoint_name: EndpointName,
        ctx: Context,
        region: Region = None,
        timeout_s: Annotated[float, Field(ge=1)] = 3600.0,
        poll_s: Annotated[float, Field(ge=1)] = 30.0,
    ) -> Annotated[CallToolResult, EndpointState]:
        """Wait for InService; fail early on CannotStartContainerError, crashes, capacity waits and /ping stalls.

        Reports each status change as progress; cancelling stops the wait (the endpoint is left as it is).
        """
        from gemmaserve.sagemaker import api

        def work(cancellation: Cancellation, report: ProgressSink) -> EndpointState:
            return api.wait(
                endpoint_name,
                region=_region(region),
                timeout_s=timeout_s,
                poll_s=poll_s,
                factory=deps.clients(),
                progress=message_progress(report, cancellation),
                now=deps.now,
                sleep=deps.sleeper(cancellation),
            )

        state = await run_blocking(ctx, work)
        return typed_result(state, summarise_state(state))

    @tools.tool(name="sagemaker_logs", title="Endpoint log and engine facts", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def sagemaker_logs(
        endpoint_name: EndpointName,
        region: Region = None,
        since_min: Annotated[float, Field(gt=0)] = 180.0,
        contains: Annotated[str | None, Field(description="Only lines containing this text.")] = None,
        pattern: Annotated[str | None, Field(description="Only lines matching this regular expression.")] = None,
        tail: Annotated[int, Field(ge=0, le=5000)] = 200,
    ) -> Annotated[CallToolResult, EndpointLogs]:
        """The endpoint's CloudWatch log lines, filtered, with the vLLM engine facts parsed from them."""
        from gemmaserve.sagemaker import api

        result = api.logs(
            endpoint_name,
            region=_region(region),
            since_s=since_min * 60,
            contains=contains,
            pattern=pattern,
            tail=tail,
            factory=deps.clients(),
            now=deps.now,
        )
        if not result.log_group_exists:
            summary = f"No log group {result.log_group} yet (capacity wait, or the container cannot start)."
        else:
            summary = f"{len(result.lines)} lines from {result.log_group}" + (
                " (truncated)" if result.truncated else ""
            )
        return typed_result(result, summary)

    @tools.tool(name="sagemaker_invoke", title="One chat request to an endpoint", annotations=INVOKE)
    @translate_errors
    def sagemaker_invoke(
        endpoint_name: EndpointName,
        prompt: Annotated[str, Field(min_length=1)],
        region: Region = None,
        max_tokens: Annotated[int, Field(ge=1, le=32768)] = 256,
        temperature: Annotated[float, Field(ge=0)] = 0.0,
    ) -> Annotated[CallToolResult, InvokeResult]:
        """Send one OpenAI-style chat request; returns the text, finish reason, usage and latency."""
        from gemmaserve.sagemaker import api

        result = api.invoke_chat(
            endpoint_name,
            prompt,
            region=_region(region),
            max_tokens=max_tokens,
            temperature=temperature,
            factory=deps.clients(),
        )
        return typed_result(result, result.text)

    @tools.tool(name="sagemaker_delete", title="Delete an endpoint, its config and model", annotations=DELETE)
    @translate_errors
    def sagemaker_delete(
        endpoint_name: EndpointName,
        confirm: Confirm,
        region: Region = None,
        busy_timeout_s: Annotated[float, Field(ge=0, description="Wait this long while it is Creating.")] = 1800.0,
        dry_run: DryRun = False,
        force: Annotated[
            bool,
            Field(
                description="Also delete resources gemmaserve did not create (untagged). Only when the user said so."
            ),
        ] = False,
    ) -> Annotated[CallToolResult, DeleteReport]:
        """Delete the endpoint, then its config, then its model(s); pieces already gone are fine.

        Refuses resources without gemmaserve's tags unless force=true; never deletes a config or model
        another endpoint uses (listed as skipped). Needs confirm=true (or dry_run=true).
        Same as `gemmaserve sagemaker delete --yes --json`.
        """
        from gemmaserve.sagemaker import api

        if not dry_run:
            require_confirmation(confirm, f"delete endpoint {endpoint_name} and its config and model")
        extra = {"sleep": deps.sleep} if deps.sleep is not None else {}
        report = api.delete(
            endpoint_name,
            region=_region(region),
            dry_run=dry_run,
            force=force,
            busy_timeout_s=busy_timeout_s,
            factory=deps.clients(),
            now=deps.now,
            **extra,  # type: ignore[arg-type]
        )
        verb = "Would delete" if report.dry_run else "Deleted"
        summary = f"{verb}: {', '.join(report.deleted) or 'nothing'}"
        if report.absent:
            summary += f"; already absent: {', '.join(report.absent)}"
        if report.skipped:
            summary += f"; left in place: {', '.join(report.skipped)}"
        return typed_result(report, summary)

    @tools.tool(name="sagemaker_list", title="Endpoints gemmaserve created", annotations=READ_ONLY_REMOTE)
    @translate_errors
    def sagemaker_list(
        regions: Regions = None,
        region: Region = None,
        all_regions: Annotated[bool, Field(description="Sweep every region with SageMaker GPU hosting.")] = False,
        list_prices: ListPrices = False,
    ) -> Annotated[CallToolResult, Inventory]:
        """Every endpoint gemmaserve created (age, status, owner, expiry, hourly cost) and leftover models/configs.

        `complete` is false when a region could not be read: then an absence proves nothing, and the
        total is a lower bound (also when an endpoint's price is unknown).
        """
        from gemmaserve.sagemaker import api

        inventory = api.list_endpoints(
            regions=_regions(regions, region, sweep=all_regions),
            live_prices=not list_prices,
            factory=deps.clients(),
            now=deps.now,
        )
        bound = "at least " if inventory.total_is_lower_bound else ""
        summary = f"{len(inventory.endpoints)} endpoints, {bound}${inventory.total_usd_per_hour:.3f}/hour in total"
        if inventory.unpriced:
            summary += "; price unknown for " + ", ".join(inventory.unpriced)
        if inventory.orphans:
            summary += f"; {len(inventory.orphans)} leftover models/configs (sagemaker_cleanup with orphans=true)"
        if inventory.errors:
            summary += "; INCOMPLETE, could not check: " + ", ".join(
                f"{e.region} ({e.message})" for e in inventory.errors
            )
        return typed_result(inventory, summary)

    @tools.tool(name="sagemaker_cleanup", title="Delete expired endpoints", annotations=DESTRUCTIVE_REMOTE)
    @translate_errors
    def sagemaker_cleanup(
        confirm: Confirm,
        regions: Regions = None,
        region: Region = None,
        all_regions: bool = False,
        list_prices: ListPrices = False,
        dry_run: DryRun = False,
        orphans: Annotated[bool, Field(description="Also delete our models/configs that no endpoint uses.")] = False,
    ) -> Annotated[CallToolResult, CleanupReport]:
        """Delete every gemmaserve endpoint whose TTL has passed (never those tagged keep), and orphans if asked.

        Needs confirm=true (or dry_run=true). Same as `gemmaserve sagemaker cleanup --expired --yes --json`.
        """
        from gemmaserve.sagemaker import api

        chosen = _regions(regions, region, sweep=all_regions)
        if not dry_run:
            require_confirmation(confirm, f"delete every expired gemmaserve endpoint in {', '.join(chosen)}")
        report = api.cleanup(
            regions=chosen,
            dry_run=dry_run,
            orphans=orphans,
            live_prices=not list_prices,
            factory=deps.clients(),
            now=deps.now,
        )
        names = ", ".join(f"{e.endpoint_name} ({e.region})" for e in report.expired) or "none"
        summary = ("Would delete" if report.dry_run else "Expired and deleted") + f": {names}"
        if report.orphans:
            summary += "; orphans: " + ", ".join(f"{o.kind}:{o.name} ({o.region})" for o in report.orphans)
        if report.errors:
            summary += "; INCOMPLETE, could not check: " + ", ".join(f"{e.region} ({e.message})" for e in report.errors)
        return typed_result(report, summary)
