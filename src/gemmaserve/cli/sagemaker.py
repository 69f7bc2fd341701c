"""``gemmaserve sagemaker …``: each command is its request model's options, one call to :mod:`gemmaserve.sagemaker.api`, its result.

The options come from :mod:`gemmaserve.sagemaker.spec.requests` (so the MCP tools take the same names,
defaults and ranges); each result is printed by its view (:mod:`gemmaserve.views.sagemaker`) and its
``ok`` decides the exit status (:func:`~gemmaserve.cli.output.finish`). Commands that create, change or
delete something ask first, or need ``--yes`` off a terminal; dry runs need neither. Progress goes to
stderr through the one progress display; notes about an incomplete result (regions not read, resources
left) go there too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from gemmaserve.cli.options import confirm, request_options
from gemmaserve.cli.output import finish
from gemmaserve.cli.progress_display import progress_display
from gemmaserve.errors import UsageError
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
    from gemmaserve.sagemaker.operations.inventory import CleanupReport, RegionError


def _message(event: ProgressEvent) -> list[str]:
    return [event.message]


def _every_event(event: ProgressEvent) -> bool:
    # The library reports a status or a step when it changes, so off a terminal every event is a line worth
    # keeping in the log (each Create, each region read, each status).
    return True


@contextmanager
def _session() -> Iterator[SageMakerSession]:
    """The library's session of defaults, its progress on the progress display while the block runs."""
    from gemmaserve.sagemaker.api import SageMakerSession

    display: Callable[[ProgressEvent], None]
    with progress_display(_message, phase_starts=_every_event) as display:
        yield SageMakerSession(progress=display)


def _quiet() -> SageMakerSession:
    """A session of defaults for an action that reports no progress (status, logs, invoke, autoscale)."""
    from gemmaserve.sagemaker.api import SageMakerSession

    return SageMakerSession()


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

    with _session() as session:
        report = api.preflight(request, session)
    finish(report, as_json=as_json)


@cli.command()
@request_options(DeployRequest, yes_in_body=True)
def deploy(request: DeployRequest, yes: bool, as_json: bool) -> None:
    """Create Model → EndpointConfig → Endpoint (tagged, with TTL) and wait for InService.

    Preflight runs first and refuses the deploy on any failed check; the question before anything is
    created names the $/hour. --dry-run shows the AWS calls instead.

    \b
    Examples:
      gemmaserve sagemaker deploy --model e2b --instance ml.g6.xlarge --dry-run
      gemmaserve sagemaker deploy --model e2b --instance ml.g6.xlarge --instance ml.g6.2xlarge \\
          --role-arn ARN --regions us-east-1,us-west-2 --yes
      gemmaserve sagemaker deploy --model e2b --encoding bf16 --instance ml.g4dn.xlarge \\
          --image T4_IMAGE_URI --role-arn ARN --env HF_TOKEN=hf_… --max-num-seqs 32 --yes
    """
    from gemmaserve.sagemaker import api
    from gemmaserve.views.sagemaker import usd_range

    prepared = api.prepare_deploy(request)
    plan = prepared.plan
    price = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    if plan.price_range is not None:
        price = usd_range(plan.price_range)
    confirm(request, yes, prompt=f"create endpoint {plan.endpoint_name} in {plan.region} at {price}")
    with _session() as session:  # after the question: the display draws over nothing it did not write
        outcome = api.deploy(request, session, prepared=prepared)
    if not outcome.ok:
        click.echo("A deploy with these settings would be refused by preflight (fail above).", err=True)
    finish(outcome, as_json=as_json)


@cli.command()
@request_options(UpdateRequest, yes_in_body=True)
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
    with _session() as session:
        result = api.update(request, session)
    finish(result, as_json=as_json)


@cli.command()
@request_options(StatusRequest)
def status(request: StatusRequest, as_json: bool) -> None:
    """Creating / InService / Failed / NotFound, placed instance type, image, elapsed time.

    \b
    Examples:
      gemmaserve sagemaker status gemma-4-e2b-l4
      gemmaserve sagemaker status gemma-4-e2b-l4 --region us-west-2 --json
    """

    finish(_quiet().endpoint_for(request).status(), as_json=as_json)


@cli.command(name="wait")
@request_options(WaitRequest)
def wait_command(request: WaitRequest, as_json: bool) -> None:
    """Wait for InService; fail early on CannotStartContainerError, crashes, capacity waits and /ping stalls.

    \b
    Examples:
      gemmaserve sagemaker wait gemma-4-e2b-l4
      gemmaserve sagemaker wait gemma-4-e2b-l4 --timeout-s 2400 --poll-s 15 --json
    """

    with _session() as session:
        state = session.endpoint_for(request).wait(request)
    finish(state, as_json=as_json)


@cli.command()
@request_options(LogsRequest)
def logs(request: LogsRequest, as_json: bool) -> None:
    """The endpoint's CloudWatch log, filtered, with the engine facts parsed from it.

    \b
    Examples:
      gemmaserve sagemaker logs gemma-4-e2b-l4 --since-min 30
      gemmaserve sagemaker logs gemma-4-e2b-l4 --grep 'KV cache|concurrency' --tail 50 --json
    """

    finish(_quiet().endpoint_for(request).logs(request), as_json=as_json)


@cli.command(name="invoke")
@request_options(InvokeRequest)
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
    endpoint = _quiet().endpoint_for(request)
    if request.stream:
        # The text as it arrives is the output; there is no result to print after it.
        for text in endpoint.stream(request):
            click.echo(text, nl=False)
        click.echo()
        return
    finish(endpoint.invoke(request), as_json=as_json)  # plain: the reply's text alone (scripts pipe it)


@cli.command()
@request_options(DeleteRequest)
def delete(request: DeleteRequest, as_json: bool) -> None:
    """Delete the endpoint, then its config, then its model(s). Missing pieces are fine.

    Refuses resources without gemmaserve's tags unless --force; never deletes a config or
    model another endpoint uses.

    \b
    Examples:
      gemmaserve sagemaker delete gemma-4-e2b-l4 --dry-run
      gemmaserve sagemaker delete gemma-4-e2b-l4 --region us-west-2 --yes
    """

    with _session() as session:
        report = session.endpoint_for(request).delete(request)
    finish(report, as_json=as_json)


@cli.command(name="list")
@request_options(ListRequest)
def list_command(request: ListRequest, as_json: bool) -> None:
    """Every endpoint gemmaserve created, with age, status and hourly cost, and leftover models and configs.

    Exits 1 when a region could not be read: an absence there proves nothing.

    \b
    Examples:
      gemmaserve sagemaker list
      gemmaserve sagemaker list --all-regions --list-prices --json
    """
    from gemmaserve.sagemaker import api

    with _session() as session:
        inventory = api.list_endpoints(request, session)
    _note_unread(inventory.errors)
    finish(inventory, as_json=as_json)


def _note_unread(errors: list[RegionError]) -> None:
    """Each region that could not be read, on stderr: the result is not ok, and this says why."""
    if errors:
        for error in errors:
            click.echo(f"Error: could not check {error.region}: {error.message}", err=True)
        click.echo(f"Incomplete: {len(errors)} region(s) could not be read; what they hold is unknown.", err=True)
        if all(error.error == "CredentialsMissing" for error in errors):
            from gemmaserve.sagemaker.aws import CREDENTIALS_HINT

            click.echo(f"Hint: {CREDENTIALS_HINT}.", err=True)


@cli.command()
@request_options(CleanupRequest)
def cleanup(request: CleanupRequest, as_json: bool) -> None:
    """Delete every endpoint of yours whose TTL has passed (--expired) and your leftovers (--orphans).

    Yours: tagged with your owner (as deploy tags it, or --owner); others' are listed and left alone
    unless --any-owner. One refusal does not stop the sweep: each resource is shown with its verdict.
    Exits 1 when a region could not be read or anything chosen was refused, failed or left.

    \b
    Examples:
      gemmaserve sagemaker cleanup --expired --orphans --dry-run
      gemmaserve sagemaker cleanup --expired --all-regions --yes
    """
    from gemmaserve.sagemaker import api

    with _session() as session:
        report = api.cleanup(request, session)
    _note_unread(report.errors)
    _note_left(report)
    finish(report, as_json=as_json)


def _note_left(report: CleanupReport) -> None:
    """What cleanup chose and could not remove, on stderr: the result is not ok, and this says why."""
    from gemmaserve.sagemaker.operations.inventory import BAD_VERDICTS

    bad = [item for item in report.items if item.verdict in BAD_VERDICTS]
    if bad:
        click.echo(
            f"Not done: {len(bad)} resource(s) refused, failed or left: "
            + ", ".join(f"{item.kind}:{item.name} ({item.verdict.value})" for item in bad),
            err=True,
        )


@cli.command()
@request_options(AutoscaleRequest)
def autoscale(request: AutoscaleRequest, as_json: bool) -> None:
    """Register the endpoint's variant with Application Auto Scaling (target tracking).

    More instances cost more.

    \b
    Examples:
      gemmaserve sagemaker autoscale gemma-4-e2b-l4 --max-instances 3 --target-invocations 120 \\
          --dry-run
      gemmaserve sagemaker autoscale gemma-4-e2b-l4 --min-instances 1 --max-instances 4 \\
          --target-invocations 60 --yes
    """

    finish(_quiet().endpoint_for(request).autoscale(request), as_json=as_json)


@cli.command()
@request_options(JumpstartRequest)
def jumpstart(request: JumpstartRequest, as_json: bool) -> None:
    """The public JumpStart hub's Gemma 4 entries and the instance types each supports.

    \b
    Examples:
      gemmaserve sagemaker jumpstart
      gemmaserve sagemaker jumpstart --region us-west-2 --name-filter gemma-4 --json
    """
    from gemmaserve.sagemaker import api

    finish(api.jumpstart(request), as_json=as_json)


@cli.group()
def role() -> None:
    """The least-privilege endpoint execution role.

    \b
    Examples:
      gemmaserve sagemaker role create --dry-run
    """


@role.command(name="create")
@request_options(RoleCreateRequest)
def role_create(request: RoleCreateRequest, as_json: bool) -> None:
    """Create (or update) the execution role and print the policy it carries.

    --dry-run shows the policy only.

    \b
    Examples:
      gemmaserve sagemaker role create --dry-run
      gemmaserve sagemaker role create --regions us-east-1,us-west-2 --model-s3 s3://bucket/e2b/ -y
    """
    from gemmaserve.sagemaker import api

    finish(api.create_execution_role(request), as_json=as_json)


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
def image_render(request: ImageRenderRequest, as_json: bool) -> None:
    """Print the Dockerfile (or the CodeBuild buildspec); offline.

    \b
    Examples:
      gemmaserve sagemaker image render
      gemmaserve sagemaker image render --region us-west-2 --account 123456789012 --buildspec
    """
    from gemmaserve.sagemaker import api

    plan = api.image_render(request)
    if request.buildspec and not as_json:
        from gemmaserve.views.sagemaker import ImageBuildspec

        plan = ImageBuildspec.model_construct(plan.model_fields_set, **dict(plan))
    finish(plan, as_json=as_json)


@image.command(name="build")
@request_options(ImageBuildRequest)
def image_build(request: ImageBuildRequest, as_json: bool) -> None:
    """Create the ECR repository, CodeBuild project and role (idempotent), build, push, follow.

    Billed per build minute.

    \b
    Examples:
      gemmaserve sagemaker image build --dry-run
      gemmaserve sagemaker image build --wheel dist/gemmaserve-0.1.0-py3-none-any.whl --yes
    """
    from gemmaserve.sagemaker import api

    with _session() as session:
        result = api.image_build(request, session)
    finish(result, as_json=as_json)
