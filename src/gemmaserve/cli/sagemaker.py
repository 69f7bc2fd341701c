"""``gemmaserve sagemaker …``: each command is its request model's options, one call to :mod:`gemmaserve.sagemaker.api`, a render.

The options come from :mod:`gemmaserve.sagemaker.spec.requests` (so the MCP tools take the same names,
defaults and ranges). Commands that create, change or delete something ask first, or need ``--yes`` off
a terminal; dry runs need neither. Progress goes to stderr.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from gemmaserve.cli.options import confirm, request_options
from gemmaserve.cli.output import emit, json_option
from gemmaserve.errors import UsageError
from gemmaserve.findings import Status
from gemmaserve.progress import ProgressEvent
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
    UpdateRequest,
    WaitRequest,
)

if TYPE_CHECKING:
    from gemmaserve.sagemaker.api import SageMakerSession
    from gemmaserve.sagemaker.deployment.preflight import PreflightReport


def _progress(event: ProgressEvent) -> None:
    # The library reports a status or phase when it changes, so every event is a line worth printing.
    click.echo(event.message, err=True)


def _session() -> SageMakerSession:
    """The library's session of defaults, with progress printed on stderr."""
    from gemmaserve.sagemaker.api import SageMakerSession

    return SageMakerSession(progress=_progress)


@click.group(name="sagemaker")
def cli() -> None:
    """SageMaker endpoints that cannot leak money, and the derived T4 image.

    \b
    Examples:
      gemmaserve sagemaker preflight --model e2b --instance ml.g6.xlarge --role-arn ARN
      gemmaserve sagemaker deploy --model e2b --instance ml.g6.xlarge --dry-run
      gemmaserve sagemaker list --all-regions
    """


@cli.command()
@request_options(PreflightRequest)
@json_option
def preflight(request: PreflightRequest, as_json: bool) -> None:
    """Will this deploy work? Quota, memory fit, CUDA vs AMI, Turing clamp, role, model id — each with its fix.

    Exits 1 when a check failed or could not be made.

    \b
    Examples:
      gemmaserve sagemaker preflight --model e2b --instance ml.g6.xlarge --role-arn ARN
      gemmaserve sagemaker preflight --model e2b --instance ml.g4dn.xlarge \\
          --image T4_IMAGE_URI --regions us-east-1,us-west-2 --json
    """
    from gemmaserve.sagemaker import api

    report = api.preflight(request, _session())
    emit(report, as_json=as_json, render=_render_preflight)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _render_preflight(report: Any) -> None:
    click.echo(
        f"Preflight {report.model}/{report.encoding} on {', '.join(report.instance_types)} "
        f"in {', '.join(report.regions)} with {report.image_uri}"
    )
    _render_findings(report)
    click.echo("Result: " + ("ready to deploy" if report.ok else "not ready (fail or unknown above)"))


def _render_findings(report: PreflightReport) -> None:
    # The status words doctor and checkpoint validate print, padded to the longest ("unknown").
    for finding in report.findings:
        click.echo(f"  {finding.status.value:<7} {finding.check}: {finding.detail}")
        if finding.fix and finding.status is not Status.OK:
            click.echo(f"          fix: {finding.fix}")


@cli.command()
@request_options(DeployRequest, yes_in_body=True)
@json_option
def deploy(request: DeployRequest, yes: bool, as_json: bool) -> None:
    """Create Model → EndpointConfig → Endpoint (tagged, with TTL) and wait for InService.

    Preflight runs first and refuses the deploy on any failed check. Asks before creating
    anything, with the $/hour (--yes off a terminal); --dry-run shows the AWS calls instead.

    \b
    Examples:
      gemmaserve sagemaker deploy --model e2b --instance ml.g6.xlarge --dry-run
      gemmaserve sagemaker deploy --model e2b --instance ml.g6.xlarge --instance ml.g6.2xlarge \\
          --role-arn ARN --regions us-east-1,us-west-2 --yes
      gemmaserve sagemaker deploy --model e2b --encoding bf16 --instance ml.g4dn.xlarge \\
          --image T4_IMAGE_URI --role-arn ARN --env HF_TOKEN=hf_… --max-num-seqs 32 --yes
    """
    from gemmaserve.sagemaker import api

    session = _session()
    prepared = api.prepare_deploy(request, session)
    plan = prepared.plan
    price = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    if plan.price_range is not None:
        price = _usd_range(plan.price_range)
    confirm(request, yes, prompt=f"create endpoint {plan.endpoint_name} in {plan.region} at {price}")
    outcome = api.deploy(request, session, prepared=prepared)
    emit(outcome, as_json=as_json, render=_render_deploy)
    if outcome.dry_run and outcome.preflight is not None and outcome.preflight.failures(accept_unknown=True):
        click.echo("A deploy with these settings would be refused by preflight (fail above).", err=True)
        raise click.exceptions.Exit(1)


@cli.command()
@request_options(UpdateRequest, yes_in_body=True)
@json_option
def update(request: UpdateRequest, yes: bool, as_json: bool) -> None:
    """Update a live endpoint blue/green: new variant, traffic shifting, alarms, rollback on a regression.

    Preflight checks the new variant first. SageMaker shifts traffic (--canary PERCENT, the default;
    --linear STEP; --all-at-once) and rolls back when an alarm fires; during the bake gemmaserve measures
    old / new / old (decode rate, the 40 questions) and rolls back on worse answers or a slower decode.
    Exits 1 when the update went back. --dry-run shows the calls and the extra $/hour instead.

    \b
    Examples:
      gemmaserve sagemaker update gemma-4-e2b-l4 --model e2b --encoding bf16 --instance ml.g6.xlarge --dry-run
      gemmaserve sagemaker update gemma-4-e2b-l4 --model e2b --instance ml.g6.xlarge --role-arn ARN \\
          --linear 25 --bake-min 15 --max-slowdown 5 --yes
    """
    from gemmaserve.sagemaker import api

    if not request.dry_run:
        confirm(request, yes, prompt=request.describe_change())
    result = api.update(request, _session())
    emit(result, as_json=as_json, render=_render_update)


def _render_update(result: Any) -> None:
    plan = result.plan
    policy = plan.policy
    size = f" {policy.percent}% of the new fleet" if policy.percent else ""
    click.echo(
        f"Update {plan.endpoint_name} in {plan.region}: new variant {plan.variant_name} "
        f"({plan.model_name}, {plan.config_name})"
    )
    click.echo(
        f"Policy: {policy.mode.value}{size}, bake {policy.bake_s} s per step, old fleet kept "
        f"{policy.termination_wait_s} s after the last shift, at most {policy.max_execution_s} s in all"
    )
    click.echo("Rollback alarms: " + ", ".join(plan.alarm_names))
    click.echo(f"Gate: {plan.gate}")
    extra = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    click.echo(f"While both fleets run the new one adds {extra}")
    if result.dry_run:
        click.echo("Dry run — these calls would be made (preflight of the new variant first):")
        for planned in plan.masked_calls():
            click.echo(f"  {planned.service}:{planned.operation} " + _short_params(planned.params))
        return
    if result.gate is not None:
        click.echo(f"Gate verdict: {result.gate.verdict.value}: " + "; ".join(result.gate.reasons))
    click.echo(f"Outcome: {result.outcome.value}" + (f" ({result.rollback})" if result.rollback else ""))
    if result.deleted:
        click.echo("Deleted: " + ", ".join(result.deleted))
    if result.remaining:
        click.echo("Left: " + ", ".join(result.remaining))
    for command in result.commands:
        click.echo(f"  next: {command}")


def _usd_range(price_range: Any) -> str:
    text = f"${price_range.low_usd_per_hour:.3f}–{price_range.high_usd_per_hour:.3f}/hour"
    if price_range.unpriced:
        text += f" (price unknown for {', '.join(price_range.unpriced)})"
    return text


def _render_deploy(outcome: Any) -> None:
    plan = outcome.plan
    price = "price unknown"
    if plan.price_range is not None:
        price = _usd_range(plan.price_range) + " depending on the type SageMaker places"
    elif plan.price:
        estimated = ", estimated" if plan.price.estimated else ""
        price = f"${plan.usd_per_hour:.3f}/hour ({plan.price.source}, {plan.price.date}{estimated})"
    where = (
        plan.instance_types[0]
        if len(plan.instance_types) == 1
        else "an instance pool of " + " > ".join(plan.instance_types)
    )
    click.echo(f"Endpoint {plan.endpoint_name} in {plan.region} on {where} at {price}")
    click.echo(f"Image: {plan.image_uri}")
    click.echo("The container will run: vllm serve " + " ".join(plan.masked_serve_args()))
    if outcome.dry_run:
        if outcome.preflight is not None:
            click.echo("Offline preflight (quota, role and model id are checked when deploying):")
            _render_findings(outcome.preflight)
        click.echo("Dry run — these calls would be made:")
        for call in plan.masked_calls():
            click.echo(f"  {call.service}:{call.operation} " + _short_params(call.params))
        click.echo(
            "Tags on each resource: "
            + ", ".join(f"{tag['Key']}={tag['Value']}" for tag in plan.calls[0].params.get("Tags", []))
        )
        return
    for attempt in outcome.attempts:
        click.echo(f"  {attempt.region}: {attempt.outcome} ({attempt.detail})")
    state = outcome.result.state if outcome.result else None
    if state is not None:
        click.echo(f"{state.endpoint_name}: {state.status.value} on {_placement(state)}")


def _placement(state: Any) -> str:
    """The placed type; for a pool with none placed yet (or not reported), the pool's types."""
    if state.instance_type and not state.pool_types:
        return str(state.instance_type)
    if state.instance_type:
        return f"{state.instance_type} (pool {', '.join(state.pool_types)})"
    return f"pool {', '.join(state.pool_types)} (placed type not reported yet)" if state.pool_types else "?"


def _short_params(params: dict[str, Any]) -> str:
    import json

    shown = {key: value for key, value in params.items() if key != "Tags"}
    return json.dumps(shown, sort_keys=True)


@cli.command()
@request_options(StatusRequest)
@json_option
def status(request: StatusRequest, as_json: bool) -> None:
    """Creating / InService / Failed / NotFound, placed instance type, image, elapsed time.

    \b
    Examples:
      gemmaserve sagemaker status gemma-4-e2b-l4
      gemmaserve sagemaker status gemma-4-e2b-l4 --region us-west-2 --json
    """

    emit(_session().endpoint_for(request).status(), as_json=as_json, render=_render_state)


def _render_state(state: Any) -> None:
    click.echo(f"{state.endpoint_name} ({state.region}): {state.status.value}")
    price = None
    if state.usd_per_hour is not None:
        price = f"${state.usd_per_hour:.3f}/hour"
    elif state.price_range is not None:
        price = _usd_range(state.price_range)
    elif state.status.value != "NotFound":
        price = "price unknown"
    for label, value in (
        ("instance", state.instance_type),
        ("pool", ", ".join(state.pool_types) or None),
        ("price", price),
        ("image", state.resolved_image or state.image),
        ("elapsed", f"{state.elapsed_s / 60:.1f} min" if state.elapsed_s is not None else None),
        ("reason", state.failure_reason),
    ):
        if value:
            click.echo(f"  {label:<9}{value}")


@cli.command(name="wait")
@request_options(WaitRequest)
@json_option
def wait_command(request: WaitRequest, as_json: bool) -> None:
    """Wait for InService; fail early on CannotStartContainerError, crashes, capacity waits and /ping stalls.

    \b
    Examples:
      gemmaserve sagemaker wait gemma-4-e2b-l4
      gemmaserve sagemaker wait gemma-4-e2b-l4 --timeout-s 2400 --poll-s 15 --json
    """

    emit(_session().endpoint_for(request).wait(request), as_json=as_json, render=_render_state)


@cli.command()
@request_options(LogsRequest)
@json_option
def logs(request: LogsRequest, as_json: bool) -> None:
    """The endpoint's CloudWatch log, filtered, with the engine facts parsed from it.

    \b
    Examples:
      gemmaserve sagemaker logs gemma-4-e2b-l4 --since-min 30
      gemmaserve sagemaker logs gemma-4-e2b-l4 --grep 'KV cache|concurrency' --tail 50 --json
    """

    emit(_session().endpoint_for(request).logs(request), as_json=as_json, render=_render_logs)


def _render_logs(result: Any) -> None:
    if not result.log_group_exists:
        click.echo(f"No log group {result.log_group} yet (capacity wait, or the container cannot start).", err=True)
    for line in result.lines:
        click.echo(f"{line.timestamp:%H:%M:%S} {line.message}")
    facts = {k: v for k, v in result.facts.model_dump(mode="json").items() if v not in (None, [], "not_started")}
    click.echo("Engine facts: " + (", ".join(f"{k}={v}" for k, v in facts.items()) or "none yet"), err=True)


@cli.command(name="invoke")
@request_options(InvokeRequest)
@json_option
def invoke_command(request: InvokeRequest, as_json: bool) -> None:
    """One chat request (OpenAI body); --stream prints text as it arrives.

    \b
    Examples:
      gemmaserve sagemaker invoke gemma-4-e2b-l4 "What is 17 * 23?"
      gemmaserve sagemaker invoke gemma-4-e2b-l4 "Write a haiku about GPUs." --stream --max-tokens 64
    """

    if request.stream and as_json:
        raise UsageError(
            "--stream and --json cannot be combined: stdout carries either the text as it arrives "
            "or one JSON document at the end.",
            hint="Drop --stream for the JSON result, or --json.",
        )
    endpoint = _session().endpoint_for(request)
    if request.stream:
        for text in endpoint.stream(request):
            click.echo(text, nl=False)
        click.echo()
        return
    emit(endpoint.invoke(request), as_json=as_json, render=lambda r: click.echo(r.text))


@cli.command()
@request_options(DeleteRequest)
@json_option
def delete(request: DeleteRequest, as_json: bool) -> None:
    """Delete the endpoint, then its config, then its model(s). Missing pieces are fine.

    Refuses resources without gemmaserve's tags unless --force; never deletes a config or
    model another endpoint uses. Asks first (--yes off a terminal).

    \b
    Examples:
      gemmaserve sagemaker delete gemma-4-e2b-l4 --dry-run
      gemmaserve sagemaker delete gemma-4-e2b-l4 --region us-west-2 --yes
    """

    emit(_session().endpoint_for(request).delete(request), as_json=as_json, render=_render_delete)


def _render_delete(report: Any) -> None:
    verb = "Would delete" if report.dry_run else "Deleted"
    click.echo(f"{verb}: {', '.join(report.deleted) or 'nothing'}")
    if report.absent:
        click.echo(f"Already absent: {', '.join(report.absent)}")
    if report.skipped:
        click.echo(f"Left in place: {', '.join(report.skipped)}")


@cli.command(name="list")
@request_options(ListRequest)
@json_option
def list_command(request: ListRequest, as_json: bool) -> None:
    """Every endpoint gemmaserve created, with age, status and hourly cost, and leftover models and configs.

    Exits 1 when a region could not be read: an absence there proves nothing.

    \b
    Examples:
      gemmaserve sagemaker list
      gemmaserve sagemaker list --all-regions --list-prices --json
    """
    from gemmaserve.sagemaker import api

    inventory = api.list_endpoints(request, _session())
    emit(inventory, as_json=as_json, render=_render_inventory)
    _fail_if_incomplete(inventory.errors)


def _fail_if_incomplete(errors: list[Any]) -> None:
    if errors:
        for error in errors:
            click.echo(f"Error: could not check {error.region}: {error.message}", err=True)
        click.echo(f"Incomplete: {len(errors)} region(s) could not be read; what they hold is unknown.", err=True)
        if all(error.error == "CredentialsMissing" for error in errors):
            from gemmaserve.sagemaker.aws import CREDENTIALS_HINT

            click.echo(f"Hint: {CREDENTIALS_HINT}.", err=True)
        raise click.exceptions.Exit(1)


def _render_inventory(inventory: Any) -> None:
    click.echo(
        f"{'ENDPOINT':<32} {'REGION':<14} {'OWNER':<12} {'STATUS':<12} {'INSTANCE':<16} {'AGE':>7} {'$/H':>7} EXPIRES"
    )
    for item in inventory.endpoints:
        age = f"{item.age_s / 3600:.1f}h" if item.age_s is not None else "?"
        usd = f"{item.usd_per_hour:.3f}" if item.usd_per_hour is not None else "unknown"
        if item.usd_per_hour is None and item.price_range is not None:
            usd = f"{item.price_range.low_usd_per_hour:.2f}-{item.price_range.high_usd_per_hour:.2f}"
        shown_type = item.instance_type or ("pool:" + "|".join(item.pool_types) if item.pool_types else "?")
        expires = "keep" if item.keep else (f"{item.expires_at:%Y-%m-%d %H:%M}Z" if item.expires_at else "?")
        if item.expired:
            expires += " EXPIRED"
        click.echo(
            f"{item.endpoint_name:<32} {item.region:<14} {item.owner or '?':<12} {item.status.value:<12} "
            f"{shown_type:<16} {age:>7} {usd:>7} {expires}"
        )
    bound = "at least " if inventory.total_is_lower_bound else ""
    why = []
    if inventory.unpriced:
        why.append(f"price unknown for {', '.join(inventory.unpriced)}")
    if inventory.errors:
        why.append(f"{len(inventory.errors)} region(s) unread")
    if len(inventory.errors) == len(inventory.regions):
        click.echo(f"Total: unknown (no region could be read: {', '.join(inventory.regions)})")
    else:
        click.echo(f"Total: {bound}${inventory.total_usd_per_hour:.3f}/hour" + (f" ({'; '.join(why)})" if why else ""))
    if inventory.journal:
        click.echo("Sent by a run that ended without settling them (settle: gemmaserve sagemaker cleanup --journal):")
        for entry in inventory.journal:
            state = "its process is gone" if entry.state == "sent" else entry.state
            click.echo(
                f"  {entry.kind}:{entry.name} ({entry.region}, {entry.owner or '?'}, sent {entry.sent_at:%Y-%m-%d %H:%M}Z"
                f" by pid {entry.pid}; {state})"
            )
    if inventory.orphans:
        click.echo("Leftovers with no endpoint (delete: gemmaserve sagemaker cleanup --orphans):")
        for orphan in inventory.orphans:
            click.echo(f"  {orphan.kind}:{orphan.name} ({orphan.region}, owner {orphan.owner or '?'})")


@cli.command()
@request_options(CleanupRequest)
@json_option
def cleanup(request: CleanupRequest, as_json: bool) -> None:
    """Delete every endpoint of yours whose TTL has passed (--expired) and your leftovers (--orphans).

    Yours: tagged with your owner (as deploy tags it, or --owner); others' are listed and left alone
    unless --any-owner. One refusal does not stop the sweep: each resource is shown with its verdict.
    Asks first (--yes off a terminal). Exits 1 when a region could not be read or anything chosen
    was refused, failed or left.

    \b
    Examples:
      gemmaserve sagemaker cleanup --expired --orphans --dry-run
      gemmaserve sagemaker cleanup --expired --all-regions --yes
    """
    from gemmaserve.sagemaker import api

    report = api.cleanup(request)
    emit(report, as_json=as_json, render=_render_cleanup)
    _fail_if_incomplete(report.errors)
    _fail_if_anything_left(report)


def _render_cleanup(report: Any) -> None:
    whose = "any owner" if report.owner is None else f"owner {report.owner}"
    if not report.items:
        click.echo(f"Nothing to delete ({whose}).")
    for item in report.items:
        owner = item.owner or "no owner tag"
        detail = f": {item.detail}" if item.detail else ""
        if item.verdict == "other owner":
            detail = " (left alone: add --any-owner to include it)"
        click.echo(f"{item.verdict:<13} {item.kind}:{item.name} ({item.region}, {owner}){detail}")
        if item.fix:
            click.echo(f"{'':<13} fix: {item.fix}")


def _fail_if_anything_left(report: Any) -> None:
    bad = [item for item in report.items if item.verdict in ("refused", "failed", "left")]
    if bad:
        click.echo(
            f"Not done: {len(bad)} resource(s) refused, failed or left: "
            + ", ".join(f"{item.kind}:{item.name} ({item.verdict})" for item in bad),
            err=True,
        )
        raise click.exceptions.Exit(1)


@cli.command()
@request_options(AutoscaleRequest)
@json_option
def autoscale(request: AutoscaleRequest, as_json: bool) -> None:
    """Register the endpoint's variant with Application Auto Scaling (target tracking).

    More instances cost more: asks first (--yes off a terminal).

    \b
    Examples:
      gemmaserve sagemaker autoscale gemma-4-e2b-l4 --max-instances 3 --target-invocations 120 \\
          --dry-run
      gemmaserve sagemaker autoscale gemma-4-e2b-l4 --min-instances 1 --max-instances 4 \\
          --target-invocations 60 --yes
    """

    result = _session().endpoint_for(request).autoscale(request)
    emit(
        result,
        as_json=as_json,
        render=lambda r: click.echo(
            f"{'Would register' if r.dry_run else 'Registered'} {r.resource_id}: {r.min_instances}–{r.max_instances} "
            f"instances, target {r.target_invocations_per_instance:g} invocations/instance/min ({r.policy_name})"
        ),
    )


@cli.command()
@request_options(JumpstartRequest)
@json_option
def jumpstart(request: JumpstartRequest, as_json: bool) -> None:
    """The public JumpStart hub's Gemma 4 entries and the instance types each supports.

    \b
    Examples:
      gemmaserve sagemaker jumpstart
      gemmaserve sagemaker jumpstart --region us-west-2 --name-filter gemma-4 --json
    """
    from gemmaserve.sagemaker import api

    def render(result: Any) -> None:
        if not result.models:
            click.echo(f"No Gemma 4 entries in {result.hub} ({result.region}).")
        for model in result.models:
            click.echo(f"{model.hub_content_name} {model.version or ''} (default {model.default_instance_type})")
            click.echo(f"  instances: {', '.join(model.supported_instance_types) or 'not listed'}")

    emit(api.jumpstart(request), as_json=as_json, render=render)


@cli.group()
def role() -> None:
    """The least-privilege endpoint execution role.

    \b
    Examples:
      gemmaserve sagemaker role create --dry-run
    """


@role.command(name="create")
@request_options(RoleCreateRequest)
@json_option
def role_create(request: RoleCreateRequest, as_json: bool) -> None:
    """Create (or update) the execution role and print the policy it carries.

    Asks first (--yes off a terminal); --dry-run shows the policy only.

    \b
    Examples:
      gemmaserve sagemaker role create --dry-run
      gemmaserve sagemaker role create --regions us-east-1,us-west-2 --model-s3 s3://bucket/e2b/ -y
    """
    import json

    from gemmaserve.sagemaker import api

    result = api.create_execution_role(request)

    def render(r: Any) -> None:
        verb = (
            ("Would create" if r.created else "Would update") if r.dry_run else ("Created" if r.created else "Updated")
        )
        click.echo(f"{verb} role {r.role_name} {r.role_arn or ''} with inline policy {r.policy_name}:")
        click.echo(json.dumps(r.policy, indent=2))

    emit(result, as_json=as_json, render=render)


@cli.group()
def image() -> None:
    """The derived T4 image: the pinned AWS vLLM image plus the Turing clamp, built in CodeBuild.

    \b
    Examples:
      gemmaserve sagemaker image render --buildspec
      gemmaserve sagemaker image build --dry-run
    """


@image.command(name="render")
@request_options(ImageRenderRequest)
@json_option
def image_render(request: ImageRenderRequest, as_json: bool) -> None:
    """Print the Dockerfile (or the CodeBuild buildspec); offline.

    \b
    Examples:
      gemmaserve sagemaker image render
      gemmaserve sagemaker image render --region us-west-2 --account 123456789012 --buildspec
    """
    from gemmaserve.sagemaker import api

    plan = api.image_render(request)
    emit(
        plan, as_json=as_json, render=lambda p: click.echo(p.buildspec if request.buildspec else p.dockerfile, nl=False)
    )


@image.command(name="build")
@request_options(ImageBuildRequest)
@json_option
def image_build(request: ImageBuildRequest, as_json: bool) -> None:
    """Create the ECR repository, CodeBuild project and role (idempotent), build, push, follow.

    Billed per build minute: asks first (--yes off a terminal).

    \b
    Examples:
      gemmaserve sagemaker image build --dry-run
      gemmaserve sagemaker image build --wheel dist/gemmaserve-0.1.0-py3-none-any.whl --yes
    """
    from gemmaserve.sagemaker import api

    result = api.image_build(request, _session())

    def render(r: Any) -> None:
        click.echo(
            f"Base image: {r.plan.base_image} (vLLM {r.plan.base_vllm_version or 'checked in the build'}, "
            f"CUDA {r.plan.base_cuda_version or '?'})"
        )
        click.echo(f"gemmaserve from: {r.plan.gemmaserve_source}")
        click.echo(f"Target image: {r.plan.target_image}")
        if r.role is not None:
            principals = sorted(
                {s.get("Principal", {}).get("Service", "?") for s in r.role.trust_policy.get("Statement", [])}
            )
            verb = ("would be created" if r.role.created else "would be updated") if r.role.dry_run else "in use"
            click.echo(f"Build role: {r.role.role_name} ({verb}), trusted by {', '.join(principals)}")
            click.echo(f"Its inline policy {r.role.policy_name}:")
            click.echo(json.dumps(r.role.policy, indent=2))
        click.echo(f"Build: {r.build_id or '(dry run)'} {r.status or ''}")
        if r.image_uri:
            click.echo(f"Deploy with: gemmaserve sagemaker deploy --image {r.image_uri} …")

    emit(result, as_json=as_json, render=render)
