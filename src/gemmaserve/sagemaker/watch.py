"""Wait for an endpoint to come into service, failing early on what would otherwise cost hours.

Clock and sleep are injected (tests run a scripted clock instantly); progress goes
to a callback (the CLI writes it to stderr). Log reads are incremental.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gemmaserve.errors import (
    CapacityUnavailable,
    EndpointFailed,
    EndpointNotFound,
    SageMakerTimedOut,
)
from gemmaserve.findings import Finding, Status
from gemmaserve.sagemaker.diagnosis import (
    DEFAULT_THRESHOLDS,
    LogEvent,
    WatchThresholds,
    diagnose,
)
from gemmaserve.sagemaker.logs import fetch_log_events, log_group_exists
from gemmaserve.sagemaker.status import (
    EndpointState,
    EndpointStatus,
    describe_endpoint_state,
)

Progress = Callable[[str], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _quiet(_: str) -> None:
    return None


def wait_for_endpoint(
    sm: Any,
    logs: Any | None,
    endpoint_name: str,
    *,
    region: str,
    timeout_s: float = 3600.0,
    poll_s: float = 30.0,
    thresholds: WatchThresholds = DEFAULT_THRESHOLDS,
    now: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress = _quiet,
) -> EndpointState:
    """Poll until InService; raise as soon as a fatal diagnosis appears.

    Raises:
        CapacityUnavailable: Failed for capacity (the caller may try another region).
        EndpointFailed: Failed, a crashed container, or a ping-ok-but-Creating stall.
        EndpointNotFound: the endpoint disappeared.
        SageMakerTimedOut: still not InService after ``timeout_s``.
    """
    started = now()
    events: list[LogEvent] = []
    last_event_s: float | None = None
    group_seen = False
    reported: set[str] = set()
    last_status: EndpointStatus | None = None
    while True:
        state = describe_endpoint_state(sm, endpoint_name, region=region, now=now())
        if state.status is not last_status:
            progress(_status_line(state))
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
        for finding in findings:
            if finding.status is Status.FAIL:
                raise _fatal_error(finding, state)
            if finding.check not in reported:
                reported.add(finding.check)
                progress(f"Warning: {finding.detail}" + (f" {finding.fix}" if finding.fix else ""))
        waited_s = (now() - started).total_seconds()
        if waited_s >= timeout_s:
            raise SageMakerTimedOut(
                f"Endpoint {endpoint_name!r} is still {state.status.value} after {waited_s / 60:.0f} min.",
                hint=f"Keep waiting with: gemmaserve sagemaker wait {endpoint_name} --region {region}; "
                f"or delete it: gemmaserve sagemaker delete {endpoint_name} --region {region}",
                endpoint_name=endpoint_name,
                region=region,
                status=state.status.value,
            )
        sleep(min(poll_s, max(timeout_s - waited_s, 0.0)))


def _status_line(state: EndpointState) -> str:
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
