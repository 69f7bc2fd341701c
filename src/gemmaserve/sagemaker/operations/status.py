"""Where an endpoint stands: status as the API spells it, placed instance type, image, elapsed time (adapter).

``describe_endpoint_state`` never raises for a missing endpoint: NotFound is a state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from gemmaserve.cost import PriceLookup, PriceRange, price_range
from gemmaserve.errors import AwsError, CapacityUnavailable, EndpointFailed, EndpointNotFound, SageMakerTimedOut
from gemmaserve.findings import Finding, Status
from gemmaserve.progress import ProgressEvent, check, pause, report
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import Deps, call, is_not_found
from gemmaserve.sagemaker.operations.logs import LogEvent, fetch_log_events, log_group_exists
from gemmaserve.sagemaker.spec import checks
from gemmaserve.sagemaker.spec.container import DEFAULT_AMI, validate_name
from gemmaserve.sagemaker.spec.requests import WaitRequest


class EndpointStatus(StrEnum):
    OUT_OF_SERVICE = "OutOfService"
    CREATING = "Creating"
    UPDATING = "Updating"
    SYSTEM_UPDATING = "SystemUpdating"
    ROLLING_BACK = "RollingBack"
    IN_SERVICE = "InService"
    DELETING = "Deleting"
    FAILED = "Failed"
    UPDATE_ROLLBACK_FAILED = "UpdateRollbackFailed"
    NOT_FOUND = "NotFound"  # ours: DescribeEndpoint says it does not exist

    @property
    def busy(self) -> bool:
        """States in which SageMaker refuses a delete."""
        return self in (
            EndpointStatus.CREATING,
            EndpointStatus.UPDATING,
            EndpointStatus.SYSTEM_UPDATING,
            EndpointStatus.ROLLING_BACK,
        )

    @property
    def billing(self) -> bool:
        return self not in (EndpointStatus.NOT_FOUND, EndpointStatus.FAILED, EndpointStatus.DELETING)


class EndpointState(ActionResult):
    endpoint_name: str
    region: str
    status: EndpointStatus
    failure_reason: str | None = None
    config_name: str | None = None
    instance_type: str | None = None  # placed type; with InstancePools the one that got capacity
    instance_count: int | None = None
    pool_types: list[str] = Field(default_factory=list)
    image: str | None = None
    resolved_image: str | None = None  # digest-pinned URI SageMaker actually pulled
    created_at: datetime | None = None
    elapsed_s: float | None = None
    arn: str | None = None
    usd_per_hour: float | None = None  # of the placed type; None when not placed yet or no price is known
    price_range: PriceRange | None = None  # an InstancePools endpoint: cheapest to dearest type


def describe_endpoint_state(sm: Any, endpoint_name: str, *, region: str, now: datetime) -> EndpointState:
    validate_name(endpoint_name)
    try:
        described = call(region, sm.describe_endpoint, EndpointName=endpoint_name)
    except AwsError as error:
        if is_not_found(error):
            return EndpointState(endpoint_name=endpoint_name, region=region, status=EndpointStatus.NOT_FOUND)
        raise
    state = state_from_description(described, region=region, now=now)
    if state.config_name and (state.instance_type is None or not state.pool_types):
        # DescribeEndpoint's variant summary has no InstanceType; the config has what was asked for.
        try:
            config = call(region, sm.describe_endpoint_config, EndpointConfigName=state.config_name)
        except AwsError as error:
            if not is_not_found(error):
                raise
        else:
            state = with_config(state, config)
    return state


def with_config(state: EndpointState, config: dict[str, Any]) -> EndpointState:
    """Pure: fill the requested type(s) from a DescribeEndpointConfig response where the endpoint did not say."""
    variants = config.get("ProductionVariants") or []
    if not variants:
        return state
    variant = variants[0]
    pools = sorted(variant.get("InstancePools") or [], key=lambda pool: pool.get("Priority", 0))
    pool_types = state.pool_types or [pool["InstanceType"] for pool in pools]
    instance_type = state.instance_type
    if instance_type is None and not pools:
        instance_type = variant.get("InstanceType")
    return state.model_copy(update={"pool_types": pool_types, "instance_type": instance_type})


def state_from_description(described: dict[str, Any], *, region: str, now: datetime) -> EndpointState:
    """Pure: a DescribeEndpoint response → EndpointState."""
    variants = described.get("ProductionVariants") or []
    variant = variants[0] if variants else {}
    pools = variant.get("InstancePools") or []
    placed = [pool for pool in pools if (pool.get("CurrentInstanceCount") or 0) > 0]
    instance_type = (placed[0] if placed else {}).get("InstanceType") or variant.get("InstanceType")
    images = variant.get("DeployedImages") or []
    created_at = described.get("CreationTime")
    status_text = described.get("EndpointStatus", "OutOfService")
    try:
        status = EndpointStatus(status_text)
    except ValueError:
        status = EndpointStatus.OUT_OF_SERVICE
    return EndpointState(
        endpoint_name=described["EndpointName"],
        region=region,
        status=status,
        failure_reason=described.get("FailureReason"),
        config_name=described.get("EndpointConfigName"),
        instance_type=instance_type,
        instance_count=variant.get("CurrentInstanceCount"),
        pool_types=[pool["InstanceType"] for pool in pools if pool.get("InstanceType")],
        image=(images[0].get("SpecifiedImage") if images else None),
        resolved_image=(images[0].get("ResolvedImage") if images else None),
        created_at=created_at,
        elapsed_s=(now - created_at).total_seconds() if created_at else None,
        arn=described.get("EndpointArn"),
    )


def with_prices(state: EndpointState, lookup: PriceLookup) -> EndpointState:
    """The state with $/hour of the placed type and, for a pool, the range over its types."""
    count = state.instance_count or 1
    placed = lookup(state.instance_type, state.region) if state.instance_type else None
    pool = price_range(state.pool_types, state.region, lookup, count) if state.pool_types else None
    return state.model_copy(
        update={"usd_per_hour": placed.usd_per_hour * count if placed else None, "price_range": pool}
    )


# --- startup ---
# Waiting for an endpoint to come up: the poll loop to InService, its status line, and the early diagnosis.
#
# :func:`wait_for_endpoint` follows an endpoint into service and fails early on the slow SageMaker
# failures, the ones that cost hours: no log group long after creation (waiting for capacity, or a
# container that cannot start), ``CannotStartContainerError`` (CUDA newer than the host driver), a
# container crash in the log, and an endpoint still ``Creating`` long after its container answered
# ``/ping``. :func:`diagnose` (pure) names each as a :class:`gemmaserve.findings.Finding`: ``fail`` is
# fatal (the wait stops and says why), ``warn`` is reported once and the wait goes on.


PING_OK = re.compile(r'"GET /ping HTTP/1\.[01]" 200')
# A traceback alone is not a death: libraries log handled exceptions (a failed optional import,
# a retried download) with full tracebacks and go on. Only lines that mean the process ended are.
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_CRASH = (
    re.compile(r"exited with (?:code|status) [1-9]"),
    re.compile(r"Worker failed to boot|ERROR: Application startup failed"),
)


@dataclass(frozen=True, slots=True)
class WatchThresholds:
    no_log_group_after_s: float = 15 * 60
    ping_stall_after_s: float = 15 * 60


DEFAULT_THRESHOLDS = WatchThresholds()


def crash_lines(messages: Sequence[str]) -> list[str]:
    """Lines that mean the container or engine died (our patterns plus the engine log parser's fatal ones)."""
    from gemmaserve.engine_log import parse_engine_log

    found = [line.strip() for line in messages if any(pattern.search(line) for pattern in _CRASH)]
    found.extend(parse_engine_log(messages).errors)
    return list(dict.fromkeys(found))


def first_ping_s(events: Sequence[LogEvent]) -> float | None:
    times = [event.timestamp_s for event in events if PING_OK.search(event.message)]
    return min(times) if times else None


def diagnose(
    state: EndpointState,
    *,
    now_s: float,
    log_group_exists: bool | None,
    events: Sequence[LogEvent],
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
) -> list[Finding]:
    """Everything wrong or suspicious right now, fatal first."""
    name = state.endpoint_name
    reason = state.failure_reason or ""
    found: list[Finding] = []
    logs_hint = f"gemmaserve sagemaker logs {name} --region {state.region}"
    if state.status is EndpointStatus.FAILED:
        if "CannotStartContainerError" in reason:
            fix = (
                f"A CUDA 13 image on ml.g4dn needs InferenceAmiVersion={DEFAULT_AMI} (gemmaserve sets it unless "
                f"--ami overrides it); check the image with: gemmaserve sagemaker preflight … ; then {logs_hint}"
            )
            detail = f"Endpoint {name!r} failed: the container could not start ({reason})."
            return [checks.CANNOT_START_CONTAINER.fail(detail, fix=fix)]
        if "InsufficientInstanceCapacity" in reason or "insufficient capacity" in reason.lower():
            detail = f"Endpoint {name!r} failed for capacity in {state.region}: {reason}"
            fix = "Retry in another region (deploy --regions …) or add same-GPU types to the pool."
            return [checks.CAPACITY.fail(detail, fix=fix)]
        detail = f"Endpoint {name!r} is Failed: {reason or 'no reason given'}."
        return [checks.FAILED.fail(detail, fix=f"See its log: {logs_hint}")]
    crashes = crash_lines([event.message for event in events])
    coming_up = state.status is not EndpointStatus.IN_SERVICE
    if crashes and coming_up:
        detail = f"Endpoint {name!r}: the container log shows a crash: {crashes[0][:300]}"
        fix = f"SageMaker will retry and bill until it gives up; delete it and fix the cause. Full log: {logs_hint}"
        found.append(checks.CONTAINER_CRASHED.fail(detail, fix=fix))
    elif coming_up and any(TRACEBACK.search(event.message) for event in events):
        detail = (
            f"Endpoint {name!r}: the container logged a Python traceback (not by itself fatal; waiting to see "
            "whether the server comes up)."
        )
        found.append(checks.TRACEBACK_IN_LOG.warn(detail, fix=f"Read it with: {logs_hint} --grep Traceback"))
    if state.status is EndpointStatus.CREATING:
        ping_s = first_ping_s(events)
        if ping_s is not None and now_s - ping_s >= thresholds.ping_stall_after_s:
            detail = (
                f"Endpoint {name!r} has answered /ping for {(now_s - ping_s) / 60:.0f} min but SageMaker still "
                "says Creating."
            )
            fix = (
                "This does not resolve on its own: delete the endpoint and deploy again (gemmaserve sagemaker "
                f"delete {name})."
            )
            found.append(checks.PING_STALL.fail(detail, fix=fix))
        elapsed = state.elapsed_s or 0.0
        if log_group_exists is False and elapsed >= thresholds.no_log_group_after_s:
            detail = (
                f"Endpoint {name!r} has been Creating for {elapsed / 60:.0f} min with no log group: SageMaker is "
                "waiting for capacity, or the container cannot start."
            )
            fix = "A capacity failure surfaces only after ~30 min; consider deleting and trying another region."
            found.append(checks.NO_LOG_GROUP.warn(detail, fix=fix))
    found.sort(key=lambda item: item.status is not Status.FAIL)
    return found


def wait_for_endpoint(
    sm: Any,
    logs: Any | None,
    request: WaitRequest,
    deps: Deps,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
) -> EndpointState:
    """Poll until InService; raise as soon as a fatal diagnosis appears. Log reads are incremental.

    Reports each status change (``phase`` the status, ``done``/``total`` seconds waited of ``timeout_s``)
    and each warning once, to ``deps.progress``. ``deps.sleep`` is a test's scripted sleep (None: real time,
    cut short by ``deps.cancel``); the token is checked at every poll. Cancelling only stops following: the
    endpoint is left as it is.

    Raises:
        CapacityUnavailable: Failed for capacity (the caller may try another region).
        EndpointFailed: Failed, a crashed container, or a ping-ok-but-Creating stall.
        EndpointNotFound: the endpoint disappeared.
        SageMakerTimedOut: still not InService after ``timeout_s``.
        Cancelled: ``cancel`` was set.
    """
    endpoint_name, region = request.endpoint_name, request.chosen_region()
    timeout_s, now, progress = request.timeout_s, deps.now, deps.progress
    started = now()
    events: list[LogEvent] = []
    last_event_s: float | None = None
    group_seen = False
    reported: set[str] = set()
    last_status: EndpointStatus | None = None
    while True:
        check(deps.cancel)
        state = describe_endpoint_state(sm, endpoint_name, region=region, now=now())
        waited_s = (now() - started).total_seconds()
        if state.status is not last_status:
            report(progress, ProgressEvent(state.status.value, status_line(state), done=waited_s, total=timeout_s))
            last_status = state.status
        if state.status is EndpointStatus.IN_SERVICE:
            return state
        if state.status is EndpointStatus.NOT_FOUND:
            raise EndpointNotFound(
                f"Endpoint {endpoint_name!r} does not exist in {region}.",
                hint="List yours with: gemmaserve sagemaker list",
                endpoint_name=endpoint_name,
                region=region,
            )
        if logs is not None and state.status is not EndpointStatus.FAILED:
            group_seen = group_seen or log_group_exists(logs, endpoint_name, region=region)
            if group_seen:
                new, _, _ = fetch_log_events(
                    logs,
                    endpoint_name,
                    region=region,
                    start_s=None if last_event_s is None else last_event_s + 0.001,
                )
                events.extend(new)
                if new:
                    last_event_s = max(event.timestamp_s for event in new)
        findings = diagnose(
            state,
            now_s=now().timestamp(),
            log_group_exists=group_seen if logs is not None else None,
            events=events,
            thresholds=thresholds,
        )
        waited_s = (now() - started).total_seconds()  # read again: MCP wants each event's ``done`` larger
        for finding in findings:
            if finding.status is Status.FAIL:
                raise _fatal_error(finding, state)
            if finding.check not in reported:
                reported.add(finding.check)
                warning = " ".join(part for part in ("Warning:", finding.detail, finding.fix) if part)
                report(progress, ProgressEvent("warning", warning, done=waited_s, total=timeout_s))
        if waited_s >= timeout_s:
            raise SageMakerTimedOut(
                f"Endpoint {endpoint_name!r} is still {state.status.value} after {waited_s / 60:.0f} min.",
                hint=f"Keep waiting with: gemmaserve sagemaker wait {endpoint_name} --region {region}; "
                f"or delete it: gemmaserve sagemaker delete {endpoint_name} --region {region}",
                endpoint_name=endpoint_name,
                region=region,
                status=state.status.value,
            )
        pause(min(request.poll_s, max(timeout_s - waited_s, 0.0)), cancel=deps.cancel, sleep=deps.sleep)


def status_line(state: EndpointState) -> str:
    """``NAME (region): Creating on ml.g6.xlarge after 3.5 min — reason``: a wait's progress line."""
    parts = [f"{state.endpoint_name} ({state.region}): {state.status.value}"]
    if state.instance_type:
        parts.append(f"on {state.instance_type}")
    if state.elapsed_s is not None:
        parts.append(f"after {state.elapsed_s / 60:.1f} min")
    if state.failure_reason:
        parts.append(f"— {state.failure_reason}")
    return " ".join(parts)


def _fatal_error(finding: Finding, state: EndpointState) -> EndpointFailed | CapacityUnavailable:
    fields = {
        "endpoint_name": state.endpoint_name,
        "region": state.region,
        "status": state.status.value,
        "failure_reason": state.failure_reason,
        "diagnosis": finding.check,
    }
    if finding.check == "capacity":
        return CapacityUnavailable(
            finding.detail, hint=finding.fix, aws_error_code="InsufficientInstanceCapacity", **fields
        )
    return EndpointFailed(finding.detail, hint=finding.fix, **fields)
