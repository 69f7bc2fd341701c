"""Deploy: Model → EndpointConfig → Endpoint, planned first (pure), then created with teardown on interrupt.

``plan_deploy`` turns a :class:`DeploySpec` into the exact API calls, the ``vllm serve``
flags the container will derive, and $/hour — that is what ``--dry-run`` prints.
``execute_deploy`` makes the calls; a Ctrl-C, a cancellation (:class:`~gemmaserve.progress.Cancelled`)
or any exception before the endpoint is InService deletes what this run created, unless ``keep``.
Following the endpoint into service is :func:`~gemmaserve.sagemaker.operations.status.wait_for_endpoint`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel, Field, field_serializer, field_validator

from gemmaserve.cost import PriceLookup, PriceQuote, PriceRange, catalog_price, price_range
from gemmaserve.errors import (
    AwsError,
    CapacityUnavailable,
    DeployInterrupted,
    GemmaserveError,
    QuotaExceeded,
    UsageError,
)
from gemmaserve.progress import (
    Cancelled,
    ProgressCallback,
    ProgressEvent,
    check,
    report,
)
from gemmaserve.sagemaker.aws import ClientFactory, Deps, QuotaCheck, call
from gemmaserve.sagemaker.operations.status import (
    EndpointState,
    EndpointStatus,
    describe_endpoint_state,
)
from gemmaserve.sagemaker.operations.teardown import (
    DeleteReport,
    EntryState,
    Journal,
    Removal,
    TeardownAbandoned,
    arn_of,
    delete_resources,
    shielded_teardown,
    signal_name,
    stop_signals_interrupt,
)
from gemmaserve.sagemaker.spec.container import (
    CREATED_KEY,
    DEFAULT_AMI,
    OWNER_KEY,
    VARIANT_NAME,
    build_tags,
    config_name_for,
    env_to_serve_args,
    environment_for_plan,
    image_for_region,
    mask_call_params,
    mask_serve_args,
    model_name_for,
    scrub,
    secret_values,
    tags_to_dict,
    validate_endpoint_name,
    validate_environment,
)
from gemmaserve.sagemaker.spec.inputs import validate_environment_limits

if TYPE_CHECKING:
    from gemmaserve.plan import PlanRow
    from gemmaserve.sagemaker.spec.requests import DeployRequest

MAX_POOL_TYPES = 5
MAX_TIMEOUT_S = 3600
# A Create whose answer never came may still take effect: the service acts on a request it received even
# when the client stopped waiting. The client waits up to its read timeout (70 s, aws.py) for an answer, so a
# request the service had not acted on by then would have timed out for a waiting client too; after the
# interrupt the teardown looks for the resource by name for that long plus a margin before it says "not seen".
IN_FLIGHT_WINDOW_S = 90.0
IN_FLIGHT_POLL_S = 5.0


class DeploySpec(BaseModel):
    """Everything a deploy needs; region-independent (the image may carry ``{region}``)."""

    endpoint_name: str
    instance_types: list[str] = Field(min_length=1, max_length=MAX_POOL_TYPES)  # priority order, same GPU
    instance_count: int = Field(default=1, ge=1)
    image_uri: str | None = None  # None: the pinned AWS vLLM image of the region
    role_arn: str
    environment: dict[str, str]
    model_label: str | None = None
    inference_ami_version: str | None = DEFAULT_AMI
    startup_health_check_timeout_s: int = Field(default=1800, ge=60, le=MAX_TIMEOUT_S)
    model_download_timeout_s: int = Field(default=1800, ge=60, le=MAX_TIMEOUT_S)
    owner: str = "unknown"
    ttl_s: float | None = 4 * 3600.0  # None: keep (no expiry)
    extra_tags: dict[str, str] = {}

    @field_validator("endpoint_name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return validate_endpoint_name(value)


def spec_for_plan(request: DeployRequest, row: PlanRow, *, endpoint_name: str, owner: str) -> DeploySpec:
    """The DeploySpec of ``request`` on its plan ``row``: the container environment from the row's flags
    (:func:`environment_for_plan`, with the split over the instance's GPUs), the rest from the request."""
    return DeploySpec(
        endpoint_name=endpoint_name,
        instance_types=request.instance,
        image_uri=request.image,
        role_arn=request.execution_role(),
        environment=environment_for_plan(row, vllm_overrides=request.vllm_arg, extra_env=request.environment()),
        model_label=f"{row.model}/{row.encoding}",
        inference_ami_version=request.ami,
        startup_health_check_timeout_s=request.startup_timeout_s,
        model_download_timeout_s=request.download_timeout_s,
        owner=owner,
        ttl_s=request.ttl_s(),
    )


class PlannedCall(BaseModel):
    """One AWS request. ``params`` hold the real values; every dump of it (JSON, MCP) masks secrets."""

    service: str
    operation: str
    params: dict[str, Any]

    @field_serializer("params")
    def _masked_params(self, params: dict[str, Any]) -> dict[str, Any]:
        return mask_call_params(params)

    def masked(self) -> PlannedCall:
        return PlannedCall(service=self.service, operation=self.operation, params=mask_call_params(self.params))


class DeployPlan(BaseModel):
    endpoint_name: str
    region: str
    model_name: str
    config_name: str
    image_uri: str
    instance_types: list[str]
    serve_args: list[str]  # what the container will run: vllm serve <serve_args>
    calls: list[PlannedCall]
    price: PriceQuote | None  # of the first (preferred) type
    usd_per_hour: float | None
    price_range: PriceRange | None = None  # an InstancePools endpoint bills at the type SageMaker places

    @field_serializer("serve_args")
    def _masked_args(self, args: list[str]) -> list[str]:
        return mask_serve_args(args)

    def masked_calls(self) -> list[PlannedCall]:
        return [planned.masked() for planned in self.calls]

    def masked_serve_args(self) -> list[str]:
        return mask_serve_args(self.serve_args)


class DeployResult(BaseModel):
    plan: DeployPlan
    created: list[str]
    state: EndpointState | None
    kept_on_failure: bool = False


def plan_deploy(
    spec: DeploySpec, *, region: str, now: datetime, price_lookup: PriceLookup = catalog_price
) -> DeployPlan:
    """The calls a deploy will make in ``region`` (no AWS call; ``price_lookup`` may read the catalog)."""
    validate_environment(spec.environment)
    validate_environment_limits(spec.environment)
    if len(set(spec.instance_types)) != len(spec.instance_types):
        raise UsageError(f"Instance types repeat: {spec.instance_types}", hint="List each type once.")
    name = spec.endpoint_name
    model_name, config_name = model_name_for(name), config_name_for(name)
    image = image_for_region(spec.image_uri, region)
    tags = build_tags(owner=spec.owner, now=now, ttl_s=spec.ttl_s, model=spec.model_label, extra=spec.extra_tags)
    variant: dict[str, Any] = {
        "VariantName": VARIANT_NAME,
        "ModelName": model_name,
        "InitialInstanceCount": spec.instance_count,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_health_check_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": spec.model_download_timeout_s,
    }
    if len(spec.instance_types) == 1:
        variant["InstanceType"] = spec.instance_types[0]
    else:
        # InstancePools: SageMaker places the first type with capacity, in priority order (1 = first).
        variant["InstancePools"] = [
            {"InstanceType": instance_type, "Priority": priority}
            for priority, instance_type in enumerate(spec.instance_types, start=1)
        ]
    if spec.inference_ami_version:
        variant["InferenceAmiVersion"] = spec.inference_ami_version
    calls = [
        PlannedCall(
            service="sagemaker",
            operation="CreateModel",
            params={
                "ModelName": model_name,
                "ExecutionRoleArn": spec.role_arn,
                "PrimaryContainer": {"Image": image, "Environment": dict(spec.environment)},
                "Tags": tags,
            },
        ),
        PlannedCall(
            service="sagemaker",
            operation="CreateEndpointConfig",
            params={
                "EndpointConfigName": config_name,
                "ProductionVariants": [variant],
                "Tags": tags,
            },
        ),
        PlannedCall(
            service="sagemaker",
            operation="CreateEndpoint",
            params={
                "EndpointName": name,
                "EndpointConfigName": config_name,
                "Tags": tags,
            },
        ),
    ]
    price = price_lookup(spec.instance_types[0], region)
    pool = (
        price_range(spec.instance_types, region, price_lookup, spec.instance_count)
        if len(spec.instance_types) > 1
        else None
    )
    return DeployPlan(
        endpoint_name=name,
        region=region,
        model_name=model_name,
        config_name=config_name,
        image_uri=image,
        instance_types=list(spec.instance_types),
        serve_args=env_to_serve_args(spec.environment),
        calls=calls,
        price=price,
        usd_per_hour=price.usd_per_hour * spec.instance_count if price else None,
        price_range=pool,
    )


@dataclass
class _Run:
    """One deploy's calls in one region: what was sent, what was made, and what a failure does with them."""

    sm: Any
    plan: DeployPlan
    keep: bool
    teardown_timeout_s: float
    attempted: list[str] = field(default_factory=list)  # created, or in flight when the run stopped
    created: list[str] = field(default_factory=list)
    settle: Callable[[DeleteReport], None] | None = None


def execute_deploy(
    sm: Any,
    plan: DeployPlan,
    deps: Deps | None = None,
    *,
    keep: bool = False,
    wait: Callable[[], EndpointState] | None = None,
    teardown_timeout_s: float = 1800.0,
) -> DeployResult:
    """Make the planned calls; on any exception, Ctrl-C, SIGTERM, SIGHUP or cancellation tear down what this
    run made (unless ``keep``).

    ``deps.cancel`` is checked before each Create call (``wait`` checks it while it polls). A resource whose
    Create call was in flight when the run stopped may exist (the request can reach the service before
    the interrupt lands), so it is deleted by name too; a Create the service refused is not ours and is
    left alone. Interrupts end as :class:`DeployInterrupted` carrying the teardown report; a cancellation
    as :class:`Cancelled` whose message says what the teardown did; other errors keep their type and carry
    the report in ``fields["teardown"]``. The teardown itself is never cut short by ``cancel``.
    """
    deps = deps or Deps()
    region, cancel, progress = plan.region, deps.cancel, deps.progress
    _refuse_existing(sm, plan, deps.now)
    run = _Run(sm, plan, keep=keep, teardown_timeout_s=teardown_timeout_s)
    created, attempted = run.created, run.attempted
    methods = {
        "CreateModel": sm.create_model,
        "CreateEndpointConfig": sm.create_endpoint_config,
        "CreateEndpoint": sm.create_endpoint,
    }
    journal = Journal()
    written: dict[str, str] = {}  # label → journal entry, written before its Create is sent

    def settle(outcome: DeleteReport) -> None:
        """Mark each journal entry with what the teardown (or --keep) did to its resource."""
        for label, entry in written.items():
            key = f"{label}:{_name_of(plan, label)}"
            if keep and key in outcome.remaining:  # kept on purpose: the user's now
                state = EntryState.DONE
            elif key in outcome.deleted:
                state = EntryState.DELETED
            elif key in outcome.remaining:
                state = EntryState.LEFT
            elif key in outcome.unconfirmed:
                state = EntryState.UNCONFIRMED
            else:  # absent, or not this run's (a refused Create, another's resource): nothing of ours there
                state = EntryState.ABSENT
            journal.mark(entry, state)

    try:
        with stop_signals_interrupt():
            for planned in plan.calls:
                check(cancel)
                label = RESOURCE_LABELS[planned.operation]
                tags = tags_to_dict(planned.params.get("Tags", []))
                written[label] = journal.sending(
                    region=region,
                    kind=label,
                    name=_name_of(plan, label),
                    owner=tags.get(OWNER_KEY),
                    created_tag=tags.get(CREATED_KEY),
                )
                attempted.append(label)
                try:
                    call(region, methods[planned.operation], **planned.params)
                except AwsError as error:
                    if not _may_have_created(error):  # the service answered no: nothing was created
                        attempted.remove(label)
                    hidden = secret_values(planned.params.get("PrimaryContainer", {}).get("Environment", {}))
                    error.message = scrub(error.message, hidden)
                    error.args = (error.message,)
                    raise
                created.append(label)
                report(progress, ProgressEvent("create", f"Created {label} for {plan.endpoint_name} in {region}"))
            state = wait() if wait is not None else None
            # A cancel that arrived while the last status read was in flight: the caller no longer takes the
            # endpoint (an MCP session that closed cannot), so it is torn down like any other cancellation.
            check(cancel)
    except BaseException as exc:
        run.settle = settle
        _after_failure(run, exc, deps)
    for entry in written.values():
        journal.mark(entry, EntryState.DONE)
    journal.prune()
    return DeployResult(plan=plan, created=created, state=state)


RESOURCE_LABELS = {"CreateModel": "model", "CreateEndpointConfig": "endpoint-config", "CreateEndpoint": "endpoint"}


def _may_have_created(error: AwsError) -> bool:
    """Whether a failed Create call may still have created its resource.

    No error code: the answer never came (connection dropped, read timeout). A 5xx: the
    service failed midway. "already exists": botocore retried a call whose first attempt
    succeeded (the name was free just before). Any other code is a refusal.
    """
    code = str(error.fields.get("aws_error_code") or "")
    if not code:
        return True
    if code in ("InternalFailure", "InternalServerError", "ServiceUnavailable", "InternalError") or code.startswith(
        "5"
    ):
        return True
    return "already exist" in error.message.lower()


def _refuse_existing(sm: Any, plan: DeployPlan, now: Callable[[], datetime]) -> None:
    """Refuse before creating anything when the endpoint or its derived model/config names are taken."""
    region = plan.region
    existing = describe_endpoint_state(sm, plan.endpoint_name, region=region, now=now())
    delete_hint = f"gemmaserve sagemaker delete {plan.endpoint_name} --region {region}"
    if existing.status is not EndpointStatus.NOT_FOUND:
        raise UsageError(
            f"Endpoint {plan.endpoint_name!r} already exists in {region} ({existing.status.value}).",
            hint=f"Delete it first ({delete_hint}) or pick another --name.",
            endpoint_name=plan.endpoint_name,
            region=region,
        )
    leftovers = [
        label
        for label, exists in (
            (f"model:{plan.model_name}", resource_exists(sm, region, "model", plan.model_name)),
            (f"endpoint-config:{plan.config_name}", resource_exists(sm, region, "endpoint-config", plan.config_name)),
        )
        if exists
    ]
    if leftovers:
        raise UsageError(
            f"{', '.join(leftovers)} already exist in {region} with no endpoint {plan.endpoint_name!r}: "
            "the debris of an earlier deploy of this name blocks this one.",
            hint=f"See them with: gemmaserve sagemaker list --region {region}; remove them with: {delete_hint} "
            "(add --force if gemmaserve did not create them), or pick another --name.",
            endpoint_name=plan.endpoint_name,
            region=region,
            leftovers=leftovers,
        )


def resource_exists(sm: Any, region: str, kind: str, name: str) -> bool:
    """Whether a model / endpoint-config / endpoint of this name exists (a Describe call; not-found is False)."""
    return arn_of(sm, region, kind, name) is not None


def _after_failure(run: _Run, exc: BaseException, deps: Deps) -> NoReturn:
    """Tear down (or keep) what this run made, say exactly what is left and where, then raise.

    A cancellation is cleaned up exactly as Ctrl-C is; it then propagates as :class:`Cancelled`.
    """
    plan, attempted, keep, settle = run.plan, run.attempted, run.keep, run.settle
    region = plan.region
    say = _teller(deps.progress)
    interrupted = isinstance(exc, KeyboardInterrupt)
    cancelled = isinstance(exc, Cancelled)
    if interrupted:
        cause = f"{signal_name(exc)} received"
    elif cancelled:
        cause = "cancelled"
    else:
        cause = f"{type(exc).__name__}: {exc}"
    finish = f"gemmaserve sagemaker delete {plan.endpoint_name} --region {region} --yes"
    if keep or not attempted:
        what = ", ".join(f"{label}:{_name_of(plan, label)}" for label in attempted) or "nothing"
        outcome = DeleteReport(
            endpoint_name=plan.endpoint_name,
            region=region,
            remaining=[f"{label}:{_name_of(plan, label)}" for label in attempted] if keep else [],
        )
        if keep and attempted:
            say(
                f"Deploy stopped ({cause}); keeping what was created in {region} because --keep was given: {what}. "
                f"Delete it later with: {finish}"
            )
            outcome.commands = [finish]
    else:
        say(
            f"Deploy stopped ({cause}): deleting what this run created in {region}: "
            + ", ".join(f"{label}:{_name_of(plan, label)}" for label in reversed(attempted))
        )
        uncertain = [label for label in attempted if label not in run.created]
        outcome = teardown(run.sm, plan, attempted, deps, timeout_s=run.teardown_timeout_s, uncertain=uncertain)
        if not interrupted:  # an interrupt's error message carries the same line
            say(teardown_summary(outcome))
    if settle is not None:
        try:
            settle(outcome)
        except Exception as error:  # the journal must not hide the teardown's own report
            say(f"Could not update the deploy journal: {error}")
    if interrupted:
        raise DeployInterrupted(
            f"Deploy of {plan.endpoint_name!r} in {region} stopped by {signal_name(exc)}. " + teardown_summary(outcome),
            hint=("Finish the cleanup with: " + "; ".join(outcome.commands)) if outcome.commands else None,
            endpoint_name=plan.endpoint_name,
            region=region,
            signal=signal_name(exc),
            deleted=outcome.deleted,
            remaining=outcome.remaining,
            unconfirmed=outcome.unconfirmed,
            commands=outcome.commands,
        ) from exc
    if cancelled:
        # The caller asked for the stop: it gets its own Cancelled back, saying what the teardown did.
        raise Cancelled(
            f"Deploy of {plan.endpoint_name!r} in {region} cancelled. " + teardown_summary(outcome)
        ) from exc
    if isinstance(exc, GemmaserveError):
        exc.fields["teardown"] = outcome.model_dump(mode="json")
    raise exc


def teardown_summary(report: DeleteReport) -> str:
    """One truthful line: what was deleted, what is still there, in which region, and how to finish."""
    text = (
        f"Teardown in {report.region}: deleted {', '.join(report.deleted) or 'nothing'}; "
        f"still there: {', '.join(report.remaining) or ('nothing seen' if report.unconfirmed else 'nothing')}."
    )
    if report.unconfirmed:
        text += (
            f" Sent but not seen within {IN_FLIGHT_WINDOW_S:.0f} s (SageMaker may still make it, and bill): "
            f"{', '.join(report.unconfirmed)}; look again later, and delete what shows."
        )
    if report.remaining or report.unconfirmed:
        text += " Finish with: " + "; ".join(report.commands)
    return text


def _name_of(plan: DeployPlan, label: str) -> str:
    return {"model": plan.model_name, "endpoint-config": plan.config_name, "endpoint": plan.endpoint_name}[label]


def _safe(progress: ProgressCallback | None) -> ProgressCallback:
    """Progress that cannot stop a teardown (a closed terminal after SIGHUP makes stderr writes fail)."""

    def safe(event: ProgressEvent) -> None:
        with contextlib.suppress(OSError):
            report(progress, event)

    return safe


def _teller(progress: ProgressCallback | None) -> Callable[[str], None]:
    """A teardown's lines as ``teardown`` events, through :func:`_safe`."""
    safe = _safe(progress)

    def say(message: str) -> None:
        safe(ProgressEvent("teardown", message))

    return say


def teardown(
    sm: Any,
    plan: DeployPlan,
    created: list[str],
    deps: Deps,
    *,
    timeout_s: float,
    uncertain: list[str] | None = None,
) -> DeleteReport:
    """Delete what this run made, endpoint first (waiting while it is Creating), then check what is left.

    One more Ctrl-C/SIGTERM/SIGHUP is reported and ignored; the next abandons the teardown, and
    the report then lists every resource not confirmed gone with the command that deletes it.
    """
    region = plan.region
    report = DeleteReport(endpoint_name=plan.endpoint_name, region=region)
    finish = f"gemmaserve sagemaker delete {plan.endpoint_name} --region {region} --yes"
    abandoned: BaseException | None = None
    created = list(created)
    say = _teller(deps.progress)
    try:
        with shielded_teardown(say, finish_hint=finish):
            in_flight = [label for label in uncertain or [] if label in created]
            if in_flight:
                say(
                    "Looking for what was being created when the run stopped (SageMaker may still act on a "
                    f"request it received), for up to {IN_FLIGHT_WINDOW_S:.0f} s: "
                    + ", ".join(f"{label}:{_name_of(plan, label)}" for label in in_flight)
                )
            for label in in_flight:
                verdict = _settle_in_flight(sm, plan, label, deps)
                if verdict is not True:
                    created.remove(label)
                    key = f"{label}:{_name_of(plan, label)}"
                    if verdict is None:
                        report.unconfirmed.append(key)
                    else:
                        report.skipped.append(f"{key} (not tagged by this run: left alone)")
            removal = Removal(
                region,
                endpoint=plan.endpoint_name if "endpoint" in created else None,
                configs=[plan.config_name] if "endpoint-config" in created else [],
                models=[plan.model_name] if "model" in created else [],
                busy_timeout_s=timeout_s,
            )
            delete_resources(sm, removal, report, deps.but(progress=_safe(deps.progress)))
    except TeardownAbandoned as exc:
        abandoned = exc
        say(f"Teardown abandoned ({exc.signal_name}).")
    except Exception as error:
        say(f"Teardown incomplete: {error}")
    done = set(report.deleted) | set(report.absent) | {item.split(" ", 1)[0] for item in report.skipped}
    targets = [(label, _name_of(plan, label)) for label in ("endpoint", "endpoint-config", "model") if label in created]
    for label, name in targets:
        key = f"{label}:{name}"
        if key in done:
            continue
        if abandoned is None:
            try:
                if not resource_exists(sm, region, label, name):
                    report.absent.append(key)
                    continue
            except Exception:
                pass
        report.remaining.append(key)
    if report.remaining:
        report.commands = [finish]
    if report.unconfirmed:
        report.commands = [f"gemmaserve sagemaker list --region {region}", finish]
    return report


def _settle_in_flight(sm: Any, plan: DeployPlan, label: str, deps: Deps) -> bool | None:
    """:func:`_made_by_this_run`, looked for by name until it shows or :data:`IN_FLIGHT_WINDOW_S` has passed."""
    now, pause = deps.now, deps.real_sleep()
    started = now()
    while True:
        verdict = _made_by_this_run(sm, plan, label)
        if verdict is not None or (now() - started).total_seconds() >= IN_FLIGHT_WINDOW_S:
            return verdict
        pause(IN_FLIGHT_POLL_S)


def _made_by_this_run(sm: Any, plan: DeployPlan, label: str) -> bool | None:
    """For a Create whose answer never came: None if the resource is absent, else whether its tags are this run's."""
    from gemmaserve.sagemaker.spec.container import made_by_run

    arn = arn_of(sm, plan.region, label, _name_of(plan, label))
    if arn is None:
        return None
    ours = tags_to_dict(plan.calls[0].params.get("Tags", []))
    theirs = tags_to_dict(call(plan.region, sm.list_tags, ResourceArn=arn).get("Tags", []))
    return made_by_run(theirs, ours.get(CREATED_KEY))


# --- fallback ---
# Capacity fallback across regions: try each region in order, skipping those without quota.
#
# Within a region InstancePools is the fallback; across regions we move on when a
# deploy is refused for quota (immediate ``ResourceLimitExceeded``) or fails for
# capacity (``InsufficientInstanceCapacity``, after ~30 min). Each failed region's
# resources are torn down before the next is tried.


QuotaChecker = Callable[[str], list[QuotaCheck]]
Waiter = Callable[[str], EndpointState]  # region -> state, raises on failure


class RegionAttempt(BaseModel):
    region: str
    outcome: str  # "deployed", "skipped-quota", "quota-exceeded", "capacity"
    detail: str


class FallbackResult(BaseModel):
    result: DeployResult
    attempts: list[RegionAttempt]


@dataclass(frozen=True)
class RegionTries:
    """How each region is tried: ``wait`` for InService (None: return once created), regions short of quota
    skipped (``quota_checker``), what is created kept on failure (``keep``), priced by ``price_lookup``."""

    wait: Waiter | None = None
    quota_checker: QuotaChecker | None = None
    keep: bool = False
    price_lookup: PriceLookup = catalog_price
    execute: Callable[..., DeployResult] = execute_deploy


def deploy_across_regions(
    spec: DeploySpec, regions: list[str], deps: Deps, tries: RegionTries | None = None
) -> FallbackResult:
    """Deploy in the first region that has quota and capacity (``deps.cancel`` is checked before each region)."""
    attempts: list[RegionAttempt] = []
    tries = tries or RegionTries()
    wait, quota_checker, progress = tries.wait, tries.quota_checker, deps.progress
    for region in regions:
        check(deps.cancel)
        if quota_checker is not None:
            short = [check for check in quota_checker(region) if check.ok is False]
            if short:
                detail = "; ".join(f"{c.quota_name}: {c.used}/{c.limit} held" for c in short)
                attempts.append(RegionAttempt(region=region, outcome="skipped-quota", detail=detail))
                report(progress, ProgressEvent("fallback", f"Skipping {region}: not enough quota ({detail})"))
                continue
        plan: DeployPlan = plan_deploy(spec, region=region, now=deps.now(), price_lookup=tries.price_lookup)
        waiter: Callable[[], EndpointState] | None = (lambda r=region: wait(r)) if wait is not None else None
        try:
            result = tries.execute(deps.clients("sagemaker", region), plan, deps, keep=tries.keep, wait=waiter)
        except QuotaExceeded as error:
            attempts.append(RegionAttempt(region=region, outcome="quota-exceeded", detail=error.message))
            report(progress, ProgressEvent("fallback", f"{region}: quota exceeded; trying the next region"))
            continue
        except CapacityUnavailable as error:
            attempts.append(RegionAttempt(region=region, outcome="capacity", detail=error.message))
            report(progress, ProgressEvent("fallback", f"{region}: no capacity; trying the next region"))
            continue
        attempts.append(RegionAttempt(region=region, outcome="deployed", detail=plan.endpoint_name))
        return FallbackResult(result=result, attempts=attempts)
    raise CapacityUnavailable(
        f"No region of {regions} could take endpoint {spec.endpoint_name!r}: "
        + "; ".join(f"{a.region}: {a.outcome}" for a in attempts),
        hint="Add regions (--regions), same-GPU instance types to the pool, or request quota.",
        attempts=[a.model_dump() for a in attempts],
    )


def quota_checker_for(factory: ClientFactory, spec: DeploySpec) -> QuotaChecker:
    from gemmaserve.sagemaker.aws import check_quotas

    def checker(region: str) -> list[QuotaCheck]:
        return check_quotas(
            factory("service-quotas", region),
            factory("sagemaker", region),
            spec.instance_types,
            spec.instance_count,
            region=region,
        )

    return checker
