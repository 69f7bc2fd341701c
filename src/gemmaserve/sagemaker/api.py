"""The SageMaker library API the CLI and the MCP server both call: one function per action, typed results.

Each action takes its request model (:mod:`gemmaserve.sagemaker.spec.requests`: the inputs, already checked)
plus the seams a caller may replace: ``factory`` (boto3 clients; tests pass moto's), ``progress``
(:class:`~gemmaserve.progress.ProgressEvent` values: stderr in the CLI, MCP progress), ``now`` and ``sleep``
(a test's scripted sleep; None is real time). Deploy, wait and image build also take ``cancel``
(a :class:`~gemmaserve.progress.CancelToken`): a cancelled deploy deletes what it created, as on Ctrl-C;
a cancelled wait or image build only stops following. None prints. Region lists are tried in order
where an action can fall back.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.cost import PriceLookup
from gemmaserve.errors import InterlockRefused
from gemmaserve.findings import Status
from gemmaserve.progress import CancelToken, ProgressCallback, ProgressEvent, utc_now
from gemmaserve.sagemaker.aws import Boto3ClientFactory, ClientFactory, QuotaCheck, make_price_lookup
from gemmaserve.sagemaker.deployment.endpoint import (
    DeployPlan,
    DeployResult,
    DeploySpec,
    RegionAttempt,
    deploy_across_regions,
    plan_deploy,
    quota_checker_for,
)
from gemmaserve.sagemaker.deployment.preflight import (
    ModelChecker,
    PreflightDeps,
    PreflightReport,
    hub_reachability,
    run_offline_preflight,
    run_preflight,
)
from gemmaserve.sagemaker.deployment.update import UpdateResult
from gemmaserve.sagemaker.image.codebuild import ImageBuildPlan, ImageBuildResult
from gemmaserve.sagemaker.image.iam import RoleResult
from gemmaserve.sagemaker.image.jumpstart import JumpStartListing
from gemmaserve.sagemaker.operations.autoscale import AutoscaleResult
from gemmaserve.sagemaker.operations.inventory import (
    CleanupReport,
    Inventory,
    cleanup_expired,
    list_deployments,
    settle_journal,
)
from gemmaserve.sagemaker.operations.logs import EndpointLogs, read_endpoint_logs
from gemmaserve.sagemaker.operations.runtime import (
    InvokeResult,
    chat_body,
    invoke_stream,
    iter_stream_text,
)
from gemmaserve.sagemaker.operations.runtime import invoke as invoke_endpoint
from gemmaserve.sagemaker.operations.status import (
    DEFAULT_THRESHOLDS,
    EndpointState,
    EndpointStatus,
    WatchThresholds,
    describe_endpoint_state,
    wait_for_endpoint,
)
from gemmaserve.sagemaker.operations.teardown import DeleteReport, Journal, delete_deployment
from gemmaserve.sagemaker.spec.inputs import tag_safe
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

Clock = Callable[[], datetime]


_now = utc_now


_DEFAULT_FACTORIES: dict[str | None, Boto3ClientFactory] = {}


def _factory(factory: ClientFactory | None) -> ClientFactory:
    """The caller's factory, or one per process (per endpoint override) so connections are reused, not leaked."""
    if factory is not None:
        return factory
    import os

    from gemmaserve.sagemaker.aws import ENDPOINT_URL_ENV

    key = os.environ.get(ENDPOINT_URL_ENV) or None
    if key not in _DEFAULT_FACTORIES:
        _DEFAULT_FACTORIES[key] = Boto3ClientFactory(endpoint_url=key)
    return _DEFAULT_FACTORIES[key]


class DeployOutcome(BaseModel):
    dry_run: bool
    plan: DeployPlan
    preflight: PreflightReport | None = None
    result: DeployResult | None = None
    attempts: list[RegionAttempt] = []


def preflight(
    request: PreflightRequest,
    *,
    check_model: ModelChecker | None = hub_reachability,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
) -> PreflightReport:
    """Every check of a deploy, each ok / warn / fail / unknown with its fix; AWS is read, nothing created."""
    regions = request.chosen_regions()
    deps = PreflightDeps(_factory(factory), check_model=check_model, progress=progress)
    return run_preflight(request, deps, regions=regions)


@dataclass(frozen=True)
class PreparedDeploy:
    """A deploy planned once: the capacity plan of each type, the spec, the first region's calls and $/hour.

    The CLI shows its price when it asks for confirmation, then hands it to :func:`deploy` unchanged.
    """

    request: DeployRequest
    regions: list[str]
    rows: dict[str, Any]
    spec: DeploySpec
    plan: DeployPlan
    price_lookup: PriceLookup


def prepare_deploy(
    request: DeployRequest, *, factory: ClientFactory | None = None, now: Clock = _now
) -> PreparedDeploy:
    """Plan the deploy (no AWS call unless live prices are read for a real deploy)."""
    from gemmaserve.catalog import resolve_instance
    from gemmaserve.sagemaker.deployment.endpoint import spec_for_plan
    from gemmaserve.sagemaker.spec.container import default_endpoint_name

    regions = request.chosen_regions()
    rows = request.plan_rows()
    first = request.instance[0]
    if first not in rows:
        resolve_instance(first)  # not in the catalog: its error names the types that are
    row = rows[first]
    clients = _factory(factory) if not request.dry_run else factory
    endpoint_name = request.endpoint_name or default_endpoint_name(row.model, row.gpu)
    spec = spec_for_plan(request, row, endpoint_name=endpoint_name, owner=default_owner(request.owner))
    price_lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    plan = plan_deploy(spec, region=regions[0], now=now(), price_lookup=price_lookup)
    return PreparedDeploy(request, regions, rows, spec, plan, price_lookup)


def deploy(
    request: DeployRequest,
    *,
    prepared: PreparedDeploy | None = None,
    check_model: ModelChecker | None = hub_reachability,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    now: Clock = _now,
    sleep: Callable[[float], None] | None = None,
) -> DeployOutcome:
    """Plan, preflight, then deploy in the first region with quota and capacity; wait for InService.

    ``request.dry_run`` makes no AWS call: it returns the planned calls and $/hour (catalog price) and
    the offline preflight. ``prepared`` is this request's plan from :func:`prepare_deploy`, if the caller
    already made it. Raises InterlockRefused when preflight finds a failure (or an unknown, unless
    ``accept_unknown``). ``cancel`` is checked before each region, each Create call and each poll of the
    wait; a cancelled deploy deletes what it created (as on Ctrl-C), then raises
    :class:`~gemmaserve.progress.Cancelled`.
    """
    progress = _uncounted(progress)
    if prepared is None or prepared.request != request:
        prepared = prepare_deploy(request, factory=factory, now=now)
    regions, spec, name = prepared.regions, prepared.spec, prepared.spec.endpoint_name
    if request.dry_run:
        offline = run_offline_preflight(request, regions=regions, rows=prepared.rows)
        return DeployOutcome(dry_run=True, plan=prepared.plan, preflight=offline)
    clients = _factory(factory)
    report = None
    if not request.skip_preflight:
        deps = PreflightDeps(clients, check_model=check_model, progress=progress)
        report = run_preflight(request, deps, regions=regions, rows=prepared.rows)
        _refuse_unless_preflight_passed(request, report, regions, what="Preflight")

    def waiter(region: str) -> EndpointState:
        return wait_for_endpoint(
            clients("sagemaker", region),
            clients("logs", region),
            name,
            region=region,
            timeout_s=request.timeout_s,
            thresholds=thresholds,
            now=now,
            sleep=sleep,
            progress=progress,
            cancel=cancel,
        )

    checker = quota_checker_for(clients, spec)

    def known_quota(region: str) -> list[QuotaCheck]:
        try:
            return checker(region)
        except Exception:
            return []

    outcome = deploy_across_regions(
        clients,
        spec,
        regions,
        now=now,
        wait=waiter if request.wait else None,
        quota_checker=known_quota,
        keep=request.keep,
        progress=progress,
        cancel=cancel,
        price_lookup=prepared.price_lookup,
        sleep=sleep,
    )
    return DeployOutcome(
        dry_run=False, plan=outcome.result.plan, preflight=report, result=outcome.result, attempts=outcome.attempts
    )


def _preflight_command(request: DeployRequest, regions: list[str]) -> str:
    """The preflight of exactly this deploy, as a command that works when followed."""
    import shlex

    words = ["gemmaserve", "sagemaker", "preflight", "--model", request.model, "--encoding", request.encoding]
    for instance in request.instance:
        words += ["--instance", instance]
    words += ["--regions", ",".join(regions)]
    if request.role_arn:
        words += ["--role-arn", request.role_arn]
    if request.image:
        words += ["--image", request.image]
    return shlex.join(words)


def _uncounted(progress: ProgressCallback | None) -> ProgressCallback | None:
    """A deploy's events without ``done``/``total``: they come in different units (seconds of a wait, of a
    teardown's wait) and only a running count increases across all of them, as MCP progress must."""
    if progress is None:
        return None
    forward = progress

    def uncounted(event: ProgressEvent) -> None:
        forward(replace(event, done=None, total=None))

    return uncounted


def _region_blocked(report: PreflightReport, region: str, accept_unknown: bool) -> bool:
    return any(f.where == region for f in report.failures(accept_unknown=accept_unknown))


def default_owner(given: str | None) -> str:
    """The owner tag deploy writes and cleanup looks for: the given one, else the user name made tag-safe."""
    return given or tag_safe(_user())


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def status(
    request: StatusRequest, *, live_prices: bool = False, factory: ClientFactory | None = None, now: Clock = _now
) -> EndpointState:
    """The endpoint's state with $/hour (the catalog's dated prices unless ``live_prices``)."""
    from gemmaserve.sagemaker.operations.status import with_prices

    region = request.chosen_region()
    clients = _factory(factory)
    state = describe_endpoint_state(clients("sagemaker", region), request.endpoint_name, region=region, now=now())
    if state.status is EndpointStatus.NOT_FOUND:
        return state
    return with_prices(state, make_price_lookup(clients if live_prices else None, today=date.today()))


def wait(
    request: WaitRequest,
    *,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    now: Clock = _now,
    sleep: Callable[[float], None] | None = None,
) -> EndpointState:
    """Wait for InService; fail early on what will not recover (see :mod:`.startup`).

    A cancel stops following (:class:`~gemmaserve.progress.Cancelled`); the endpoint is left as it is.
    """
    region = request.chosen_region()
    clients = _factory(factory)
    return wait_for_endpoint(
        clients("sagemaker", region),
        clients("logs", region),
        request.endpoint_name,
        region=region,
        timeout_s=request.timeout_s,
        poll_s=request.poll_s,
        thresholds=thresholds,
        now=now,
        sleep=sleep,
        progress=progress,
        cancel=cancel,
    )


def logs(request: LogsRequest, *, factory: ClientFactory | None = None, now: Clock = _now) -> EndpointLogs:
    """The endpoint's CloudWatch lines, filtered, with the engine facts parsed from them."""
    region = request.chosen_region()
    return read_endpoint_logs(
        _factory(factory)("logs", region),
        request.endpoint_name,
        region=region,
        now=now(),
        since_s=request.since_min * 60,
        contains=request.contains,
        pattern=request.grep,
        tail=request.tail,
    )


def invoke(
    request: InvokeRequest, *, body: dict[str, Any] | None = None, factory: ClientFactory | None = None
) -> InvokeResult:
    """One chat request, answered whole (``request.stream`` is for :func:`invoke_streaming`)."""
    region = request.chosen_region()
    payload = body or chat_body(request.prompt, max_tokens=request.max_tokens, temperature=request.temperature)
    return invoke_endpoint(
        _factory(factory)("sagemaker-runtime", region), request.endpoint_name, payload, region=region
    )


def invoke_streaming(
    request: InvokeRequest, *, body: dict[str, Any] | None = None, factory: ClientFactory | None = None
) -> Iterator[str]:
    """Text deltas as the endpoint streams them."""
    region = request.chosen_region()
    payload = body or chat_body(
        request.prompt, max_tokens=request.max_tokens, temperature=request.temperature, stream=True
    )
    parts = invoke_stream(_factory(factory)("sagemaker-runtime", region), request.endpoint_name, payload, region=region)
    return iter_stream_text(parts)


def delete(
    request: DeleteRequest,
    *,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
    now: Clock = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteReport:
    """Delete the endpoint, its config and model(s); refuses what gemmaserve did not create unless ``force``."""
    region = request.chosen_region()
    return delete_deployment(
        _factory(factory)("sagemaker", region),
        request.endpoint_name,
        region=region,
        busy_timeout_s=request.busy_timeout_s,
        dry_run=request.dry_run,
        force=request.force,
        now=now,
        sleep=sleep,
        progress=progress,
    )


def list_endpoints(
    request: ListRequest,
    *,
    orphans: bool = True,
    factory: ClientFactory | None = None,
    now: Clock = _now,
    progress: ProgressCallback | None = None,
) -> Inventory:
    """Our endpoints and (``orphans``) our unused models/configs; check ``complete`` before trusting an absence."""
    regions = request.chosen_regions()
    clients = _factory(factory)
    lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    inventory = list_deployments(clients, regions, now=now(), price_lookup=lookup, orphans=orphans, progress=progress)
    inventory.journal = [entry for entry in Journal().open_entries() if entry.region in regions]
    return inventory


def cleanup(request: CleanupRequest, *, factory: ClientFactory | None = None, now: Clock = _now) -> CleanupReport:
    """Delete our expired endpoints, (``orphans``) our unused models/configs and (``journal``) what runs that
    ended unsettled left in the deploy journal; ``complete`` says all was read, ``ok`` that all chosen is gone."""
    regions = request.chosen_regions()
    clients = _factory(factory)
    lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    report = cleanup_expired(
        clients,
        regions,
        now=now(),
        dry_run=request.dry_run,
        owner=None if request.any_owner else default_owner(request.owner),
        price_lookup=lookup,
        expired=request.expired,
        orphans=request.orphans,
    )
    if request.journal:
        settle_journal(clients, regions, journal=Journal(), dry_run=request.dry_run, report=report)
    return report


def autoscale(request: AutoscaleRequest, *, factory: ClientFactory | None = None) -> AutoscaleResult:
    """Register the endpoint's variant with Application Auto Scaling (target tracking); a dry run calls nothing."""
    from gemmaserve.sagemaker.operations.autoscale import configure_autoscaling

    region = request.chosen_region()
    aas = _factory(factory)("application-autoscaling", region) if not request.dry_run else None
    return configure_autoscaling(
        aas,
        request.endpoint_name,
        region=region,
        min_instances=request.min_instances,
        max_instances=request.max_instances,
        target_invocations_per_instance=request.target_invocations,
        scale_in_cooldown_s=request.scale_in_cooldown_s,
        scale_out_cooldown_s=request.scale_out_cooldown_s,
        dry_run=request.dry_run,
    )


def jumpstart(request: JumpstartRequest, *, factory: ClientFactory | None = None) -> JumpStartListing:
    """The public JumpStart hub's Gemma 4 entries and the instance types each supports."""
    from gemmaserve.sagemaker.image.jumpstart import list_gemma4_models

    region = request.chosen_region()
    return list_gemma4_models(_factory(factory)("sagemaker", region), region=region, name_filter=request.name_filter)


def image_render(request: ImageRenderRequest) -> ImageBuildPlan:
    """The Dockerfile and buildspec, offline (``account`` only names the target repository)."""
    from gemmaserve.sagemaker.image.codebuild import plan_image_build

    return plan_image_build(
        region=request.chosen_region(),
        account=request.account,
        base_image=request.base_image,
        requirement=request.requirement,
    )


def image_build(
    request: ImageBuildRequest,
    *,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    now: Clock = _now,
    sleep: Callable[[float], None] | None = None,
) -> ImageBuildResult:
    """The ECR repository, CodeBuild project and role (idempotent), then build, push and (``follow``) follow.

    A cancel before the build starts starts none; after, it only stops following (the build goes on).
    """
    from gemmaserve.sagemaker.image.codebuild import build_image

    return build_image(
        _factory(factory),
        region=request.chosen_region(),
        base_image=request.base_image,
        requirement=request.requirement,
        wheel_path=request.wheel,
        dry_run=request.dry_run,
        follow=request.follow,
        timeout_s=request.timeout_s,
        now=now,
        sleep=sleep,
        progress=progress,
        cancel=cancel,
    )


def create_execution_role(request: RoleCreateRequest, *, factory: ClientFactory | None = None) -> RoleResult:
    """The least-privilege execution role, usable in the chosen regions and those it already served.

    Pull of the pinned image (each region's) and any given ones, endpoint logs per region, the S3 prefix.
    """
    from gemmaserve.sagemaker.image.iam import ensure_execution_role
    from gemmaserve.sagemaker.spec.container import default_image_uri, image_for_region

    chosen = request.chosen_regions()
    region = chosen[0]
    clients = _factory(factory)
    images = (
        [image_for_region(uri, r) for uri in request.image for r in chosen]
        if request.image
        else [default_image_uri(r) for r in chosen]
    )
    return ensure_execution_role(
        clients("iam", region),
        clients("sts", region),
        region=region,
        regions=chosen,
        role_name=request.role_name,
        image_uris=list(dict.fromkeys(images)),
        s3_model_uri=request.model_s3,
        dry_run=request.dry_run,
    )


def update(
    request: UpdateRequest,
    *,
    check_model: ModelChecker | None = hub_reachability,
    factory: ClientFactory | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    now: Clock = _now,
    sleep: Callable[[float], None] | None = None,
) -> UpdateResult:
    """Blue/green update of a live endpoint (see :mod:`.update`): preflight first, then the planned calls.

    ``request.dry_run`` calls nothing: the calls, the policy, the gate and the $/hour while both fleets run.
    Raises InterlockRefused when preflight fails (nothing created), UpdateRolledBack when it went back.
    """
    from gemmaserve.sagemaker.deployment.update import (
        MAX_EXECUTION_S,
        MIN_EXECUTION_S,
        ShiftMode,
        UpdateDeps,
        UpdateOutcome,
        UpdatePolicy,
        execute_update,
        measure_gate,
        plan_update,
    )

    deploy_like = DeployRequest.model_validate(
        request.model_dump(
            exclude={"canary", "linear", "all_at_once", "bake_min", "termination_wait_min", "max_slowdown", "gate"}
        )
    )
    prepared = prepare_deploy(deploy_like, factory=factory, now=now)
    mode, percent = request.policy_mode()
    policy = UpdatePolicy(
        mode=ShiftMode(mode),
        percent=percent,
        bake_s=round(request.bake_min * 60),
        termination_wait_s=round(request.termination_wait_min * 60),
        max_execution_s=min(max(round(request.timeout_s), MIN_EXECUTION_S), MAX_EXECUTION_S),
        max_slowdown=request.max_slowdown / 100,
    )
    region = prepared.regions[0]
    plan = plan_update(prepared.spec, policy, region=region, now=now(), price_lookup=prepared.price_lookup)
    if request.dry_run:
        return UpdateResult(
            dry_run=True,
            plan=plan,
            outcome=UpdateOutcome.PLANNED,
            extra_usd_per_hour=plan.usd_per_hour,
        )
    clients = _factory(factory)
    if not request.skip_preflight:
        checks = PreflightDeps(clients, check_model=check_model, progress=progress)
        report = run_preflight(deploy_like, checks, regions=prepared.regions[:1], rows=prepared.rows)
        _refuse_unless_preflight_passed(deploy_like, report, prepared.regions[:1], what="Preflight of the new variant")
    old_price = _old_price(clients, request.endpoint_name, region, prepared.price_lookup, now)
    runtime = clients("sagemaker-runtime", region)
    deps = UpdateDeps(
        clients=clients,
        gate=measure_gate(runtime, plan, cancel=cancel) if request.gate else None,
        now=now,
        sleep=sleep or time.sleep,
        progress=_uncounted(progress),
        cancel=cancel,
        timeout_s=request.timeout_s,
    )
    result = execute_update(plan, deps)
    result.old_usd_per_hour = old_price
    result.extra_usd_per_hour = plan.usd_per_hour
    return result


def _refuse_unless_preflight_passed(
    request: DeployRequest, report: PreflightReport, regions: list[str], *, what: str
) -> None:
    """The deploy's interlock: any failure (or unknown, unless accepted) in every region creates nothing."""
    accept_unknown = request.accept_unknown
    # A finding with no ``where`` is about every region; one naming a region only rules that one out.
    region_blind = [f for f in report.failures(accept_unknown=accept_unknown) if f.where is None]
    if not region_blind and not all(_region_blocked(report, region, accept_unknown) for region in regions):
        return
    failures = report.failures(accept_unknown=accept_unknown)
    hint = " ".join(f.fix for f in failures if f.fix) or "See each check: " + _preflight_command(request, regions)
    unchecked = [f.check for f in failures if f.status is Status.UNKNOWN]
    if unchecked:
        hint += (
            f" {', '.join(unchecked)} could not be checked; once you have checked "
            f"{'it' if len(unchecked) == 1 else 'them'} yourself, a person may deploy with --accept-unknown."
        )
    raise InterlockRefused(
        f"{what} found problems; nothing was created: " + "; ".join(f"{f.check}: {f.detail}" for f in failures),
        hint=hint,
        reasons=[f.model_dump(mode="json") for f in failures],
    )


def _old_price(clients: ClientFactory, name: str, region: str, lookup: PriceLookup, now: Clock) -> float | None:
    from gemmaserve.sagemaker.operations.status import with_prices

    state = describe_endpoint_state(clients("sagemaker", region), name, region=region, now=now())
    return with_prices(state, lookup).usd_per_hour
