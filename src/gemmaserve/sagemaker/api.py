"""The SageMaker library API the CLI and the MCP server both call: a session, an endpoint handle, the actions.

A :class:`SageMakerSession` holds the seams every action shares (as an ``httpx.Client`` does): the boto3
client factory (tests pass moto's), the clock, a test's scripted sleep, the progress callback
(:class:`~gemmaserve.progress.ProgressEvent` values: stderr in the CLI, MCP progress), the cancel token,
how a model id is checked and the wait's thresholds. Each action takes its request model
(:mod:`gemmaserve.sagemaker.spec.requests`: the inputs, already checked) and a session; ``None`` is a
session of defaults. ``session.endpoint(name)`` is a handle on one endpoint (status, wait, logs, invoke,
delete, autoscale), as huggingface_hub's ``InferenceEndpoint`` is. A cancelled deploy deletes what it
created, as on Ctrl-C; a cancelled wait or image build only stops following. None prints. Region lists
are tried in order where an action can fall back.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, TypeVar

from pydantic import Field

from gemmaserve.cost import PriceLookup
from gemmaserve.errors import InterlockRefused, UsageError
from gemmaserve.findings import Status
from gemmaserve.progress import ProgressCallback, ProgressEvent
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import (
    Deps,
    QuotaCheck,
    default_region,
    make_price_lookup,
)
from gemmaserve.sagemaker.deployment.endpoint import (
    DeployPlan,
    DeployResult,
    DeploySpec,
    RegionAttempt,
    RegionTries,
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

_R = TypeVar("_R", bound=StatusRequest)


@dataclass(frozen=True)
class SageMakerSession(Deps):
    """The seams of :class:`~gemmaserve.sagemaker.aws.Deps` and two of the deploy's own.

    ``check_model`` is how preflight checks a model id on the Hub (None: not checked, a test's choice);
    ``thresholds`` are the wait's early-failure limits. Derive a session with ``session.but(progress=…)``.
    """

    check_model: ModelChecker | None = hub_reachability
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS

    def endpoint(self, name: str, *, region: str | None = None) -> Endpoint:
        """A handle on endpoint ``name`` in ``region`` (None: the AWS environment's region, else us-east-1)."""
        return Endpoint(self, name, default_region(region))

    def endpoint_for(self, request: StatusRequest) -> Endpoint:
        """The handle a request about one endpoint names (any of the endpoint requests: they share these fields)."""
        return Endpoint(self, request.endpoint_name, request.chosen_region())


class Endpoint:
    """One SageMaker endpoint, by name and region: its status, the wait, its logs, invoke, delete, autoscale.

    Each method returns the typed result the matching command prints; a method taking a request reads its
    options (the endpoint's name must be this one's).
    """

    def __init__(self, session: SageMakerSession, name: str, region: str) -> None:
        self.session = session
        self.name = name
        self.region = region

    def __repr__(self) -> str:
        return f"Endpoint({self.name!r}, region={self.region!r})"

    def status(self, *, live_prices: bool = False) -> EndpointState:
        """The endpoint's state with $/hour (the catalog's dated prices unless ``live_prices``)."""
        from gemmaserve.sagemaker.operations.status import with_prices

        clients = self.session.clients
        sm = clients("sagemaker", self.region)
        state = describe_endpoint_state(sm, self.name, region=self.region, now=self.session.now())
        if state.status is EndpointStatus.NOT_FOUND:
            return state
        return with_prices(state, make_price_lookup(clients if live_prices else None, today=date.today()))

    def wait(self, request: WaitRequest | None = None) -> EndpointState:
        """Wait for InService; fail early on what will not recover (see :mod:`.operations.status`).

        A cancel stops following (:class:`~gemmaserve.progress.Cancelled`); the endpoint is left as it is.
        """
        request = self._own(request or WaitRequest(endpoint_name=self.name, region=self.region))
        clients = self.session.clients
        sm, logs = clients("sagemaker", self.region), clients("logs", self.region)
        return wait_for_endpoint(sm, logs, request, self.session, self.session.thresholds)

    def logs(self, request: LogsRequest | None = None) -> EndpointLogs:
        """The endpoint's CloudWatch lines, filtered, with the engine facts parsed from them."""
        request = self._own(request or LogsRequest(endpoint_name=self.name, region=self.region))
        return read_endpoint_logs(self.session.clients("logs", self.region), request, now=self.session.now())

    def invoke(self, request: InvokeRequest, *, body: dict[str, Any] | None = None) -> InvokeResult:
        """One chat request, answered whole (``request.stream`` is for :meth:`stream`)."""
        request = self._own(request)
        payload = body or chat_body(request.prompt, max_tokens=request.max_tokens, temperature=request.temperature)
        runtime = self.session.clients("sagemaker-runtime", self.region)
        return invoke_endpoint(runtime, self.name, payload, region=self.region)

    def stream(self, request: InvokeRequest, *, body: dict[str, Any] | None = None) -> Iterator[str]:
        """Text deltas as the endpoint streams them."""
        request = self._own(request)
        payload = body or chat_body(
            request.prompt, max_tokens=request.max_tokens, temperature=request.temperature, stream=True
        )
        runtime = self.session.clients("sagemaker-runtime", self.region)
        return iter_stream_text(invoke_stream(runtime, self.name, payload, region=self.region))

    def delete(self, request: DeleteRequest | None = None) -> DeleteReport:
        """Delete the endpoint, its config and model(s); refuses what gemmaserve did not create unless ``force``."""
        request = self._own(request or DeleteRequest(endpoint_name=self.name, region=self.region))
        session = self.session
        return delete_deployment(session.clients("sagemaker", self.region), request, session)

    def autoscale(self, request: AutoscaleRequest) -> AutoscaleResult:
        """Register the variant with Application Auto Scaling (target tracking); a dry run calls nothing."""
        from gemmaserve.sagemaker.operations.autoscale import configure_autoscaling

        request = self._own(request)
        aas = self.session.clients("application-autoscaling", self.region) if not request.dry_run else None
        return configure_autoscaling(aas, request)

    def _own(self, request: _R) -> _R:
        if request.endpoint_name != self.name or request.chosen_region() != self.region:
            raise UsageError(
                f"A request about {request.endpoint_name!r} in {request.chosen_region()} was given to the handle "
                f"of {self.name!r} in {self.region}.",
                hint="Take the handle from session.endpoint_for(request).",
            )
        return request


def _session(session: SageMakerSession | None) -> SageMakerSession:
    return session if session is not None else SageMakerSession()


class DeployOutcome(ActionResult):
    dry_run: bool
    plan: DeployPlan
    preflight: PreflightReport | None = None
    result: DeployResult | None = None
    attempts: list[RegionAttempt] = Field(default_factory=list)

    def succeeded(self) -> bool:
        """Not ok: a dry run whose offline preflight failed (the deploy itself would be refused)."""
        return not (self.dry_run and self.preflight is not None and self.preflight.failures(accept_unknown=True))


def preflight(request: PreflightRequest, session: SageMakerSession | None = None) -> PreflightReport:
    """Every check of a deploy, each ok / warn / fail / unknown with its fix; AWS is read, nothing created."""
    session = _session(session)
    return run_preflight(request, _preflight_deps(session), regions=request.chosen_regions())


def _preflight_deps(session: SageMakerSession) -> PreflightDeps:
    return PreflightDeps(session.clients, check_model=session.check_model, progress=session.progress)


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


def prepare_deploy(request: DeployRequest, session: SageMakerSession | None = None) -> PreparedDeploy:
    """Plan the deploy (no AWS call unless live prices are read for a real deploy)."""
    from gemmaserve.catalog import resolve_instance
    from gemmaserve.sagemaker.deployment.endpoint import spec_for_plan
    from gemmaserve.sagemaker.spec.container import default_endpoint_name

    session = _session(session)
    regions = request.chosen_regions()
    rows = request.plan_rows()
    first = request.instance[0]
    if first not in rows:
        resolve_instance(first)  # not in the catalog: its error names the types that are
    row = rows[first]
    clients = session.clients if not request.dry_run else session.factory
    endpoint_name = request.endpoint_name or default_endpoint_name(row.model, row.gpu)
    spec = spec_for_plan(request, row, endpoint_name=endpoint_name, owner=default_owner(request.owner))
    price_lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    plan = plan_deploy(spec, region=regions[0], now=session.now(), price_lookup=price_lookup)
    return PreparedDeploy(request, regions, rows, spec, plan, price_lookup)


def deploy(
    request: DeployRequest, session: SageMakerSession | None = None, *, prepared: PreparedDeploy | None = None
) -> DeployOutcome:
    """Plan, preflight, then deploy in the first region with quota and capacity; wait for InService.

    ``request.dry_run`` makes no AWS call: it returns the planned calls and $/hour (catalog price) and
    the offline preflight. ``prepared`` is this request's plan from :func:`prepare_deploy`, if the caller
    already made it. Raises InterlockRefused when preflight finds a failure (or an unknown, unless
    ``accept_unknown``). The session's cancel token is checked before each region, each Create call and
    each poll of the wait; a cancelled deploy deletes what it created (as on Ctrl-C), then raises
    :class:`~gemmaserve.progress.Cancelled`.
    """
    session = _session(session)
    session = session.but(progress=_uncounted(session.progress))
    if prepared is None or prepared.request != request:
        prepared = prepare_deploy(request, session)
    regions, spec = prepared.regions, prepared.spec
    if request.dry_run:
        offline = run_offline_preflight(request, regions=regions, rows=prepared.rows)
        return DeployOutcome(dry_run=True, plan=prepared.plan, preflight=offline)
    clients = session.clients
    report = None
    if not request.skip_preflight:
        report = run_preflight(request, _preflight_deps(session), regions=regions, rows=prepared.rows)
        _refuse_unless_preflight_passed(request, report, regions, what="Preflight")

    def waiter(region: str) -> EndpointState:
        wait = WaitRequest(endpoint_name=spec.endpoint_name, region=region, timeout_s=request.timeout_s)
        return Endpoint(session, spec.endpoint_name, region).wait(wait)

    checker = quota_checker_for(clients, spec)

    def known_quota(region: str) -> list[QuotaCheck]:
        try:
            return checker(region)
        except Exception:
            return []

    tries = RegionTries(
        wait=waiter if request.wait else None,
        quota_checker=known_quota,
        keep=request.keep,
        price_lookup=prepared.price_lookup,
    )
    outcome = deploy_across_regions(spec, regions, session, tries)
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
    request: StatusRequest, session: SageMakerSession | None = None, *, live_prices: bool = False
) -> EndpointState:
    """The endpoint's state with $/hour (:meth:`Endpoint.status`)."""
    return _session(session).endpoint_for(request).status(live_prices=live_prices)


def wait(request: WaitRequest, session: SageMakerSession | None = None) -> EndpointState:
    """Wait for InService (:meth:`Endpoint.wait`)."""
    return _session(session).endpoint_for(request).wait(request)


def logs(request: LogsRequest, session: SageMakerSession | None = None) -> EndpointLogs:
    """The endpoint's CloudWatch lines (:meth:`Endpoint.logs`)."""
    return _session(session).endpoint_for(request).logs(request)


def invoke(
    request: InvokeRequest, session: SageMakerSession | None = None, *, body: dict[str, Any] | None = None
) -> InvokeResult:
    """One chat request, answered whole (:meth:`Endpoint.invoke`)."""
    return _session(session).endpoint_for(request).invoke(request, body=body)


def invoke_streaming(
    request: InvokeRequest, session: SageMakerSession | None = None, *, body: dict[str, Any] | None = None
) -> Iterator[str]:
    """Text deltas as the endpoint streams them (:meth:`Endpoint.stream`)."""
    return _session(session).endpoint_for(request).stream(request, body=body)


def delete(request: DeleteRequest, session: SageMakerSession | None = None) -> DeleteReport:
    """Delete the endpoint, its config and model(s) (:meth:`Endpoint.delete`)."""
    return _session(session).endpoint_for(request).delete(request)


def autoscale(request: AutoscaleRequest, session: SageMakerSession | None = None) -> AutoscaleResult:
    """Target-tracking autoscaling for the endpoint's variant (:meth:`Endpoint.autoscale`)."""
    return _session(session).endpoint_for(request).autoscale(request)


def list_endpoints(request: ListRequest, session: SageMakerSession | None = None, *, orphans: bool = True) -> Inventory:
    """Our endpoints and (``orphans``) our unused models/configs; check ``complete`` before trusting an absence."""
    session = _session(session)
    regions = request.chosen_regions()
    clients = session.clients
    lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    inventory = list_deployments(regions, session, price_lookup=lookup, orphans=orphans)
    inventory.journal = [entry for entry in Journal().open_entries() if entry.region in regions]
    return inventory


def cleanup(request: CleanupRequest, session: SageMakerSession | None = None) -> CleanupReport:
    """Delete our expired endpoints, (``orphans``) our unused models/configs and (``journal``) what runs that
    ended unsettled left in the deploy journal; ``complete`` says all was read, ``ok`` that all chosen is gone."""
    session = _session(session)
    regions = request.chosen_regions()
    clients = session.clients
    lookup = make_price_lookup(None if request.list_prices else clients, today=date.today())
    owner = None if request.any_owner else default_owner(request.owner)
    report = cleanup_expired(request, session, owner=owner, price_lookup=lookup)
    if request.journal:
        settle_journal(clients, regions, journal=Journal(), dry_run=request.dry_run, report=report)
    return report


def jumpstart(request: JumpstartRequest, session: SageMakerSession | None = None) -> JumpStartListing:
    """The public JumpStart hub's Gemma 4 entries and the instance types each supports."""
    from gemmaserve.sagemaker.image.jumpstart import list_gemma4_models

    region = request.chosen_region()
    sm = _session(session).clients("sagemaker", region)
    return list_gemma4_models(sm, region=region, name_filter=request.name_filter)


def image_render(request: ImageRenderRequest) -> ImageBuildPlan:
    """The Dockerfile and buildspec, offline (``account`` only names the target repository)."""
    from gemmaserve.sagemaker.image.codebuild import BuildInputs, plan_image_build

    inputs = BuildInputs(request.chosen_region(), request.account, request.base_image, request.requirement)
    return plan_image_build(inputs)


def image_build(request: ImageBuildRequest, session: SageMakerSession | None = None) -> ImageBuildResult:
    """The ECR repository, CodeBuild project and role (idempotent), then build, push and (``follow``) follow.

    A cancel before the build starts starts none; after, it only stops following (the build goes on).
    """
    from gemmaserve.sagemaker.image.codebuild import build_image

    return build_image(request, _session(session))


def create_execution_role(request: RoleCreateRequest, session: SageMakerSession | None = None) -> RoleResult:
    """The least-privilege execution role, usable in the chosen regions and those it already served.

    Pull of the pinned image (each region's) and any given ones, endpoint logs per region, the S3 prefix.
    """
    from gemmaserve.sagemaker.image.iam import ensure_execution_role

    region = request.chosen_regions()[0]
    clients = _session(session).clients
    return ensure_execution_role(clients("iam", region), clients("sts", region), request)


def update(request: UpdateRequest, session: SageMakerSession | None = None) -> UpdateResult:
    """Blue/green update of a live endpoint (see :mod:`.deployment.update`): preflight first, then the planned calls.

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

    session = _session(session)
    deploy_like = DeployRequest.model_validate(
        request.model_dump(
            exclude={"canary", "linear", "all_at_once", "bake_min", "termination_wait_min", "max_slowdown", "gate"}
        )
    )
    prepared = prepare_deploy(deploy_like, session)
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
    plan = plan_update(prepared.spec, policy, region=region, now=session.now(), price_lookup=prepared.price_lookup)
    if request.dry_run:
        return UpdateResult(
            dry_run=True,
            plan=plan,
            outcome=UpdateOutcome.PLANNED,
            extra_usd_per_hour=plan.usd_per_hour,
        )
    clients = session.clients
    if not request.skip_preflight:
        report = run_preflight(deploy_like, _preflight_deps(session), regions=prepared.regions[:1], rows=prepared.rows)
        _refuse_unless_preflight_passed(deploy_like, report, prepared.regions[:1], what="Preflight of the new variant")
    old_price = _old_price(session, request.endpoint_name, region, prepared.price_lookup)
    runtime = clients("sagemaker-runtime", region)
    deps = UpdateDeps(
        factory=clients,
        clock=session.clock,
        sleep=session.sleep,
        progress=_uncounted(session.progress),
        cancel=session.cancel,
        gate=measure_gate(runtime, plan, cancel=session.cancel) if request.gate else None,
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


def _old_price(session: SageMakerSession, name: str, region: str, lookup: PriceLookup) -> float | None:
    from gemmaserve.sagemaker.operations.status import with_prices

    state = describe_endpoint_state(session.clients("sagemaker", region), name, region=region, now=session.now())
    return with_prices(state, lookup).usd_per_hour
